-- eventckpt queries: the indexes that make log, history, diff and search O(result), and views that make
-- the file readable with the stock sqlite3 CLI (3.40, Debian 12: nothing newer is used here).

-- Checkpoint names, for log(name=...) within a stream and search(name=...) across streams.
CREATE INDEX versions_by_name ON versions(name, stream_id, version) WHERE name IS NOT NULL;

-- Events that reshape a list other than by appending: the last of these at a path tells where a list
-- was last reset, so its length at any version is that reset plus a count of appends (an index-only
-- count) without reading the appended values. Appends and scalar sets, the bulk of a journal, are not
-- in it, so it costs writers next to nothing. (ORs, not op IN (...): SQLite evaluates an IN list in an
-- index or CHECK clause through a temporary table built for every INSERT statement, ~10 us a commit.)
CREATE INDEX events_reshaping ON events(stream_id, path, version)
    WHERE op = 'delete' OR op = 'truncate' OR op = 'extend' OR (op = 'set' AND substr(value, 1, 1) = '[');

-- Metadata values (top-level str and int values of versions.metadata), so a metadata filter is an index
-- lookup instead of a scan. Kept by triggers: every writer, import and deletion maintains it for free.
-- `value` has no declared type on purpose: no affinity, so the text '5' and the integer 5 stay apart.
CREATE TABLE metadata_index (
    key       TEXT NOT NULL,
    value     NOT NULL,
    stream_id INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    PRIMARY KEY (key, value, stream_id, version)
) WITHOUT ROWID;

CREATE TRIGGER metadata_index_insert AFTER INSERT ON versions WHEN NEW.metadata IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO metadata_index (key, value, stream_id, version)
    SELECT key, value, NEW.stream_id, NEW.version FROM json_each(NEW.metadata) WHERE type = 'text' OR type = 'integer';
END;

CREATE TRIGGER metadata_index_delete AFTER DELETE ON versions WHEN OLD.metadata IS NOT NULL
BEGIN
    DELETE FROM metadata_index WHERE (key, value, stream_id, version) IN (
        SELECT key, value, OLD.stream_id, OLD.version FROM json_each(OLD.metadata) WHERE type = 'text' OR type = 'integer');
END;

INSERT OR IGNORE INTO metadata_index (key, value, stream_id, version)
SELECT e.key, e.value, v.stream_id, v.version
FROM versions AS v, json_each(v.metadata) AS e
WHERE v.metadata IS NOT NULL AND (e.type = 'text' OR e.type = 'integer');

-- Every stream's lineage as ranges: versions lo..hi of `stream`'s history are stored under `stored_in`.
-- A fork shares its parent's versions up to the fork point (and a fork of a fork may branch below its
-- parent's own versions), so a stream's history is a chain of ranges, root first.
CREATE VIEW lineage (stream, stream_id, stored_in, stored_in_id, lo, hi) AS
WITH RECURSIVE up (stream_id, owner_id, lo, hi, next_parent, next_hi) AS (
    SELECT id, id, coalesce(fork_version, 0) + 1, 9223372036854775807, parent_id, fork_version FROM streams
    UNION ALL
    SELECT up.stream_id, p.id, coalesce(p.fork_version, 0) + 1, min(up.hi, up.next_hi), p.parent_id, p.fork_version
    FROM up JOIN streams AS p ON p.id = up.next_parent
)
SELECT s.name, up.stream_id, o.name, up.owner_id, up.lo, up.hi
FROM up JOIN streams AS s ON s.id = up.stream_id JOIN streams AS o ON o.id = up.owner_id
WHERE up.lo <= up.hi;

-- One row per checkpoint of every stream's history: a fork lists the versions it shares with its parent
-- too (`inherited` = 1, `stored_in` names the stream that holds them). `usage` is the cumulative token
-- usage as JSON; the common counters have their own columns.
CREATE VIEW checkpoints AS
SELECT l.stream AS stream, v.version AS version, v.created_at AS created_at, v.name AS name, v.auto AS auto,
       v.metadata AS metadata, v.usage AS usage,
       json_extract(v.usage, '$.input_tokens') AS input_tokens,
       json_extract(v.usage, '$.output_tokens') AS output_tokens,
       v.event_count AS event_count, v.event_bytes AS event_bytes,
       (SELECT p.name FROM streams AS p WHERE p.id = s.parent_id) AS fork_of, s.fork_version AS fork_version,
       l.stored_in AS stored_in, l.stream_id <> l.stored_in_id AS inherited,
       (SELECT c.checkpoint_id FROM checkpoint_ids AS c WHERE c.stream_id = v.stream_id AND c.version = v.version)
           AS checkpoint_id
FROM lineage AS l
CROSS JOIN streams AS s ON s.id = l.stream_id
CROSS JOIN versions AS v ON v.stream_id = l.stored_in_id AND v.version BETWEEN l.lo AND l.hi;

-- One row per stored event, readable: the stream's name, when its version was committed, the op, the
-- path (a SQLite JSON path) and the value as JSON text.
CREATE VIEW changes AS
SELECT s.name AS stream, e.version AS version, e.seq AS seq, v.created_at AS created_at, v.name AS checkpoint,
       e.op AS op, e.path AS path, e.value AS value
FROM events AS e
JOIN streams AS s ON s.id = e.stream_id
JOIN versions AS v ON v.stream_id = e.stream_id AND v.version = e.version;

-- The history of a path in every stream, inherited versions included: filter on `stream` and `path`
-- (an index lookup per lineage range: INDEXED BY and CROSS JOIN, because without statistics newer
-- planners would rather scan the events first). Events below a path are a range of paths:
-- path >= '$.scratch.' AND path < '$.scratch/' holds every key of scratch.
CREATE VIEW path_history AS
SELECT l.stream AS stream, e.path AS path, e.version AS version, e.seq AS seq, v.created_at AS created_at,
       e.op AS op, e.value AS value, l.stored_in AS stored_in
FROM lineage AS l
CROSS JOIN events AS e INDEXED BY events_by_path ON e.stream_id = l.stored_in_id AND e.version BETWEEN l.lo AND l.hi
CROSS JOIN versions AS v ON v.stream_id = e.stream_id AND v.version = e.version;

-- One row per stream: where it forked from, its head version and when that was committed.
CREATE VIEW stream_heads AS
SELECT s.name AS stream, p.name AS fork_of, s.fork_version AS fork_version, s.created_at AS created_at,
       coalesce((SELECT max(v.version) FROM versions AS v WHERE v.stream_id = s.id), s.fork_version, 0) AS head,
       (SELECT v.created_at FROM versions AS v WHERE v.stream_id = s.id ORDER BY v.version DESC LIMIT 1) AS updated_at
FROM streams AS s LEFT JOIN streams AS p ON p.id = s.parent_id;
