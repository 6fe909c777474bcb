// Package pebble is an embedded store backend on an LSM key-value engine
// (github.com/cockroachdb/pebble, pure Go): the same contract as the SQLite
// backend, in the same kind of data directory, written without SQL. It
// exists because SQLite (translated from C to Go) spent most of the
// embedded store's serial writer time; see docs/performance.md.
//
// # Data directory
//
// dir/LOCK is the flock every embedded engine takes (backend.LockDir), so
// that one process uses the directory; the database lives in dir/pebble.
// Open finds a directory written by the SQLite backend (dir/meshnames.db
// and no dir/pebble) and migrates it: every resource (tombstones
// included), lease and record is copied with its revision, version, times
// and sequence number into dir/pebble.new, which is synced and then renamed
// to dir/pebble; only then is the SQLite file renamed to
// meshnames.db.migrated. A migration cut short leaves the SQLite file in
// place and is done again at the next Open. (migrate.go)
//
// Backup (store.Backuper) checkpoints the database into a temporary
// dir/.backup-* and writes it as a tar of pebble/; Open removes such a
// directory that a crash left. (backup.go)
//
// # Keys
//
// One ordered key space holds, by the first byte of the key (keys.go):
// meta values (the last revision, the compaction horizon, the last record
// sequence number, the format); objects by (kind, mesh, name), live or
// tombstones, with version, revision, times and labels, spec and status as
// the JSON text of backend.Encode; the change feed, one key per object by
// the revision of its last write (rewriting an object deletes its previous
// revision key, so the feed holds each object once, at its last write);
// tombstones by deletion time, for Compact; leases by name; records by
// (stream, seq), their terms by (stream, term, seq) and their times by
// (stream, time, seq).
//
// # Writes
//
// Apply checks and encodes its operations in the caller's goroutine and
// queues them (backend.Queue). One writer goroutine
// takes every request queued since its last group (up to maxGroupOps
// operations) and applies them as one batch with pebble.Sync, without
// waiting for the sync: while the disk syncs one group, the writer applies
// the next, and pebble's log writer covers every group applied meanwhile
// with its next fsync. A second goroutine (syncLoop) answers each group's
// requests in order once its sync is done, so a write is durable when
// Apply returns; a failed sync fails its group and every later one. Requests and operations run in queue order, each checked against
// the state before it by the rules sqlstore follows too (backend.Next;
// what earlier operations of the group wrote is read from the group's own
// overlay), so a failed operation writes nothing and does not affect the
// others. Revisions and record sequence numbers are
// given out by the writer, in commit order. A fenced request
// (store.WithFence) is checked first against the lease as the group left
// it, by this process's clock; a stale fence fails the request alone,
// with store.ErrFenced. The writer is the only one who writes, so a
// takeover of the lease is ordered with the fenced writes.
//
// # Reads
//
// Get reads one key. List, Changes and Records read from one pebble
// snapshot, so List's revision matches its objects. What a group wrote is
// in the database before its sync: Get and List wait for the sync of the
// revision they read, and Changes ends at the last revision synced, so no
// read shows a write that a crash could still lose. Changes is served from
// backend.Recent (the objects this process just wrote) when the reader is
// nearly caught up, and from the revision keys otherwise.
//
// # Memory
//
// The block cache is CacheBytes, small: the control plane holds its own
// indexed copy of every resource (the cache), so the store is read mostly
// at start. The memtable, MemTableBytes, is larger: each flush of a 4 MiB
// memtable during a burst (100,000 status writes at a first start) made
// pebble compact L0 into the whole base level again, 19% of that start's
// CPU; with 16 MiB it is 6-9%. L0 holds up to l0CompactionThreshold (16)
// sublevels before it is compacted, four times pebble's default, so that
// the flushes of such a burst mostly wait until it is over: compactions
// during a first naming of 100,000 took 0.82 s of CPU at pebble's 4 and
// 0.39 s at 8; a zone receiving 90,000 services from 9 others in the
// initial sync flushes more than a dozen times, and its compactions took
// 0.76-0.97 s of CPU at 8 against 0.21-0.24 s at 16; 10,000 creates
// through the API over 100,000 stored took 0.30-0.32 s of the server's
// CPU per 1,000 at 8 and 0.25-0.28 s at 16 (BenchmarkMultizone's
// profiles, BenchmarkRestLoad/embedded/existing=100000). Reads of L0 stay
// cheap: point reads through its bloom filters, and the cache's one list
// at start merges a few more sorted files (a list of 100,000 took
// 0.72-0.92 s at 8 and 0.85-1.02 s at 16 in BenchmarkList, within its
// noise). It costs memory
// after a restart: about 100 bytes of RSS per service at 100,000
// (BenchmarkIdle; where it goes is not settled). The server calls
// FlushMemory when it returns idle memory to the system: the burst's rows
// move to table files and the writer forgets the keys it held as fresh.
// It does not shrink RSS by the memtable: pebble keeps the arena of the
// last flushed memtable for the next one, so after a burst two arenas of
// MemTableBytes stay resident (2 x 16 MiB seen in /proc/PID/smaps after
// 60,000 creates and a return; a restart, which writes little, keeps
// small ones). Table files are read with pread, not mapped, so
// they do not count in the process's RSS. The writer keeps the hashes of
// every object key with a row (known.go, 8 bytes a key), so that a create
// does not read the tree for a row that cannot be there.
//
// It imports store, store/backend and resource; it must not import the
// other backends nor anything above store. A Store is safe for concurrent
// use; Close waits for the writes already queued.
package pebble
