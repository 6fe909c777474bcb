package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/meshnames/meshnames/internal/store/sqlstore"
)

// pipe is sqlstore.Pipe over one pgx connection: the statements queued
// are sent as one pgx.Batch, all of them before the first result is read
// (one round trip), and run by the server in order. Statements pgx has not
// prepared on the connection yet are prepared first (one more round trip,
// once per connection and statement).
type pipe struct {
	conn  *pgx.Conn
	batch pgx.Batch
	reads []func(scan func(dest ...any) error) error // per statement; nil for no rows
}

// newPipe is Dialect.Pipeline: driverConn is what sql.Conn.Raw hands over.
func newPipe(driverConn any) (sqlstore.Pipe, error) {
	c, ok := driverConn.(*stdlib.Conn)
	if !ok {
		return nil, fmt.Errorf("pipeline: driver connection is %T, not pgx's", driverConn)
	}
	return &pipe{conn: c.Conn()}, nil
}

// Queue implements sqlstore.Pipe.
func (p *pipe) Queue(query string, args []any, row func(scan func(dest ...any) error) error) {
	p.batch.Queue(query, args...)
	p.reads = append(p.reads, row)
}

// Send implements sqlstore.Pipe.
func (p *pipe) Send(ctx context.Context) (int, error) {
	if len(p.reads) == 0 {
		return -1, nil
	}
	batch, reads := p.batch, p.reads
	p.batch, p.reads = pgx.Batch{}, nil
	br := p.conn.SendBatch(ctx, &batch)
	for i, read := range reads {
		if err := readResult(br, read); err != nil {
			_ = br.Close() // the first error is the one to report
			return i, err
		}
	}
	return -1, br.Close()
}

// readResult reads the result of the next statement of br, calling read
// for each of its rows.
func readResult(br pgx.BatchResults, read func(scan func(dest ...any) error) error) error {
	if read == nil {
		_, err := br.Exec()
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := read(rows.Scan); err != nil {
			return err
		}
	}
	return rows.Err()
}
