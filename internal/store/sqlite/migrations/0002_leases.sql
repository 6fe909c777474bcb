-- leases holds small named records beside the resources (store.Lease): VIP
-- allocations, their quarantine, the leader lease. They have no revision and
-- are not in the change feed. Names are printable ASCII, compared bytewise
-- (TEXT with the default BINARY collation), so ORDER BY name and the prefix
-- range scan (name >= prefix AND name < successor) agree with PostgreSQL's
-- COLLATE "C". value is an opaque BLOB ('' when empty, never NULL);
-- expires_at is Unix nanoseconds, 0 meaning never. WITHOUT ROWID keeps the
-- rows in the primary key's b-tree: one lookup per read, no second index.
CREATE TABLE leases (
	name       TEXT   NOT NULL PRIMARY KEY,
	value      BLOB   NOT NULL,
	expires_at BIGINT NOT NULL
) WITHOUT ROWID;
