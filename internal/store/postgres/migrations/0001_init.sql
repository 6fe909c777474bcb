-- meta is a single row: the last revision given out, and the compaction
-- horizon (the highest revision of a tombstone that Compact dropped; Changes
-- after an older revision may have missed a delete). Writers lock this row
-- first, which serializes them across instances and makes revisions follow
-- commit order.
CREATE TABLE meta (
	revision  BIGINT NOT NULL,
	compacted BIGINT NOT NULL
);
INSERT INTO meta (revision, compacted) VALUES (0, 0);

-- resources holds one row per key: a live resource or a tombstone
-- (deleted, with empty labels, spec and status). labels, spec and status are
-- JSON text, kept byte for byte; status is '' when there is none. Times are
-- Unix nanoseconds (timestamptz would drop the nanoseconds). COLLATE "C"
-- makes ORDER BY kind, mesh, name bytewise, as on SQLite, whatever the
-- database's locale.
CREATE TABLE resources (
	kind              TEXT COLLATE "C" NOT NULL,
	mesh              TEXT COLLATE "C" NOT NULL,
	name              TEXT COLLATE "C" NOT NULL,
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
