package backend

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// LockDir takes the exclusive lock of the data directory dir (an flock on
// dir/file) and writes our pid into the lock file, so that only one
// process, and one store in it, uses the directory. It fails at once when
// the lock is held, naming the holder's pid. The lock is tied to the open
// file: it is released when the file is closed, also when the process dies,
// so a stale lock file does not block a restart.
func LockDir(dir, file string) (*os.File, error) {
	path := filepath.Join(dir, file)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		pid := "unknown"
		if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
			pid = strings.TrimSpace(string(b))
		}
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %q is in use by another meshnames process (pid %s)", dir, pid)
		}
		return nil, fmt.Errorf("lock data dir %q: %w", dir, err)
	}
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := f.Truncate(0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	if _, err := f.WriteAt(pid, 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	return f, nil
}
