package sqlstore

import (
	"context"
	"fmt"

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Pipe sends the statements of one write transaction to the database in
// batches (Dialect.Pipeline): a batch is one round trip however many
// statements it holds, which matters on PostgreSQL, where the writer would
// otherwise wait for the network and the server once per statement.
type Pipe interface {
	// Queue adds a statement, run after those queued before it. row, when
	// not nil, is called for each row of its result with a function that
	// scans that row.
	Queue(query string, args []any, row func(scan func(dest ...any) error) error)
	// Send runs the statements queued since the last Send, in order, and
	// reads their results. The database stops at the first that fails:
	// Send returns its index among them and its error; -1 and nil when all
	// succeeded.
	Send(ctx context.Context) (failed int, err error)
}

// pipelineQueries are the writer's PostgreSQL statements that take a whole
// group at once, with arrays: their text does not depend on the number of
// rows, so each is prepared once per connection.
type pipelineQueries struct {
	// loadKeys returns the rows, live or tombstone, of the keys given as
	// three arrays (kinds, meshes, names): one index lookup each.
	loadKeys string
	// createLease is createLease returning a row when it inserted one.
	createLease string
	// insertRecords and insertTerms insert the rows given as arrays, one
	// per column.
	insertRecords, insertTerms string
}

func newPipelineQueries() pipelineQueries {
	return pipelineQueries{
		loadKeys: `SELECT r.kind, r.mesh, r.name, r.version, r.revision, r.deleted, r.labels, r.spec, r.status,
			r.creation_time, r.modification_time
			FROM unnest($1::text[], $2::text[], $3::text[]) AS k(kind, mesh, name)
			JOIN resources r ON r.kind = k.kind COLLATE "C" AND r.mesh = k.mesh COLLATE "C" AND r.name = k.name COLLATE "C"`,
		createLease: `INSERT INTO leases (` + leaseColumns + `) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING RETURNING 1`,
		insertRecords: `INSERT INTO records (stream, seq, time, terms, data)
			SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::bytea[])`,
		insertTerms: `INSERT INTO record_terms (stream, term, seq) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[])`,
	}
}

// scanFunc makes a Pipe's scan function a scanner.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// runPipelined is runTx with Dialect.Pipeline, in two round trips for a
// group in the usual case:
//
//  1. BEGIN, the meta lock (revision and record sequence), the fence of
//     every fenced request, and the rows of every key the group writes;
//  2. the writes of every operation (decided in between by backend.Next
//     over the rows read and those the group wrote before them), the
//     records, meta, the notification and COMMIT.
//
// The meta lock serializes writers, also across instances, so the rows
// read in the first round trip stay the latest until the commit. A create
// of a lease, whose result is whether the name existed, and the fence of a
// request that an earlier request's lease operation may have changed are
// sent when their turn comes, with the writes queued before them: the
// outcomes are those of running every statement in order, as runTx does.
func (s *Store) runPipelined(group []*backend.Request) (outcomes []backend.Outcome, last int64, culprit int, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.writeTimeout)
	defer cancel()
	conn, err := s.write.Conn(ctx)
	if err != nil {
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("begin: %w", err))
	}
	defer func() { _ = conn.Close() }() // back to the pool
	var txErr error
	rawErr := conn.Raw(func(driverConn any) error {
		p, err := s.d.Pipeline(driverConn)
		if err != nil {
			return err
		}
		outcomes, last, culprit, txErr = s.pipelineTx(ctx, p, group)
		if txErr != nil {
			// End the transaction the failure aborted. Should that fail
			// too, database/sql discards the connection, which is still
			// in a transaction, before anyone reuses it.
			p.Queue(`ROLLBACK`, nil, nil)
			_, _ = p.Send(ctx)
		}
		return txErr
	})
	switch {
	case txErr != nil:
		return nil, 0, culprit, txErr
	case rawErr != nil:
		return nil, 0, -1, s.dbErr(ctx, fmt.Errorf("begin: %w", rawErr))
	}
	return outcomes, last, -1, nil
}

