package pebble

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"github.com/meshnames/meshnames/internal/store"
)

// A full disk, and how the store survives it.
//
// pebble v1.1.5 treats some write failures as fatal: a failed write of its
// MANIFEST (after a flush or a compaction) calls Logger.Fatalf, and once
// its write-ahead log failed, the next record that log takes, or its next
// rotation, panics. So the store keeps pebble away from a full disk
// rather than hoping it survives one:
//
//   - The writer refuses a group (store.ErrDiskFull, before pebble sees
//     it) while the file system has less than reserveBytes free, read with
//     statfs at most every diskCheckInterval, or while a write of pebble's
//     failed for want of space (its flushes and compactions report that as
//     a background error). The room left lets pebble flush its memtable
//     and write its MANIFEST.
//   - A log sync that failed anyway (the disk filled between two checks)
//     fails its group and every later one (syncedRevision) and nothing
//     more is given to pebble, so the log is not used again.
//   - recoverLoop, woken by either, probes the disk (statfs, then a small
//     file written and synced) every recoverInterval and, once there is
//     room, clears the refusal; when a sync had failed it closes pebble
//     and opens it again from what is on disk, which drops what the
//     failed groups applied but never synced (acknowledged writes were
//     synced, so they are all there).
//
// What is left: a log sync that fails while the writer's next group makes
// pebble rotate its log panics inside pebble; the process exits, and at
// its restart pebble replays the log, so nothing acknowledged is lost.

const (
	// reserveBytes is the free space below which writes are refused, at
	// most an eighth of the file system: two memtables, what a flush
	// needs with room to spare.
	reserveBytes = 2 * MemTableBytes
	// diskCheckInterval is how often the writer reads the free space.
	diskCheckInterval = 250 * time.Millisecond
	// recoverInterval is how often a store refusing writes probes the
	// disk.
	recoverInterval = 200 * time.Millisecond
	// probeFile is written and removed in the pebble directory to find
	// out whether the disk takes writes again.
	probeFile  = "SPACE-PROBE"
	probeBytes = 64 << 10
)

// isNoSpace says whether err is the file system's "no space left" (or a
// quota's).
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// diskGuard decides whether the writer may give pebble a group.
type diskGuard struct {
	fs  vfs.FS
	dir string // the pebble directory
	// kick wakes recoverLoop.
	kick chan struct{}

	full    atomic.Pointer[error] // why writes are refused; nil when not
	checked atomic.Int64          // Unix nanoseconds of the last statfs
	// walErr is the first failed write or sync of the log since pebble
	// was opened, recorded by the file itself (walFS) before pebble sees
	// it, so that the writer gives pebble no further record.
	walErr atomic.Pointer[error]
}

func newDiskGuard(fs vfs.FS, dir string) *diskGuard {
	return &diskGuard{fs: fs, dir: dir, kick: make(chan struct{}, 1)}
}

// refuse returns the reason to refuse a write, or nil.
func (g *diskGuard) refuse() error {
	if err := g.walErr.Load(); err != nil {
		return *err
	}
	if now := time.Now().UnixNano(); now-g.checked.Load() >= int64(diskCheckInterval) {
		g.checked.Store(now)
		if err := g.lowSpace(); err != nil {
			g.setFull(err)
		}
	}
	if err := g.full.Load(); err != nil {
		return *err
	}
	return nil
}

// lowSpace says why the file system has too little room, or nil (also
// when it cannot tell: a file system without statfs).
func (g *diskGuard) lowSpace() error {
	u, err := g.fs.GetDiskUsage(g.dir)
	if err != nil {
		return nil
	}
	reserve := min(uint64(reserveBytes), u.TotalBytes/8)
	if u.AvailBytes >= reserve {
		return nil
	}
	return diskFull(fmt.Errorf("%d bytes free on the file system of %s, writes need %d", u.AvailBytes, g.dir, reserve))
}

// setFull refuses writes for err until recoverLoop finds room.
func (g *diskGuard) setFull(err error) {
	if g.full.CompareAndSwap(nil, &err) {
		g.wake()
	}
}

func (g *diskGuard) wake() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// noted is pebble's EventListener.BackgroundError: a flush or compaction
// that failed for want of space refuses writes.
func (g *diskGuard) noted(err error) {
	if isNoSpace(err) {
		g.setFull(diskFull(fmt.Errorf("pebble: %w", err)))
	}
}

// walFailed records a failed write or sync of the log.
func (g *diskGuard) walFailed(err error) {
	err = dbErr(fmt.Errorf("write-ahead log: %w", err))
	if g.walErr.CompareAndSwap(nil, &err) {
		g.wake()
	}
}

