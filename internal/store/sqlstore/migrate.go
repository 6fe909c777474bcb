package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
)

// migration is one numbered schema file.
type migration struct {
	version int64
	name    string
	sql     string
}

// migrations reads the numbered .sql files at the root of fsys.
func migrations(fsys fs.FS) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".sql") {
			continue
		}
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive number and _", name)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(b)})
	}
	slices.SortFunc(ms, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %q and %q have the same number", ms[i-1].name, ms[i].name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations")
	}
	return ms, nil
}

// migrate brings the schema up to date in one transaction, so a failed
// migration leaves the database as it was. A database migrated by a newer
// meshnames is refused rather than used with the wrong schema.
func (s *Store) migrate(ctx context.Context) error {
	d := &s.d
	ms, err := migrations(d.Migrations)
	if err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return s.dbErr(ctx, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if d.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, d.MigrationLock); err != nil {
			return s.dbErr(ctx, fmt.Errorf("lock: %w", err))
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version BIGINT PRIMARY KEY,
		name TEXT NOT NULL
	)`); err != nil {
		return s.dbErr(ctx, fmt.Errorf("create schema_migrations: %w", err))
	}
	var applied int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&applied); err != nil {
		return s.dbErr(ctx, fmt.Errorf("read schema_migrations: %w", err))
	}
	if latest := ms[len(ms)-1].version; applied > latest {
		return fmt.Errorf("the database schema is at version %d, newer than this meshnames knows (%d)", applied, latest)
	}
	insert := d.rebind(`INSERT INTO schema_migrations (version, name) VALUES (?, ?)`)
	for _, m := range ms {
		if m.version <= applied {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return s.dbErr(ctx, fmt.Errorf("apply %s: %w", m.name, err))
		}
		if _, err := tx.ExecContext(ctx, insert, m.version, m.name); err != nil {
			return s.dbErr(ctx, fmt.Errorf("record %s: %w", m.name, err))
		}
	}
	if err := tx.Commit(); err != nil {
		return s.dbErr(ctx, fmt.Errorf("commit: %w", err))
	}
	return nil
}