// pipelineTx runs the transaction of runPipelined on p. On failure,
// culprit is the index of the request whose statement failed, or -1.
func (s *Store) pipelineTx(ctx context.Context, p Pipe, group []*backend.Request) (outcomes []backend.Outcome, last int64, culprit int, err error) {
	w := &writeTx{s: s, ctx: ctx, pipe: p, now: s.now().UnixNano(), culprit: -1,
		rows: map[resource.Key]*row{}}
	w.queue(`BEGIN`, nil, nil)
	w.queue(s.q.lockMetaWrite, nil, func(scan func(...any) error) error { return scan(&w.revision, &w.records) })
	// The fences no earlier request of the group can change are checked
	// in this first round trip.
	current := make([]bool, len(group))
	checked := make([]bool, len(group))
	leases := map[string]bool{} // names of leases the requests before write
	var kinds, meshes, names []string
	for i, r := range group {
		if r.Fence != nil && !leases[r.Fence.Lease] {
			checked[i] = true
			w.queue(s.q.fence, []any{r.Fence.Lease, r.Fence.LeaseValue()}, func(func(...any) error) error {
				current[i] = true
				return nil
			})
		}
		for j, op := range r.Ops {
			switch op.Type {
			case store.OpPutLease, store.OpDeleteLease, store.OpCreateLease:
				if op.Lease != nil {
					leases[op.Lease.Name] = true
				}
				continue
			case store.OpAppendRecord:
				continue
			}
			pr := r.Prepared(j)
			if pr == nil || pr.Err != nil || pr.EncodeErr != nil {
				continue
			}
			if _, ok := w.rows[pr.Key]; ok {
				continue
			}
			w.rows[pr.Key] = nil // read below; nil until a row is found
			kinds, meshes, names = append(kinds, string(pr.Key.Kind)), append(meshes, pr.Key.Mesh), append(names, pr.Key.Name)
		}
	}
	if len(names) > 0 {
		w.queue(s.pq.loadKeys, []any{kinds, meshes, names}, func(scan func(...any) error) error {
			r, err := scanRow(scanFunc(scan))
			if err != nil {
				return err
			}
			w.rows[r.Key] = r
			return nil
		})
	}
	if err := w.send(); err != nil {
		return nil, 0, -1, fmt.Errorf("begin: %w", err)
	}
	base, recordsBase := w.revision, w.records
	outcomes = make([]backend.Outcome, len(group))
	for i, r := range group {
		w.req, w.culprit = i, i
		if r.Fence != nil {
			ok := current[i]
			if !checked[i] {
				if ok, err = w.fenced(r.Fence); err != nil {
					return nil, 0, w.culprit, err
				}
			}
			if !ok {
				outcomes[i].Err = fmt.Errorf("apply: lease %q, holder %q, term %d: %w", r.Fence.Lease, r.Fence.Holder, r.Fence.Term, store.ErrFenced)
				continue
			}
		}
		results := make([]store.Result, len(r.Ops))
		for j, op := range r.Ops {
			if err := backend.Dependencies(op, j, results); err != nil {
				results[j] = store.Result{Err: err}
				continue
			}
			if results[j], err = w.apply(op, r.Prepared(j)); err != nil {
				return nil, 0, w.culprit, err
			}
		}
		outcomes[i].Results = results
	}
	w.req = -1
	if w.records > recordsBase {
		w.queueRecords()
	}
	if w.revision > base || w.records > recordsBase {
		w.queue(s.q.setMeta, []any{w.revision, w.records}, nil)
	}
	if w.revision > base && s.d.Notify != nil {
		query, args := s.d.Notify(w.revision)
		w.queue(query, args, nil)
	}
	w.queue(`COMMIT`, nil, nil)
	if err := w.send(); err != nil {
		return nil, 0, w.culprit, fmt.Errorf("commit: %w", err)
	}
	s.recent.Add(w.events)
	if w.revision == base {
		return outcomes, 0, -1, nil
	}
	return outcomes, w.revision, -1, nil
}

// queue adds a statement to the pipe on behalf of the request being
// written (w.req, -1 for the transaction's own statements).
func (w *writeTx) queue(query string, args []any, row func(scan func(dest ...any) error) error) {
	w.pipe.Queue(query, args, row)
	w.owners = append(w.owners, w.req)
}

