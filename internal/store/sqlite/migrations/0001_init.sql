-- meta is a single row: the last revision given out, and the compaction
-- horizon (the highest revision of a tombstone that Compact dropped; Changes
-- after an older revision may have missed a delete).
CREATE TABLE meta (
	revision  BIGINT NOT NULL,
	compacted BIGINT NOT NULL
);
INSERT INTO meta (revision, compacted) VALUES (0, 0);

-- resources holds one row per key: a live resource or a tombstone
-- (deleted, with empty labels, spec and status). labels, spec and status are
-- JSON text; status is '' when there is none. Times are Unix nanoseconds.
-- SQLite compares TEXT bytewise, so ORDER BY kind, mesh, name is Go string
-- order, as on PostgreSQL with COLLATE "C".
CREATE TABLE resources (
	kind              TEXT    NOT NULL,
	mesh              TEXT    NOT NULL,
	name              TEXT    NOT NULL,
	version           BIGINT  NOT NULL,
	revision          BIGINT  NOT NULL,
	deleted           BOOLEAN NOT NULL,
	labels            TEXT    NOT NULL,
	spec              TEXT    NOT NULL,
	status            TEXT    NOT NULL,
	creation_time     BIGINT  NOT NULL,
	modification_time BIGINT  NOT NULL,
	PRIMARY KEY (kind, mesh, name)
);

-- The change feed reads by revision.
CREATE UNIQUE INDEX resources_revision ON resources (revision);

-- Compact finds old tombstones.
CREATE INDEX resources_tombstones ON resources (modification_time) WHERE deleted;
