package sqlstore

// columns are the columns of resources, in the order scanRow reads them.
const columns = `kind, mesh, name, version, revision, deleted, labels, spec, status, creation_time, modification_time`

// leaseColumns are the columns of leases, in the order Leases scans them.
const leaseColumns = `name, value, expires_at`

// queries is sqlstore's SQL, written once with ? placeholders and rebound
// for the dialect at Open.
type queries struct {
	// lockMeta takes the meta row lock that serializes writers and returns
	// the last revision given out.
	lockMeta string
	// lockMetaWrite is lockMeta for the writer, which also reads the
	// record sequence; setMeta writes both back.
	lockMetaWrite, setMeta string
	revision               string
	compacted              string

	load     string // one row, live or tombstone
	get      string // one live row
	listAll  string
	listKind string
	changes  string
	insert   string
	update   string

	tombstones       string // count and highest revision of tombstones older than a time
	deleteTombstones string
	setCompacted     string

	putLease     string // upsert by name
	createLease  string // insert unless the name exists
	deleteLease  string
	leasesAll    string
	leasesPrefix string // name >= prefix AND name < prefixEnd(prefix): a primary key range scan
	// fence returns a row when the lease named holds the value given and
	// has not expired by the database's clock (0 is never).
	fence string

	// Records (records.go).
	deleteRecordTerms, deleteRecords string
}

func newQueries(d *Dialect) queries {
	q := queries{
		lockMeta: `UPDATE meta SET revision = revision RETURNING revision`,
		// The writer's: the lock, and the revision and record sequence
		// read and written back in one statement each.
		lockMetaWrite: `UPDATE meta SET revision = revision RETURNING revision, records`,
		setMeta:       `UPDATE meta SET revision = ?, records = ?`,
		revision:      `SELECT revision FROM meta`,
		compacted:     `SELECT compacted FROM meta`,

		load:     `SELECT ` + columns + ` FROM resources WHERE kind = ? AND mesh = ? AND name = ?`,
		get:      `SELECT ` + columns + ` FROM resources WHERE kind = ? AND mesh = ? AND name = ? AND NOT deleted`,
		listAll:  `SELECT ` + columns + ` FROM resources WHERE NOT deleted ORDER BY kind, mesh, name`,
		listKind: `SELECT ` + columns + ` FROM resources WHERE kind = ? AND NOT deleted ORDER BY kind, mesh, name`,
		changes:  `SELECT ` + columns + ` FROM resources WHERE revision > ? ORDER BY revision LIMIT ?`,
		insert:   `INSERT INTO resources (` + columns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		update: `UPDATE resources SET version = ?, revision = ?, deleted = ?, labels = ?, spec = ?, status = ?,
			creation_time = ?, modification_time = ? WHERE kind = ? AND mesh = ? AND name = ?`,

		tombstones:       `SELECT COUNT(*), COALESCE(MAX(revision), 0) FROM resources WHERE deleted AND modification_time < ?`,
		deleteTombstones: `DELETE FROM resources WHERE deleted AND modification_time < ?`,
		setCompacted:     `UPDATE meta SET compacted = ? WHERE compacted < ?`,

		putLease: `INSERT INTO leases (` + leaseColumns + `) VALUES (?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
		createLease:  `INSERT INTO leases (` + leaseColumns + `) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		deleteLease:  `DELETE FROM leases WHERE name = ?`,
		leasesAll:    `SELECT ` + leaseColumns + ` FROM leases ORDER BY name`,
		leasesPrefix: `SELECT ` + leaseColumns + ` FROM leases WHERE name >= ? AND name < ? ORDER BY name`,
		fence: `SELECT 1 FROM leases WHERE name = ? AND value = ? AND (expires_at = 0 OR expires_at > ` + d.NowNanos + `)` +
			d.LockShared,
	}
	recordQueries(&q)
	for _, p := range []*string{
		&q.lockMetaWrite, &q.setMeta, &q.deleteRecordTerms, &q.deleteRecords,
		&q.lockMeta, &q.revision, &q.compacted, &q.load, &q.get, &q.listAll, &q.listKind, &q.changes,
		&q.insert, &q.update, &q.tombstones, &q.deleteTombstones, &q.setCompacted,
		&q.putLease, &q.createLease, &q.deleteLease, &q.leasesAll, &q.leasesPrefix, &q.fence,
	} {
		*p = d.rebind(*p)
	}
	return q
}
