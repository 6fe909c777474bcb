package pebble

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Backup implements store.Backuper: a pebble checkpoint of the database
// in a temporary directory inside the data directory (its tables are hard
// links; the write-ahead log and manifest are copied), written to w as
// pebble/... and removed, also when Backup fails (backend.Backup). The
// writer waits while the checkpoint is taken, so that the snapshot ends at
// a group's commit and its revision is known; it does not wait for the
// tar stream.
func (s *Store) Backup(ctx context.Context, w io.Writer) (store.BackupInfo, error) {
	info := store.BackupInfo{Engine: "pebble"}
	var err error
	info.Files, err = backend.Backup(ctx, s.dir, w, func(tmp string) error {
		s.writeMu.Lock() // before life, as Close takes them
		defer s.writeMu.Unlock()
		return s.read(func() error {
			// The groups applied are in the log the checkpoint copies
			// once synced; none is applied while writeMu is held.
			if err := s.synced.wait(s.revision); err != nil {
				return err
			}
			info.Revision = s.revision
			if err := s.db.Checkpoint(filepath.Join(tmp, Dir)); err != nil {
				return dbErr(fmt.Errorf("checkpoint: %w", err))
			}
			return nil
		})
	})
	if err != nil {
		return info, fmt.Errorf("pebble: %w", err)
	}
	return info, nil
}
