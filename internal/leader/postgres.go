package leader

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresLock elects one leader among the instances sharing a PostgreSQL
// schema with a session advisory lock, keyed by the schema so that separate
// deployments in one database do not exclude each other. The holder keeps
// a dedicated connection and checks it every CheckInterval; when the check
// fails it stops leading, and PostgreSQL releases the lock when the session
// ends, so another instance takes over.
//
// It gives "one leader at a time" while connections behave. It does not
// fence: a leader cut off from the database stops within CheckInterval, but
// a write it had in flight may still land. The lease with a fencing term
// checked in every status write replaces it in the high-availability work.
type PostgresLock struct {
	URL           string
	Log           *slog.Logger
	CheckInterval time.Duration // default 1 s
	RetryInterval time.Duration // default 2 s: how often a follower tries
}

const lockQuery = `SELECT pg_try_advisory_lock(hashtextextended('meshnames-leader:' || current_schema(), 0))`

// Run implements Elector.
func (p PostgresLock) Run(ctx context.Context, lead func(ctx context.Context)) error {
	if p.CheckInterval <= 0 {
		p.CheckInterval = time.Second
	}
	if p.RetryInterval <= 0 {
		p.RetryInterval = 2 * time.Second
	}
	for ctx.Err() == nil {
		conn, err := p.acquire(ctx)
		if err != nil && ctx.Err() == nil {
			p.Log.Warn("leader election: cannot reach the database; will retry", "err", err)
		}
		if conn != nil {
			p.hold(ctx, conn, lead)
		}
		select {
		case <-ctx.Done():
		case <-time.After(p.RetryInterval):
		}
	}
	return nil
}

// acquire returns a connection holding the lock, or nil when another
// instance holds it.
func (p PostgresLock) acquire(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, p.URL)
	if err != nil {
		return nil, err
	}
	var got bool
	if err := conn.QueryRow(cctx, lockQuery).Scan(&got); err != nil || !got {
		_ = conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// hold leads while the lock's connection is healthy and ctx lasts.
func (p PostgresLock) hold(ctx context.Context, conn *pgx.Conn, lead func(ctx context.Context)) {
	defer conn.Close(context.Background()) // ends the session: releases the lock
	p.Log.Info("leader election: this instance leads")
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(lctx)
	}()
	t := time.NewTicker(p.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			stop()
			<-done
			return
		case <-done:
			stop()
			return
		case <-t.C:
			cctx, cancel := context.WithTimeout(ctx, p.CheckInterval)
			err := conn.Ping(cctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				p.Log.Warn("leader election: lost the database; stepping down", "err", err)
				stop()
				<-done
				return
			}
		}
	}
}
