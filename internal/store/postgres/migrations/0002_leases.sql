-- leases holds small named records beside the resources (store.Lease): VIP
-- allocations, their quarantine, the leader lease. They have no revision and
-- are not in the change feed. Names are printable ASCII; COLLATE "C" makes
-- ORDER BY name and the prefix range scan (name >= prefix AND name <
-- successor), which uses the primary key index, bytewise as on SQLite,
-- whatever the database's locale. value is opaque bytes ('' when empty,
-- never NULL); expires_at is Unix nanoseconds (timestamptz would drop the
-- nanoseconds), 0 meaning never.
CREATE TABLE leases (
	name       TEXT COLLATE "C" PRIMARY KEY,
	value      BYTEA  NOT NULL,
	expires_at BIGINT NOT NULL
);
