-- eventckpt queries on PostgreSQL: the indexes that make log, history, diff and search O(result), the
-- metadata index, and views equivalent to the SQLite file's for `psql` users (SET search_path TO
-- eventckpt, or qualify: eventckpt.checkpoints). The views present JSON text as json.

-- Checkpoint names, for log(name=...) within a stream and search(name=...) across streams.
CREATE INDEX versions_by_name ON eventckpt.versions (name, tree_id, stream_id, version) WHERE name IS NOT NULL;

-- Events that reshape a list other than by appending (see the SQLite schema's 002 for why).
CREATE INDEX events_reshaping ON eventckpt.events (tree_id, stream_id, path, version, seq)
    WHERE op IN ('delete', 'truncate', 'extend') OR (op = 'set' AND left(value, 1) = '[');

-- Top-level str and integer metadata values (as jsonb: the string "5" and the number 5 stay apart), kept
-- by a trigger: every writer, import and deletion maintains it.
CREATE TABLE eventckpt.metadata_index (
    tree_id   bigint NOT NULL,
    key       text NOT NULL,
    value     jsonb NOT NULL,
    stream_id bigint NOT NULL,
    version   bigint NOT NULL,
    PRIMARY KEY (tree_id, key, value, stream_id, version)
);
CREATE INDEX metadata_index_by_value ON eventckpt.metadata_index (key, value);

CREATE FUNCTION eventckpt.maintain_metadata_index() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO eventckpt.metadata_index (tree_id, key, value, stream_id, version)
        SELECT NEW.tree_id, e.key, e.value, NEW.stream_id, NEW.version
        FROM jsonb_each(NEW.metadata::jsonb) AS e
        WHERE jsonb_typeof(e.value) = 'string' OR (jsonb_typeof(e.value) = 'number' AND e.value::text ~ '^-?[0-9]+$')
        ON CONFLICT DO NOTHING;
        RETURN NEW;
    END IF;
    DELETE FROM eventckpt.metadata_index
    WHERE tree_id = OLD.tree_id AND stream_id = OLD.stream_id AND version = OLD.version;
    RETURN OLD;
END $$;

CREATE TRIGGER metadata_index_insert AFTER INSERT ON eventckpt.versions
    FOR EACH ROW WHEN (NEW.metadata IS NOT NULL) EXECUTE FUNCTION eventckpt.maintain_metadata_index();
CREATE TRIGGER metadata_index_delete AFTER DELETE ON eventckpt.versions
    FOR EACH ROW WHEN (OLD.metadata IS NOT NULL) EXECUTE FUNCTION eventckpt.maintain_metadata_index();

-- Every stream's lineage as ranges: versions lo..hi of `stream`'s history are stored under `stored_in`.
CREATE VIEW eventckpt.lineage (stream, tree_id, stream_id, stored_in, stored_in_id, lo, hi) AS
WITH RECURSIVE up (tree_id, stream_id, owner_id, lo, hi, next_parent, next_hi) AS (
    SELECT tree_id, stream_id, stream_id, coalesce(fork_version, 0) + 1, 9223372036854775807::bigint, parent_id, fork_version
    FROM eventckpt.streams
    UNION ALL
    SELECT up.tree_id, up.stream_id, p.stream_id, coalesce(p.fork_version, 0) + 1, least(up.hi, up.next_hi),
           p.parent_id, p.fork_version
    FROM up JOIN eventckpt.streams AS p ON p.tree_id = up.tree_id AND p.stream_id = up.next_parent
)
SELECT s.name, up.tree_id, up.stream_id, o.name, up.owner_id, up.lo, up.hi
FROM up
JOIN eventckpt.streams AS s ON s.tree_id = up.tree_id AND s.stream_id = up.stream_id
JOIN eventckpt.streams AS o ON o.tree_id = up.tree_id AND o.stream_id = up.owner_id
WHERE up.lo <= up.hi;

-- One row per checkpoint of every stream's history (a fork lists the versions it shares too, with
-- `inherited`): the cumulative usage, what each version added (`usage_added`, `input_tokens_added`,
-- `output_tokens_added`: against the previous version of the stream's history), and the common counters.
CREATE VIEW eventckpt.checkpoints AS
SELECT c.stream, c.version, c.created_at, c.name, c.auto, c.metadata, c.usage, c.input_tokens, c.output_tokens,
       CASE WHEN c.usage IS NOT NULL THEN
           (SELECT json_object_agg(n.key, n.value::text::numeric - coalesce(o.value::text::numeric, 0))
            FROM json_each(c.usage) AS n LEFT JOIN json_each(c.previous_usage) AS o ON o.key = n.key)
       END AS usage_added,
       c.input_tokens - coalesce((c.previous_usage ->> 'input_tokens')::numeric, 0) AS input_tokens_added,
       c.output_tokens - coalesce((c.previous_usage ->> 'output_tokens')::numeric, 0) AS output_tokens_added,
       c.event_count, c.event_bytes, c.fork_of, c.fork_version, c.stored_in, c.inherited, c.checkpoint_id
FROM (
    SELECT l.stream AS stream, v.version AS version, v.created_at::timestamptz AS created_at, v.name AS name,
           v.auto = 1 AS auto, v.metadata::json AS metadata, v.usage::json AS usage,
           (v.usage::json ->> 'input_tokens')::numeric AS input_tokens,
           (v.usage::json ->> 'output_tokens')::numeric AS output_tokens,
           lag(v.usage::json) OVER (PARTITION BY l.stream ORDER BY v.version) AS previous_usage,
           v.event_count AS event_count, v.event_bytes AS event_bytes,
           (SELECT p.name FROM eventckpt.streams AS p WHERE p.tree_id = s.tree_id AND p.stream_id = s.parent_id) AS fork_of,
           s.fork_version AS fork_version, l.stored_in AS stored_in, l.stream_id <> l.stored_in_id AS inherited,
           (SELECT i.checkpoint_id FROM eventckpt.checkpoint_ids AS i
             WHERE i.tree_id = v.tree_id AND i.stream_id = v.stream_id AND i.version = v.version) AS checkpoint_id
    FROM eventckpt.lineage AS l
    JOIN eventckpt.streams AS s ON s.tree_id = l.tree_id AND s.stream_id = l.stream_id
    JOIN eventckpt.versions AS v ON v.tree_id = l.tree_id AND v.stream_id = l.stored_in_id AND v.version BETWEEN l.lo AND l.hi
) AS c;

-- One row per stored event, readable: stream name, version, time, op, path, value.
CREATE VIEW eventckpt.changes AS
SELECT s.name AS stream, e.version AS version, e.seq AS seq, v.created_at::timestamptz AS created_at,
       v.name AS checkpoint, e.op AS op, e.path AS path, e.value::json AS value
FROM eventckpt.events AS e
JOIN eventckpt.streams AS s ON s.tree_id = e.tree_id AND s.stream_id = e.stream_id
JOIN eventckpt.versions AS v ON v.tree_id = e.tree_id AND v.stream_id = e.stream_id AND v.version = e.version;

-- The history of a path in every stream, inherited versions included: filter on `stream` and `path`.
-- Every path below $.plan lies in [ '$.plan.', '$.plan/' ) (keys) or [ '$.plan[', '$.plan\' ) (items).
CREATE VIEW eventckpt.path_history AS
SELECT l.stream AS stream, e.path AS path, e.version AS version, e.seq AS seq, v.created_at::timestamptz AS created_at,
       e.op AS op, e.value::json AS value, l.stored_in AS stored_in
FROM eventckpt.lineage AS l
JOIN eventckpt.events AS e ON e.tree_id = l.tree_id AND e.stream_id = l.stored_in_id AND e.version BETWEEN l.lo AND l.hi
JOIN eventckpt.versions AS v ON v.tree_id = e.tree_id AND v.stream_id = e.stream_id AND v.version = e.version;

-- One row per stream: where it forked from, its head version and when that was committed.
CREATE VIEW eventckpt.stream_heads AS
SELECT s.name AS stream, p.name AS fork_of, s.fork_version AS fork_version, s.created_at::timestamptz AS created_at,
       coalesce((SELECT max(v.version) FROM eventckpt.versions AS v WHERE v.tree_id = s.tree_id AND v.stream_id = s.stream_id),
                s.fork_version, 0) AS head,
       (SELECT v.created_at::timestamptz FROM eventckpt.versions AS v WHERE v.tree_id = s.tree_id AND v.stream_id = s.stream_id
         ORDER BY v.version DESC LIMIT 1) AS updated_at
FROM eventckpt.streams AS s
LEFT JOIN eventckpt.streams AS p ON p.tree_id = s.tree_id AND p.stream_id = s.parent_id;

UPDATE eventckpt.store_info SET schema_version = 2;
