package pebble

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver, to read a store to migrate

	"github.com/meshnames/meshnames/internal/resource"
	"github.com/meshnames/meshnames/internal/store/backend"
)

// SQLiteFile is the database file of the SQLite backend
// (sqlite.DatabaseFile), which Open migrates.
const SQLiteFile = "meshnames.db"

// sqliteSchema is the schema version of the SQLite backend that the
// migration reads: its migrations 0001 to 0003.
const sqliteSchema = 3

// migratedSuffix is added to the SQLite files once their content is in
// the pebble database.
const migratedSuffix = ".migrated"

// migrateBatch bounds the keys of one batch of the copy.
const migrateBatch = 10000

// Migration is what a migration copied.
type Migration struct {
	Resources, Tombstones, Leases, Records int
	Revision, RecordSeq                    int64
}

// migrateSQLite copies the store the SQLite backend wrote in dir, when
// there is one and no pebble database yet (the package doc says how). The
// caller holds the data directory's lock.
func migrateSQLite(dir string, log *slog.Logger) error {
	src := filepath.Join(dir, SQLiteFile)
	target := filepath.Join(dir, Dir)
	if !exists(src) {
		return nil
	}
	if exists(target) {
		// The copy is complete (it was renamed into place): what is left
		// of a migration cut short is retiring the SQLite files.
		log.Warn("finishing an interrupted migration: the SQLite files are set aside", "dir", dir)
		return retire(dir)
	}
	tmp := target + ".new"
	if err := os.RemoveAll(tmp); err != nil { // a copy cut short
		return fmt.Errorf("migrate: %w", err)
	}
	m, err := copySQLite(src, tmp, log)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("migrate %s: %w", src, err)
	}
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := retire(dir); err != nil {
		return err
	}
	log.Info("migrated the SQLite store to pebble", "dir", dir, "resources", m.Resources, "tombstones", m.Tombstones,
		"leases", m.Leases, "records", m.Records, "revision", m.Revision, "sqlite", src+migratedSuffix)
	return nil
}

