package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/meshnames/meshnames/internal/store"
)

// Reconnect backoff of the listener.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 5 * time.Second
)

// listener turns notifications from other instances into Notifier wake-ups.
type listener struct {
	cfg      *pgx.ConnConfig
	schema   string
	instance string // tells our own notifications from other instances'
	notifier *store.Notifier
	log      *slog.Logger
	pid      atomic.Uint32 // backend pid of the current connection, for tests
}

// payload is what a commit at revision announces: "revision instance
// schema". The schema goes last because it may contain spaces.
func (l *listener) payload(revision int64) string {
	return fmt.Sprintf("%d %s %s", revision, l.instance, l.schema)
}

// wanted reports whether a notification should wake this instance: it is
// for our schema and from another instance.
func (l *listener) wanted(payload string) bool {
	parts := strings.SplitN(payload, " ", 3)
	return len(parts) == 3 && parts[2] == l.schema && parts[1] != l.instance
}

// connect opens the listening connection.
func (l *listener) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.cfg.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{Channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	l.pid.Store(conn.PgConn().PID())
	return conn, nil
}

// run waits for notifications on conn until ctx ends, reconnecting when
// the connection fails.
func (l *listener) run(ctx context.Context, conn *pgx.Conn) {
	for {
		err := l.receive(ctx, conn)
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx) // the connection is broken or we are stopping
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("postgres: change listener lost its connection; reconnecting", "err", err)
		// Wake readers now: when the database itself is gone their next
		// read fails and the instance reports not ready at once, rather
		// than at the next safety poll.
		l.notifier.Notify()
		if conn = l.reconnect(ctx); conn == nil {
			return
		}
		// Notifications sent while we were away are lost: wake readers
		// once so that they read the change feed from their revision.
		l.notifier.Notify()
	}
}

// receive forwards notifications until the connection fails or ctx ends.
func (l *listener) receive(ctx context.Context, conn *pgx.Conn) error {
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if l.wanted(n.Payload) {
			l.notifier.Notify()
		}
	}
}

// reconnect retries connect with exponential backoff until it succeeds
// (returning the connection) or ctx ends (returning nil).
func (l *listener) reconnect(ctx context.Context) *pgx.Conn {
	backoff := minBackoff
	t := time.NewTimer(backoff)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		conn, err := l.connect(ctx)
		if err == nil {
			l.log.Info("postgres: change listener reconnected")
			return conn
		}
		if ctx.Err() != nil {
			return nil
		}
		backoff = min(2*backoff, maxBackoff)
		l.log.Warn("postgres: change listener cannot reconnect; retrying with backoff", "err", err)
		t.Reset(backoff)
	}
}
