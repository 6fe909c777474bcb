package pebble

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/bloom"
	"github.com/cockroachdb/pebble/vfs"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// File names inside the data directory.
const (
	// LockFile is the lock every embedded engine takes.
	LockFile = "LOCK"
	// Dir holds the pebble database.
	Dir = "pebble"
)

// Sizes of what pebble keeps in memory (see the package doc).
const (
	CacheBytes    = 8 << 20
	MemTableBytes = 16 << 20
	// l0CompactionThreshold is how many sublevels of L0 start a compaction
	// into the base level (pebble's default is 4).
	l0CompactionThreshold = 16
)

// Option configures Open.
type Option func(*options)

type options struct {
	now func() time.Time
	log *slog.Logger
	fs  vfs.FS // nil for the operating system's
}

// WithClock sets the clock that stamps creation and modification times,
// record times and ages tombstones (default time.Now). Fences expire by
// the real clock whatever this is.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithLogger sets where pebble's own messages and the migration's go
// (default: discarded).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// Store is the pebble store.
type Store struct {
	// db is nil only while reopen could not open it again (disk.go).
	db       *pebble.DB
	dir      string // the data directory, absolute
	fs       vfs.FS // pebble's file system (walFS)
	log      *slog.Logger
	lock     *os.File
	now      func() time.Time
	notifier store.Notifier
	recent   backend.Recent

	// life guards db against Close and reopen: reads hold it shared,
	// they take it.
	life sync.RWMutex

	// disk refuses writes while the disk is full; recoverLoop, until
	// stopRecover is closed, ends the refusal (disk.go).
	disk        *diskGuard
	stopRecover chan struct{}
	recoverDone chan struct{}
	// inflight counts the groups syncLoop has yet to answer.
	inflight inflight

	// queue holds the Apply calls the writer takes up in groups.
	queue *backend.Queue

	// writeMu is held by the writer while it writes a group, and by
	// Compact and CompactRecords, which write beside it.
	writeMu sync.Mutex
	// revision and records are the last revision and record sequence
	// number given out; compacted the compaction horizon. Guarded by
	// writeMu.
	revision, records, compacted int64
	// fresh are the object keys written lately (write.go). Guarded by
	// writeMu.
	fresh freshKeys
	// known are the hashes of every object key with a row (known.go).
	known knownKeys
	// deferred holds the writes of the group being written to each table
	// but the objects', by key prefix (writeTx.join). Guarded by writeMu.
	deferred [256]deferred
	// frontiers are the streams' latest record times (frontierKey), as
	// committed, for the streams appended to since Open. Guarded by
	// writeMu.
	frontiers map[string]int64

	// syncs carries the groups the writer applied to syncLoop, which
	// closes writerDone once syncs is closed and drained.
	syncs      chan *applied
	writerDone chan struct{}
	// synced is the last revision on disk (write.go).
	synced syncedRevision
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.Compacter = (*Store)(nil)
	_ store.Recorder  = (*Store)(nil)
	_ store.Backuper  = (*Store)(nil)
	_ store.KnownFeed = (*Store)(nil)
)

// Exists reports whether dir holds a pebble store.
func Exists(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, Dir))
	return err == nil
}

// Open opens (creating when needed) the store in dir, migrating a store
// the SQLite backend wrote there (see the package doc).
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{now: time.Now, log: slog.New(slog.DiscardHandler)}
	for _, opt := range opts {
		opt(&o)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("pebble: data dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("pebble: data dir: %w", err)
	}
	lock, err := backend.LockDir(dir, LockFile)
	if err != nil {
		return nil, fmt.Errorf("pebble: %w", err)
	}
	if err := backend.RemoveBackupTemps(dir); err != nil {
		_ = lock.Close() // releases the flock
		return nil, fmt.Errorf("pebble: %w", err)
	}
	s, err := open(dir, &o)
	if err != nil {
		_ = lock.Close() // releases the flock
		return nil, fmt.Errorf("pebble: %w", err)
	}
	s.lock = lock
	return s, nil
}

func open(dir string, o *options) (*Store, error) {
	if err := migrateSQLite(dir, o.log); err != nil {
		return nil, err
	}
	fs := o.fs
	if fs == nil {
		fs = vfs.Default
	}
	disk := newDiskGuard(fs, filepath.Join(dir, Dir))
	fs = walFS{FS: fs, g: disk}
	db, err := openDB(filepath.Join(dir, Dir), o.log, fs, false, disk.noted)
	if err != nil {
		return nil, err
	}
	s := &Store{db: db, dir: dir, fs: fs, log: o.log, now: o.now, queue: backend.NewQueue(), writerDone: make(chan struct{}),
		disk: disk, stopRecover: make(chan struct{}), recoverDone: make(chan struct{})}
	s.inflight.cond = sync.NewCond(&s.inflight.mu)
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, err
	}
	s.synced.init(s.revision)
	s.syncs = make(chan *applied, maxApplied)
	go func() {
		s.queue.Serve(maxGroupOps, s.commit, make(chan struct{}))
		close(s.syncs)
	}()
	go s.syncLoop()
	go func() {
		s.recoverLoop(s.stopRecover)
		close(s.recoverDone)
	}()
	return s, nil
}

