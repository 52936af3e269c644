-- eventckpt 005: per-version token usage in the checkpoints view, and the number of a removed head.

-- The newest version number a stream ever had, when its head was removed (CheckpointStore.remove of the
-- head, llmfy's delete of the latest checkpoint). The next version is numbered above it, so a version
-- number never names two different states. NULL: no head was ever removed.
ALTER TABLE streams ADD COLUMN removed_head INTEGER CHECK (removed_head IS NULL OR removed_head >= 1);

-- `checkpoints` as in 002, with the usage each version added next to the cumulative counters:
-- `usage_added` (JSON: every counter of this version minus its value at the previous version of the
-- stream's history, 0 when it had none; NULL when the version has no usage), `input_tokens_added` and
-- `output_tokens_added`. The previous version is found by a window over the stream's lineage: a fork's
-- first own version compares with the version it forked at, and a version after a retention hole with
-- the last one kept before it. PARTITION BY the stream's name lets `WHERE stream = ...` filter before
-- the window runs (sqlite3 3.40 and later), so a query on one stream reads only that stream's history.
DROP VIEW checkpoints;
CREATE VIEW checkpoints AS
SELECT c.stream AS stream, c.version AS version, c.created_at AS created_at, c.name AS name, c.auto AS auto,
       c.metadata AS metadata, c.usage AS usage, c.input_tokens AS input_tokens, c.output_tokens AS output_tokens,
       CASE WHEN c.usage IS NOT NULL THEN
           (SELECT json_group_object(n.key, n.value - coalesce(o.value, 0))
            FROM json_each(c.usage) AS n LEFT JOIN json_each(c.previous_usage) AS o ON o.key = n.key)
       END AS usage_added,
       c.input_tokens - coalesce(json_extract(c.previous_usage, '$.input_tokens'), 0) AS input_tokens_added,
       c.output_tokens - coalesce(json_extract(c.previous_usage, '$.output_tokens'), 0) AS output_tokens_added,
       c.event_count AS event_count, c.event_bytes AS event_bytes, c.fork_of AS fork_of, c.fork_version AS fork_version,
       c.stored_in AS stored_in, c.inherited AS inherited, c.checkpoint_id AS checkpoint_id
FROM (
    SELECT l.stream AS stream, v.version AS version, v.created_at AS created_at, v.name AS name, v.auto AS auto,
           v.metadata AS metadata, v.usage AS usage,
           json_extract(v.usage, '$.input_tokens') AS input_tokens,
           json_extract(v.usage, '$.output_tokens') AS output_tokens,
           lag(v.usage) OVER (PARTITION BY l.stream ORDER BY v.version) AS previous_usage,
           v.event_count AS event_count, v.event_bytes AS event_bytes,
           (SELECT p.name FROM streams AS p WHERE p.id = s.parent_id) AS fork_of, s.fork_version AS fork_version,
           l.stored_in AS stored_in, l.stream_id <> l.stored_in_id AS inherited,
           (SELECT i.checkpoint_id FROM checkpoint_ids AS i WHERE i.stream_id = v.stream_id AND i.version = v.version)
               AS checkpoint_id
    FROM lineage AS l
    CROSS JOIN streams AS s ON s.id = l.stream_id
    CROSS JOIN versions AS v ON v.stream_id = l.stored_in_id AND v.version BETWEEN l.lo AND l.hi
) AS c;
