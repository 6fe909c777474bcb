-- records holds append-only record streams (store.Record): the audit log,
-- the history of hostnames and VIPs. seq comes from meta.records, given out
-- under the meta row lock, so it follows commit order across instances.
-- terms is the JSON array of the record's terms; record_terms indexes them.
-- time is Unix nanoseconds. COLLATE "C" as for the other tables.
ALTER TABLE meta ADD COLUMN records BIGINT NOT NULL DEFAULT 0;

CREATE TABLE records (
	stream TEXT COLLATE "C" NOT NULL,
	seq    BIGINT NOT NULL,
	time   BIGINT NOT NULL,
	terms  TEXT   NOT NULL,
	data   BYTEA  NOT NULL,
	PRIMARY KEY (stream, seq)
);

-- Queries by time and compaction by age.
CREATE INDEX records_time ON records (stream, time);

CREATE TABLE record_terms (
	stream TEXT COLLATE "C" NOT NULL,
	term   TEXT COLLATE "C" NOT NULL,
	seq    BIGINT NOT NULL,
	PRIMARY KEY (stream, term, seq)
);