// openDB opens the pebble database in path on fs (nil for the operating
// system's); fresh says it must not exist yet. failed, when not nil, is
// told of every error of pebble's background work (flushes, compactions).
func openDB(path string, log *slog.Logger, fs vfs.FS, fresh bool, failed func(error)) (*pebble.DB, error) {
	cache := pebble.NewCache(CacheBytes)
	defer cache.Unref() // the DB holds its own reference
	opts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       MemTableBytes,
		FormatMajorVersion: pebble.FormatNewest,
		ErrorIfExists:      fresh,
		Logger:             logger{log},
		Levels:             make([]pebble.LevelOptions, 7),
		// A burst's flushes wait in L0 for four times pebble's default before
		// they are compacted into the base level (see the package doc).
		L0CompactionThreshold: l0CompactionThreshold,
		L0StopWritesThreshold: 3 * l0CompactionThreshold,
		FS:                    fs,
	}
	if failed != nil {
		opts.EventListener = &pebble.EventListener{BackgroundError: failed}
	}
	for i := range opts.Levels {
		// Most point reads are of keys that do not exist (a create
		// checks its key is free): a filter answers those without
		// reading a block.
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].FilterType = pebble.TableFilter
	}
	db, err := pebble.Open(path, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return db, nil
}

// logger sends pebble's messages to slog.
type logger struct{ l *slog.Logger }

func (l logger) Infof(format string, args ...any) {
	l.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l logger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.l.Error(msg, "component", "pebble")
	panic("pebble: " + msg)
}

// load reads the meta values, and writes them in a new database.
func (s *Store) load() error {
	f, err := s.getUint(metaFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		b := s.db.NewBatch()
		defer b.Close()
		for _, k := range [][]byte{metaRevision, metaCompacted, metaRecords} {
			_ = b.Set(k, u64(0), nil) // a batch's Set fails only when closed
		}
		_ = b.Set(metaFormat, u64(format), nil)
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("initialize: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read format: %w", err)
	case f != format:
		return fmt.Errorf("the data is in format %d, this meshnames reads format %d: use the meshnames that wrote it", f, format)
	}
	for _, m := range []struct {
		key []byte
		v   *int64
	}{{metaRevision, &s.revision}, {metaCompacted, &s.compacted}, {metaRecords, &s.records}} {
		v, err := s.getUint(m.key)
		if err != nil {
			return fmt.Errorf("read %s: %w", m.key[1:], err)
		}
		*m.v = int64(v)
	}
	return nil
}

// getter is a DB or a snapshot.
type getter interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

func getUintFrom(g getter, key []byte) (uint64, error) {
	v, c, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("%s: %w", key, errCorrupt)
	}
	return uint64(v[0])<<56 | uint64(v[1])<<48 | uint64(v[2])<<40 | uint64(v[3])<<32 |
		uint64(v[4])<<24 | uint64(v[5])<<16 | uint64(v[6])<<8 | uint64(v[7]), nil
}

func (s *Store) getUint(key []byte) (uint64, error) { return getUintFrom(s.db, key) }

// Changed implements store.Store.
func (s *Store) Changed() <-chan struct{} { return s.notifier.C() }

// Close implements store.Store: it waits for the writes already queued,
// wakes Changed waiters, closes the database and releases the data
// directory. A second Close returns store.ErrClosed.
func (s *Store) Close() error {
	if !s.queue.Close() {
		return fmt.Errorf("pebble: close: %w", store.ErrClosed)
	}

	<-s.writerDone
	close(s.stopRecover)
	<-s.recoverDone  // a reopen in progress finishes first
	s.writeMu.Lock() // a Compact in progress finishes first
	s.life.Lock()
	var err error
	if s.db != nil {
		err = s.db.Close()
	}
	s.life.Unlock()
	s.writeMu.Unlock()
	err = errors.Join(err, s.lock.Close()) // releases the flock
	s.notifier.Notify()
	if err != nil {
		return fmt.Errorf("pebble: close: %w", err)
	}
	return nil
}

func (s *Store) isClosed() bool { return s.queue.Closed() }

// FlushMemory writes what the memtable holds to a table file once a burst
// of writes is over, and forgets the keys the writer held as fresh (the
// server calls it when it returns idle memory to the system, see
// store.MemoryFlusher). pebble keeps the memtable's arena for reuse: see
// the package doc's Memory.
//
// It runs while the writer waits, once every group applied is synced: a
// flush starts a new log, which pebble v1.1.5 does by panicking when the
// old one failed a sync (disk.go). On a store refusing writes it does
// nothing.
func (s *Store) FlushMemory() error {
	s.writeMu.Lock() // before life, as Close and Backup take them
	defer s.writeMu.Unlock()
	if s.disk.refuse() != nil || s.synced.wait(s.revision) != nil {
		return nil // the store refuses writes: nothing to flush that could be
	}
	err := s.read(func() error {
		if err := s.db.Flush(); err != nil {
			return dbErr(fmt.Errorf("flush: %w", err))
		}
		return nil
	})
	if err == nil {
		s.fresh.forget() // in table files now, and their memory is idle
	}
	return err
}

// read runs f while the database is open, holding it open; ErrClosed
// after Close.
func (s *Store) read(f func() error) error {
	s.life.RLock()
	defer s.life.RUnlock()
	if s.isClosed() {
		return store.ErrClosed
	}
	if s.db == nil {
		return fmt.Errorf("%w: the database is being reopened after a failed write", store.ErrUnavailable)
	}
	return f()
}

// dbErr classifies an error of the database.
func dbErr(err error) error {
	switch {
	case errors.Is(err, store.ErrClosed) || errors.Is(err, errCorrupt) || errors.Is(err, store.ErrUnavailable):
		return err
	case isNoSpace(err):
		return diskFull(err)
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}
