package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/meshnames/meshnames/internal/store"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// Backup implements store.Backuper: VACUUM INTO a temporary file inside
// the data directory, from one read transaction of a connection of its
// own (so neither the writer nor the read pool waits for it), written to w
// as meshnames.db and removed, also when Backup fails (backend.Backup).
// The copy is a plain database file without a write-ahead log; Open turns
// WAL mode on again.
func (s *Store) Backup(ctx context.Context, w io.Writer) (store.BackupInfo, error) {
	info := store.BackupInfo{Engine: "sqlite"}
	if s.closed.Load() {
		return info, fmt.Errorf("sqlite: backup: %w", store.ErrClosed)
	}
	var err error
	info.Files, err = backend.Backup(ctx, s.dir, w, func(tmp string) error {
		rev, err := vacuumInto(ctx, filepath.Join(s.dir, DatabaseFile), filepath.Join(tmp, DatabaseFile))
		info.Revision = rev
		return err
	})
	if err != nil {
		return info, fmt.Errorf("sqlite: %w", err)
	}
	return info, nil
}

// vacuumInto writes a copy of the database src to dst and returns the
// revision the copy holds.
func vacuumInto(ctx context.Context, src, dst string) (rev int64, err error) {
	// Not query_only: SQLite refuses VACUUM INTO then, though it only
	// reads src.
	db, err := sql.Open("sqlite", fileDSN(src, "_pragma=busy_timeout(10000)"))
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, dst); err != nil {
		return 0, fmt.Errorf("vacuum into %s: %w", dst, err)
	}
	// Read-only: the copy gets no journal or WAL file beside it.
	cp, err := sql.Open("sqlite", fileDSN(dst, "mode=ro"))
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, cp.Close()) }()
	if err := cp.QueryRowContext(ctx, `SELECT revision FROM meta`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("read the copy's revision: %w", err)
	}
	return rev, nil
}
