package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

var _ store.Recorder = (*Store)(nil)

// appendRecord executes an OpAppendRecord. Like apply, a failure of the
// operation is in the Result; an error is a failure of the transaction.
// The first record of a transaction reads meta.records (the row is locked
// by the transaction already); runTx stores the last one given out.
func (w *writeTx) appendRecord(op store.Op) (store.Result, error) {
	r := op.Record
	if r == nil {
		return store.Result{Err: fmt.Errorf("%s: no record", op.Type)}, nil
	}
	if err := backend.CheckRecord(r); err != nil {
		return store.Result{Err: fmt.Errorf("%s to %q: %w", op.Type, r.Stream, err)}, nil
	}
	at := w.now
	if !r.Time.IsZero() {
		at = r.Time.UnixNano()
	}
	terms, err := json.Marshal(r.Terms)
	if err != nil {
		return store.Result{Err: fmt.Errorf("%s to %q: terms: %w", op.Type, r.Stream, err)}, nil
	}
	seq := w.records + 1
	data := r.Data
	if data == nil {
		data = []byte{} // NOT NULL
	}
	w.recordRows = append(w.recordRows, r.Stream, seq, at, string(terms), data)
	for _, term := range backend.Dedupe(r.Terms) {
		w.termRows = append(w.termRows, r.Stream, term, seq)
	}
	w.records = seq
	return store.Result{}, nil
}

// Rows of one INSERT of writeRecords, at most: 5 and 3 values a row stay
// under SQLite's and PostgreSQL's bounds on parameters.
const recordsPerInsert = 200

// writeRecords inserts the records and terms the transaction appended, a
// few statements for all of them rather than one per row: on PostgreSQL
// each statement is a round trip the single writer waits for.
func (w *writeTx) writeRecords() error {
	for _, t := range []struct {
		head string
		cols int
		rows []any
	}{
		{`INSERT INTO records (stream, seq, time, terms, data) VALUES `, 5, w.recordRows},
		{`INSERT INTO record_terms (stream, term, seq) VALUES `, 3, w.termRows},
	} {
		row := "(" + strings.Repeat("?, ", t.cols-1) + "?)"
		for rows := t.rows; len(rows) > 0; {
			n := min(len(rows)/t.cols, recordsPerInsert)
			var b strings.Builder
			b.WriteString(t.head)
			for i := range n {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(row)
			}
			if _, err := w.tx.ExecContext(w.ctx, w.s.d.rebind(b.String()), rows[:n*t.cols]...); err != nil {
				return w.s.dbErr(w.ctx, fmt.Errorf("append records: %w", err))
			}
			rows = rows[n*t.cols:]
		}
	}
	return nil
}

// Records implements store.Recorder. The query is built for the filters
// given: each term is a lookup in record_terms' primary key, times use the
// (stream, time) index, and the result comes in primary key order.
func (s *Store) Records(ctx context.Context, q store.RecordQuery) ([]store.Record, error) {
	if s.isClosed() {
		return nil, fmt.Errorf("records: %w", store.ErrClosed)
	}
	limit, err := backend.CheckRecordQuery(q)
	if err != nil {
		return nil, fmt.Errorf("records: %w", err)
	}
	var b strings.Builder
	args := []any{q.Stream}
	b.WriteString(`SELECT seq, time, terms, data FROM records WHERE stream = ?`)
	if q.After > 0 {
		b.WriteString(` AND seq > ?`)
		args = append(args, q.After)
	}
	if q.Before > 0 {
		b.WriteString(` AND seq < ?`)
		args = append(args, q.Before)
	}
	if !q.Since.IsZero() {
		b.WriteString(` AND time >= ?`)
		args = append(args, q.Since.UnixNano())
	}
	if !q.Until.IsZero() {
		b.WriteString(` AND time < ?`)
		args = append(args, q.Until.UnixNano())
	}
	for _, t := range backend.Dedupe(q.Terms) {
		b.WriteString(` AND seq IN (SELECT seq FROM record_terms WHERE stream = ? AND term = ?)`)
		args = append(args, q.Stream, t)
	}
	b.WriteString(` ORDER BY seq`)
	if q.Descending {
		b.WriteString(` DESC`)
	}
	b.WriteString(` LIMIT ?`)
	args = append(args, limit)
	rows, err := s.read.QueryContext(ctx, s.d.rebind(b.String()), args...)
	if err != nil {
		return nil, fmt.Errorf("records of %q: %w", q.Stream, s.dbErr(ctx, err))
	}
	defer rows.Close()
	var out []store.Record
	for rows.Next() {
		r := store.Record{Stream: q.Stream}
		var at int64
		var terms string
		if err := rows.Scan(&r.Seq, &at, &terms, &r.Data); err != nil {
			return nil, fmt.Errorf("records of %q: %w", q.Stream, s.dbErr(ctx, err))
		}
		if err := json.Unmarshal([]byte(terms), &r.Terms); err != nil {
			return nil, fmt.Errorf("records of %q: record %d: terms: %w", q.Stream, r.Seq, err)
		}
		if len(r.Data) == 0 {
			r.Data = nil // both backends alike
		}
		r.Time = time.Unix(0, at).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("records of %q: %w", q.Stream, s.dbErr(ctx, err))
	}
	return out, nil
}

// CompactRecords implements store.Recorder: it deletes, in one
// transaction, the records of stream older than before and their terms.
// It is safe to call concurrently with everything, also from several
// processes sharing a database.
func (s *Store) CompactRecords(ctx context.Context, stream string, before time.Time) (int, error) {
	if s.isClosed() {
		return 0, fmt.Errorf("compact records: %w", store.ErrClosed)
	}
	if err := backend.CheckStream(stream); err != nil {
		return 0, fmt.Errorf("compact records: %w", err)
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("compact records of %q: %w", stream, s.dbErr(ctx, err))
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	cut := before.UnixNano()
	if _, err := tx.ExecContext(ctx, s.q.deleteRecordTerms, stream, stream, cut); err != nil {
		return 0, fmt.Errorf("compact records of %q: %w", stream, s.dbErr(ctx, err))
	}
	res, err := tx.ExecContext(ctx, s.q.deleteRecords, stream, cut)
	if err != nil {
		return 0, fmt.Errorf("compact records of %q: %w", stream, s.dbErr(ctx, err))
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("compact records of %q: %w", stream, s.dbErr(ctx, err))
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("compact records of %q: %w", stream, s.dbErr(ctx, err))
	}
	return int(n), nil
}

// recordQueries are the statements of records, in queries.
func recordQueries(q *queries) {
	q.deleteRecordTerms = `DELETE FROM record_terms WHERE stream = ? AND seq IN (SELECT seq FROM records WHERE stream = ? AND time < ?)`
	q.deleteRecords = `DELETE FROM records WHERE stream = ? AND time < ?`
}
