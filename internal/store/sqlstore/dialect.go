package sqlstore

import (
	"database/sql"
	"io/fs"
	"strconv"
	"strings"
)

// Dialect is what differs between the databases sqlstore runs on.
type Dialect struct {
	// Name names the database in errors ("sqlite", "postgres").
	Name string
	// Migrations holds the schema as numbered files at its root
	// (0001_init.sql, 0002_...), applied in number order. Each file is run
	// with one Exec call and no arguments, so it may hold several
	// statements.
	Migrations fs.FS
	// NumberedPlaceholders rewrites the ? placeholders of sqlstore's SQL to
	// $1, $2, ... (PostgreSQL).
	NumberedPlaceholders bool
	// MigrationLock, when set, is run first in the migration transaction
	// to serialize instances that start together.
	MigrationLock string
	// ReadTx are the options of List and Changes transactions; they must
	// give the whole transaction one snapshot.
	ReadTx sql.TxOptions
	// Notify, when set, returns a statement that runs in every write
	// transaction that gave out revisions, after the writes, with the last
	// revision. PostgreSQL sends a NOTIFY there, which is delivered at
	// commit. Waiters in this process are woken after commit whatever the
	// dialect.
	Notify func(revision int64) (query string, args []any)
	// Pipeline, when set, makes the writer send its statements in a few
	// batches per transaction instead of one round trip each (see
	// pipeline.go): it returns a Pipe over the driver connection that
	// database/sql's Conn.Raw hands over. The writer then uses the
	// PostgreSQL statements of pipelineQueries (arrays, unnest), so only the
	// PostgreSQL dialect sets it.
	Pipeline func(driverConn any) (Pipe, error)
	// NowNanos is an SQL expression for the database's clock as Unix
	// nanoseconds. The fence check compares lease expiries with it, so
	// that the clocks of the instances do not matter.
	NowNanos string
	// LockShared, when set, ends the fence check's SELECT to lock the
	// lease row it read until commit (PostgreSQL: " FOR SHARE"), so that a
	// takeover of the lease waits for the fenced write to commit.
	LockShared string
	// DiskFull, when set, says whether an error of the database means its
	// disk is full (PostgreSQL's SQLSTATE 53100 disk_full): dbErr then
	// wraps store.ErrDiskFull as well.
	DiskFull func(error) bool
}

// rebind rewrites query for the dialect. sqlstore's SQL holds no ? inside
// string literals, so a plain scan is enough.
func (d *Dialect) rebind(query string) string {
	if !d.NumberedPlaceholders {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