// send sends the statements queued. On failure it sets w.culprit to the
// request whose statement failed (-1 for the transaction's own) and
// returns the error classified by dbErr.
func (w *writeTx) send() error {
	owners := w.owners
	w.owners = w.owners[:0]
	failed, err := w.pipe.Send(w.ctx)
	if err == nil {
		return nil
	}
	w.culprit = -1
	if failed >= 0 && failed < len(owners) {
		w.culprit = owners[failed]
	}
	return w.s.dbErr(w.ctx, err)
}

// loadPiped returns the row of key as the group left it: read in the
// first round trip, or, for a key that was not (an operation without its
// preparation), read now.
func (w *writeTx) loadPiped(key resource.Key) (*row, error) {
	if r, ok := w.rows[key]; ok {
		return r, nil
	}
	var r *row
	w.queue(w.s.q.load, []any{string(key.Kind), key.Mesh, key.Name}, func(scan func(...any) error) error {
		var err error
		r, err = scanRow(scanFunc(scan))
		return err
	})
	if err := w.send(); err != nil {
		return nil, fmt.Errorf("load %s: %w", key, err)
	}
	w.rows[key] = r
	return r, nil
}

// putPiped queues the write of r and keeps it as the row of its key for
// the operations after it.
func (w *writeTx) putPiped(r *row, exists bool) {
	if exists {
		w.queue(w.s.q.update, []any{r.Version, r.Revision, r.Deleted, r.Labels, r.Spec, r.Status,
			r.Created, r.Modified, string(r.Key.Kind), r.Key.Mesh, r.Key.Name}, nil)
	} else {
		w.queue(w.s.q.insert, []any{string(r.Key.Kind), r.Key.Mesh, r.Key.Name, r.Version, r.Revision,
			r.Deleted, r.Labels, r.Spec, r.Status, r.Created, r.Modified}, nil)
	}
	next := *r
	w.rows[r.Key] = &next
}

// leasePiped queues a lease operation; a create, whose outcome is whether
// the name existed, is sent at once.
func (w *writeTx) leasePiped(t store.OpType, name string, value []byte, expires int64) (store.Result, error) {
	switch t {
	case store.OpDeleteLease:
		w.queue(w.s.q.deleteLease, []any{name}, nil)
	case store.OpPutLease:
		w.queue(w.s.q.putLease, []any{name, value, expires}, nil)
	case store.OpCreateLease:
		created := false
		w.queue(w.s.pq.createLease, []any{name, value, expires}, func(func(...any) error) error {
			created = true
			return nil
		})
		if err := w.send(); err != nil {
			return store.Result{}, fmt.Errorf("create lease %q: %w", name, err)
		}
		if !created {
			return store.Result{Err: fmt.Errorf("%s %q: %w", t, name, store.ErrAlreadyExists)}, nil
		}
	}
	return store.Result{}, nil
}

// fencedPiped is fenced, sent at once with the writes queued before it.
func (w *writeTx) fencedPiped(f *store.Fence) (bool, error) {
	current := false
	w.queue(w.s.q.fence, []any{f.Lease, f.LeaseValue()}, func(func(...any) error) error {
		current = true
		return nil
	})
	if err := w.send(); err != nil {
		return false, fmt.Errorf("check fence %q: %w", f.Lease, err)
	}
	return current, nil
}

// queueRecords queues the insert of the records and terms the transaction
// appended, one statement each, with a column of values per array.
func (w *writeTx) queueRecords() {
	n := len(w.recordRows) / 5
	streams, seqs, times, terms, data := make([]string, n), make([]int64, n), make([]int64, n), make([]string, n), make([][]byte, n)
	for i := range n {
		v := w.recordRows[5*i:]
		streams[i], seqs[i], times[i], terms[i], data[i] = v[0].(string), v[1].(int64), v[2].(int64), v[3].(string), v[4].([]byte)
	}
	w.queue(w.s.pq.insertRecords, []any{streams, seqs, times, terms, data}, nil)
	if len(w.termRows) == 0 {
		return
	}
	n = len(w.termRows) / 3
	tStreams, tTerms, tSeqs := make([]string, n), make([]string, n), make([]int64, n)
	for i := range n {
		v := w.termRows[3*i:]
		tStreams[i], tTerms[i], tSeqs[i] = v[0].(string), v[1].(string), v[2].(int64)
	}
	w.queue(w.s.pq.insertTerms, []any{tStreams, tTerms, tSeqs}, nil)
}