// retire renames the SQLite files (the database and its WAL and shared
// memory files, when there) with migratedSuffix, the database last, and
// syncs the directory.
func retire(dir string) error {
	for _, f := range []string{SQLiteFile + "-wal", SQLiteFile + "-shm", SQLiteFile} {
		p := filepath.Join(dir, f)
		if !exists(p) {
			continue
		}
		base, rest := SQLiteFile, f[len(SQLiteFile):]
		if err := os.Rename(p, filepath.Join(dir, base+migratedSuffix+rest)); err != nil {
			return fmt.Errorf("migrate: set the SQLite store aside: %w", err)
		}
	}
	if err := syncDir(dir); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// copySQLite writes everything of the SQLite database src into a new
// pebble database at dst, from one read transaction, and syncs it.
func copySQLite(src, dst string, log *slog.Logger) (m Migration, err error) {
	u := url.URL{Scheme: "file", Path: src}
	// Read-write, so that SQLite may recover its WAL after a crash; the
	// migration only reads.
	db, err := sql.Open("sqlite", u.String()+"?_pragma=busy_timeout(10000)&_pragma=query_only(1)")
	if err != nil {
		return m, err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	tx, err := db.Begin()
	if err != nil {
		return m, err
	}
	defer func() { _ = tx.Rollback() }() // read only
	var schema int
	if err := tx.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&schema); err != nil {
		return m, fmt.Errorf("read its schema version: %w", err)
	}
	switch {
	case schema < sqliteSchema:
		return m, fmt.Errorf("its schema is version %d, the migration reads version %d: start meshnames once with store.engine sqlite to upgrade it, then switch", schema, sqliteSchema)
	case schema > sqliteSchema:
		return m, fmt.Errorf("its schema is version %d, newer than this meshnames knows (%d)", schema, sqliteSchema)
	}
	var compacted int64
	if err := tx.QueryRow(`SELECT revision, compacted, records FROM meta`).Scan(&m.Revision, &compacted, &m.RecordSeq); err != nil {
		return m, fmt.Errorf("read meta: %w", err)
	}

	pdb, err := openDB(dst, log, nil, true, nil)
	if err != nil {
		return m, err
	}
	w := &loader{db: pdb, b: pdb.NewBatch()}
	defer func() {
		w.b.Close()
		err = errors.Join(err, pdb.Close())
	}()

	rows, err := tx.Query(`SELECT kind, mesh, name, version, revision, deleted, labels, spec, status, creation_time, modification_time FROM resources`)
	if err != nil {
		return m, fmt.Errorf("read resources: %w", err)
	}
	for rows.Next() {
		var r row
		var kind string
		if err := rows.Scan(&kind, &r.Key.Mesh, &r.Key.Name, &r.Version, &r.Revision, &r.Deleted,
			&r.Labels, &r.Spec, &r.Status, &r.Created, &r.Modified); err != nil {
			rows.Close()
			return m, fmt.Errorf("read resources: %w", err)
		}
		r.Key.Kind = resource.Kind(kind)
		okey := objectKey(r.Key)
		w.set(okey, encodeRow(&r))
		w.set(revisionKey(r.Revision), okey[1:])
		if r.Deleted {
			w.set(tombstoneKey(r.Modified, r.Key), nil)
			m.Tombstones++
		} else {
			m.Resources++
		}
		if err := w.flush(false); err != nil {
			rows.Close()
			return m, err
		}
	}
	if err := closeRows(rows); err != nil {
		return m, fmt.Errorf("read resources: %w", err)
	}

	rows, err = tx.Query(`SELECT name, value, expires_at FROM leases`)
	if err != nil {
		return m, fmt.Errorf("read leases: %w", err)
	}
	for rows.Next() {
		var name string
		var value []byte
		var expires int64
		if err := rows.Scan(&name, &value, &expires); err != nil {
			rows.Close()
			return m, fmt.Errorf("read leases: %w", err)
		}
		w.set(leaseKey(name), encodeLease(expires, value))
		m.Leases++
		if err := w.flush(false); err != nil {
			rows.Close()
			return m, err
		}
	}
	if err := closeRows(rows); err != nil {
		return m, fmt.Errorf("read leases: %w", err)
	}

	rows, err = tx.Query(`SELECT stream, seq, time, terms, data FROM records`)
	if err != nil {
		return m, fmt.Errorf("read records: %w", err)
	}
	for rows.Next() {
		var stream, terms string
		var seq, at int64
		var data []byte
		if err := rows.Scan(&stream, &seq, &at, &terms, &data); err != nil {
			rows.Close()
			return m, fmt.Errorf("read records: %w", err)
		}
		var ts []string
		if err := json.Unmarshal([]byte(terms), &ts); err != nil {
			rows.Close()
			return m, fmt.Errorf("record %d of %q: terms: %w", seq, stream, err)
		}
		w.set(recordKey(stream, seq), encodeRecord(at, ts, data))
		for _, t := range backend.Dedupe(ts) {
			w.set(termKey(stream, t, seq), nil)
		}
		w.set(timeKey(stream, at, seq), nil)
		m.Records++
		if err := w.flush(false); err != nil {
			rows.Close()
			return m, err
		}
	}
	if err := closeRows(rows); err != nil {
		return m, fmt.Errorf("read records: %w", err)
	}

	w.set(metaFormat, u64(format))
	w.set(metaRevision, u64(uint64(m.Revision)))
	w.set(metaCompacted, u64(uint64(compacted)))
	w.set(metaRecords, u64(uint64(m.RecordSeq)))
	// The last batch is synced, and with it the log of every batch before.
	return m, w.flush(true)
}

func closeRows(rows *sql.Rows) error {
	err := rows.Err()
	return errors.Join(err, rows.Close())
}

// loader writes the copy in batches.
type loader struct {
	db *pebble.DB
	b  *pebble.Batch
	n  int
}

func (l *loader) set(k, v []byte) {
	_ = l.b.Set(k, v, nil) // fails only on a closed batch
	l.n++
}

// flush commits the batch when it is full, or when last, synced.
func (l *loader) flush(last bool) error {
	if !last && l.n < migrateBatch {
		return nil
	}
	opt := pebble.NoSync
	if last {
		opt = pebble.Sync
	}
	if err := l.b.Commit(opt); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	l.b.Reset()
	l.n = 0
	return nil
}
