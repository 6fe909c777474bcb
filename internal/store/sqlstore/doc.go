// Package sqlstore implements store.Store once, over database/sql, for both
// backends: sqlite/ (embedded) and postgres/. The SQL is written here, with
// ? placeholders; a Dialect value carries what differs between the
// databases (placeholder style, migrations with their column types, the
// migration lock, read-transaction options, and how other processes are told
// about a commit).
//
// It imports store, store/backend and resource only; it must not import the
// backends, nor
// anything above store (cache, apiserver, server).
//
// # Schema
//
// A single-row table meta holds the last revision given out and the
// compaction horizon. Table resources holds one row per key, live or
// tombstone, with its version, the revision of its last write, labels, spec
// and status as JSON text, and times as Unix nanoseconds (exact in both
// databases, unlike timestamptz, which keeps microseconds). Table leases
// (migration 0002) holds store.Lease records by name: the value as bytes
// (never NULL) and the expiry as Unix nanoseconds, 0 for never. Migrations
// are numbered .sql files of the Dialect, applied at open in one
// transaction and recorded in schema_migrations.
//
// # Writes
//
// All writes go through one writer goroutine per Store. Apply queues its
// batch and waits; the writer takes every batch queued since its last
// transaction and commits them together (group commit), so that many
// concurrent writers share one transaction and, on SQLite, one fsync.
// Batches and operations are executed in queue order inside the transaction,
// each checked before it writes (existence, version, size), so a failed
// operation writes nothing and does not affect the others. Should a
// statement of one batch fail anyway, that batch fails alone and the others
// are written again without it; a failure of the transaction as a whole
// (begin, commit: the database is the problem) fails every batch in it.
//
// On PostgreSQL (Dialect.Pipeline) the writer does not wait for a round
// trip per statement: it sends BEGIN, the meta lock, the fence checks and
// a read of every key the group writes in one batch, decides every
// operation in Go over the rows read (and those the group wrote before
// it), and sends all the writes in one statement of arrays (resources
// upserted, records, terms, lease puts, meta) with pg_notify and COMMIT
// in a second batch (pipeline.go). A lease create, a lease deletion and a
// fence check that an earlier lease operation of the group may change are
// sent in order with what precedes them; the outcomes are those of the
// operations run one by one. When the statement holding several requests'
// writes fails, each request is written again in a transaction of its
// own, so that a failing one fails alone as above.
//
// Revisions: a write transaction first locks the meta row (UPDATE meta SET
// revision = revision RETURNING revision), gives successful operations the
// next revisions in order, and stores the last one before committing. The
// row lock serializes writers, also across PostgreSQL instances, so
// revisions are assigned in commit order: a reader that sees revision R has
// seen every write below R, which is what lets Changes resume from a
// revision. Checks made after taking the lock see every earlier commit, so
// the version checks cannot race.
//
// Lease operations (store.OpPutLease, store.OpCreateLease,
// store.OpDeleteLease) run in the same transaction, in queue order with the
// resource operations, and follow the same rules: each is validated before
// it writes (name, value size, expiry) and fails alone. OpCreateLease is an
// INSERT ... ON CONFLICT DO NOTHING; no row inserted is ErrAlreadyExists.
// Writers are serialized by the meta row lock, so two instances creating one
// name find exactly one winner. They take no revision, so a transaction that
// wrote only leases leaves meta.revision as it was, sends no notification
// and does not wake Changed: leases are not in the change feed.
//
// Records (store.OpAppendRecord, migration 0003) go to table records, keyed
// by (stream, seq), their terms to record_terms, keyed by (stream, term,
// seq), so that a query by term is a primary key lookup. seq comes from
// meta.records, read at the first record of a transaction (the meta row is
// locked already) and stored before commit: it follows commit order, across
// PostgreSQL instances too. Records take no revision and wake nothing.
// Records builds its SELECT for the filters given; CompactRecords deletes a
// stream's records older than a time, with their terms, in one transaction.
//
// Op.DependsOn is checked before an operation runs: when an operation it
// names failed, it fails with store.ErrDependencyFailed and writes nothing.
//
// Fencing (store.WithFence): a request whose context carries a fence is
// checked first in the transaction with one statement that reads the fence's
// lease row where it holds the expected value and has not expired by the
// database's clock (Dialect.NowNanos), with Dialect.LockShared (PostgreSQL
// FOR SHARE: the row stays locked until commit, so a takeover, which
// updates it, waits for the fenced writes, and a check queued behind a
// takeover re-reads the row and fails). When no row matches, the request
// fails as a whole with store.ErrFenced and the other requests of the
// transaction are written as usual.
//
// # Reads
//
// Get reads one row. List and Changes read in one transaction with a single
// snapshot (Dialect.ReadTx), so List's revision matches its objects and
// Changes checks the compaction horizon against the rows it returns. Every
// object returned is decoded from stored JSON and belongs to the caller.
// Leases reads with one statement, a range scan of the leases primary key
// (name >= prefix AND name < the prefix with its last byte incremented,
// exact because names are printable ASCII compared bytewise); an empty
// value reads back as nil, the zero time as never.
//
// # Compaction
//
// Deletes leave tombstones so that Changes can report them. Compact drops
// the tombstones older than a retention (by the injected clock) and raises
// meta.compacted to the highest revision it dropped; Changes after a
// revision below that returns store.ErrCompacted, and the reader lists
// again. Nothing compacts on its own: the server calls Compact on a timer
// (one instance is enough on PostgreSQL, but several are harmless).
//
// # Concurrency
//
// A Store is safe for concurrent use. Close stops accepting writes, lets the
// writer finish the batches already queued, wakes every Changed waiter, and
// closes the databases; every later call returns store.ErrClosed.
package sqlstore