// walFS is pebble's file system with its logs (*.log) telling the guard
// of every failed write or sync.
type walFS struct {
	vfs.FS
	g *diskGuard
}

func (fs walFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return walFile{File: f, g: fs.g}, nil
}

func (fs walFS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

func (fs walFS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return fs.wrap(newname, f, err)
}

type walFile struct {
	vfs.File
	g *diskGuard
}

func (f walFile) note(err error) error {
	if err != nil {
		f.g.walFailed(err)
	}
	return err
}

func (f walFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.note(err)
}

func (f walFile) Sync() error     { return f.note(f.File.Sync()) }
func (f walFile) SyncData() error { return f.note(f.File.SyncData()) }

func (f walFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.note(err)
}

// probe says whether the disk takes writes again: room beyond the
// reserve, and a small file written, synced and removed.
func (g *diskGuard) probe() error {
	if err := g.lowSpace(); err != nil {
		return err
	}
	name := filepath.Join(g.dir, probeFile)
	f, err := g.fs.Create(name)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, probeBytes))
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close(), g.fs.Remove(name))
}

// diskFull marks err as the disk being full (store.ErrDiskFull, which is
// also a store.ErrUnavailable: it passes).
func diskFull(err error) error {
	return fmt.Errorf("%w: %w: %w", store.ErrUnavailable, store.ErrDiskFull, err)
}

// inflight counts the groups the writer handed to syncLoop and it has not
// answered yet.
type inflight struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    int
}

func (f *inflight) add() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) done() {
	f.mu.Lock()
	f.n--
	f.mu.Unlock()
	f.cond.Broadcast()
}

// wait waits until every group handed over was answered.
func (f *inflight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.n > 0 {
		f.cond.Wait()
	}
}

// recoverLoop waits for the guard's kick, then recovers. It returns when
// stop is closed.
func (s *Store) recoverLoop(stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-s.disk.kick:
		}
		s.recover(stop)
	}
}

// recover probes the disk every recoverInterval until it takes writes
// again, then ends the refusal, reopening pebble first when a log sync
// failed. It logs the refusal once and its end once.
func (s *Store) recover(stop <-chan struct{}) {
	reason := s.synced.failure()
	for _, p := range []*atomic.Pointer[error]{&s.disk.walErr, &s.disk.full} {
		if err := p.Load(); err != nil && reason == nil {
			reason = *err
		}
	}
	if reason == nil {
		return
	}
	s.log.Error("the store refuses writes until its disk takes them again; it retries by itself", "err", reason)
	t := time.NewTicker(recoverInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cur := s.disk.full.Load()
		if err := s.disk.probe(); err != nil {
			continue
		}
		if s.synced.failure() != nil || s.disk.walErr.Load() != nil {
			if err := s.reopen(); err != nil {
				s.log.Debug("the store cannot reopen its database yet", "err", err)
				continue
			}
			s.log.Info("reopened the database after a failed write: the store takes writes again", "revision", s.synced.last.Load())
		} else {
			s.log.Info("the disk has room again: the store takes writes again")
		}
		if !s.disk.full.CompareAndSwap(cur, nil) {
			continue // the disk filled again meanwhile
		}
		return
	}
}

// reopen closes pebble and opens it again from what is on disk, then
// forgets the failure of a log sync: what the failed groups applied and
// never synced is gone (or, if the disk kept it after all, is there with
// its revisions, as after a crash). Reads wait meanwhile; writes were
// refused already.
func (s *Store) reopen() error {
	s.writeMu.Lock() // the writer and Compact wait; their next groups see the outcome
	defer s.writeMu.Unlock()
	if s.isClosed() {
		return store.ErrClosed
	}
	s.inflight.wait() // syncLoop answered every group pebble took
	s.life.Lock()
	defer s.life.Unlock()
	if s.db != nil {
		if err := s.db.Close(); err != nil {
			s.log.Debug("closing the database after a failed write", "err", err)
		}
		s.db = nil
	}
	db, err := openDB(filepath.Join(s.dir, Dir), s.log, s.fs, false, s.disk.noted)
	if err != nil {
		return err
	}
	s.db = db
	if err := s.load(); err != nil {
		_ = db.Close()
		s.db = nil
		return err
	}
	s.fresh.forget()
	s.frontiers = map[string]int64{}
	s.recent.Clear()
	s.synced.reset(s.revision)
	s.disk.walErr.Store(nil)
	s.notifier.Notify()
	return nil
}
