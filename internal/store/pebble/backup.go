package pebble

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Backup implements store.Backuper: a pebble checkpoint of the database
// in a temporary directory inside the data directory (its tables are hard
// links; the write-ahead log and manifest are copied), written to w as
// pebble/... and removed, also when Backup fails. The writer waits while
// the checkpoint is taken, so that the snapshot ends at a group's commit
// and its revision is known; it does not wait for the tar stream.
func (s *Store) Backup(ctx context.Context, w io.Writer) (store.BackupInfo, error) {
	info := store.BackupInfo{Engine: "pebble"}
	if err := ctx.Err(); err != nil {
		return info, fmt.Errorf("pebble: backup: %w", err)
	}
	tmp, err := backend.BackupTempDir(s.dir)
	if err != nil {
		return info, fmt.Errorf("pebble: %w", err)
	}
	defer func() {
		if err := os.RemoveAll(tmp); err != nil {
			s.log.Warn("cannot remove a backup's temporary directory; the next start removes it", "dir", tmp, "err", err)
		}
	}()
	s.writeMu.Lock() // before life, as Close takes them
	err = s.read(func() error {
		info.Revision = s.revision
		if err := s.db.Checkpoint(filepath.Join(tmp, Dir)); err != nil {
			return dbErr(fmt.Errorf("checkpoint: %w", err))
		}
		return nil
	})
	s.writeMu.Unlock()
	if err != nil {
		return info, fmt.Errorf("pebble: backup: %w", err)
	}
	if info.Files, err = backend.TarTree(ctx, w, tmp); err != nil {
		return info, fmt.Errorf("pebble: %w", err)
	}
	return info, nil
}
