-- eventckpt on PostgreSQL: the core tables. Applied by the ladder in eventckpt/journal/postgres/engine.py
-- (all pending rungs in one transaction, or savepoint when the caller's connection is in a transaction).
--
-- Everything lives in the schema `eventckpt`, so a database shared with other programs keeps its names.
-- Designed to distribute by stream tree (Citus `create_distributed_table(..., 'tree_id')`, or a
-- PostgreSQL-compatible distributed engine): every per-tree table carries `tree_id`, every primary and
-- unique key starts with it, and every statement eventckpt runs on them names one tree. Optimistic
-- concurrency is the versions primary key: no table locks, no advisory locks, no global write sequence.
-- The exceptions are lookups by name (`stream_names`, and the LangGraph tables in 004, keyed by thread),
-- and `store_info`, one row.
--
-- Values, metadata, usage, snapshot states and manifests are JSON *text*, stored byte for byte as written
-- (checksums are over those bytes; `jsonb` would reorder keys). The views in 002 present them as json.
-- Paths use COLLATE "C": path ranges (`path >= '$.scratch.' AND path < '$.scratch/'`) need bytewise order.

CREATE SCHEMA IF NOT EXISTS eventckpt;

-- The store's identity and schema version (the ladder reads and locks this row).
CREATE TABLE eventckpt.store_info (
    id             integer PRIMARY KEY CHECK (id = 1),
    schema_version integer NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- Stream ids come from this sequence (only when a stream is created, never per write).
CREATE SEQUENCE eventckpt.stream_ids;

-- One row per stream tree: a root stream and every fork below it.
CREATE TABLE eventckpt.trees (
    tree_id bigint PRIMARY KEY
);

-- A stream is one task / session / thread. A fork names its parent (in the same tree) and the version it
-- forked at: it shares the parent's versions up to there and numbers its own versions after it.
CREATE TABLE eventckpt.streams (
    tree_id      bigint NOT NULL REFERENCES eventckpt.trees (tree_id),
    stream_id    bigint NOT NULL,
    name         text NOT NULL,
    parent_id    bigint,
    fork_version bigint CHECK (fork_version >= 0),
    created_at   text NOT NULL,                       -- ISO-8601 UTC
    -- Moves whenever retention rewrites the tree's committed history. A commit locks its stream's row
    -- FOR KEY SHARE (the lock its foreign key check takes anyway, so it costs nothing more) and writes
    -- only if the generation is the one its writer's cached state was built under; retention holds the
    -- tree's rows FOR UPDATE while it rewrites, so a commit waits for it and then sees the new number.
    generation   bigint NOT NULL DEFAULT 0,
    removed_head bigint,                              -- the number of a removed head: never used again
    PRIMARY KEY (tree_id, stream_id),
    FOREIGN KEY (tree_id, parent_id) REFERENCES eventckpt.streams (tree_id, stream_id),
    CHECK ((parent_id IS NULL) = (fork_version IS NULL)),
    CHECK (parent_id IS NOT NULL OR stream_id = tree_id)  -- a root's id is its tree's id
);
CREATE INDEX streams_by_parent ON eventckpt.streams (tree_id, parent_id) WHERE parent_id IS NOT NULL;
-- Streams in creation order (listings page through them by stream id).
CREATE INDEX streams_by_id ON eventckpt.streams (stream_id);

-- Stream names are unique in the store: the lookup from a name to its stream (keyed by name).
CREATE TABLE eventckpt.stream_names (
    name      text PRIMARY KEY,
    tree_id   bigint NOT NULL,
    stream_id bigint NOT NULL
);

-- A version is one atomic commit (a checkpoint). The primary key is the optimistic-concurrency guard:
-- two writers, on any hosts, can never both create version n of a stream.
CREATE TABLE eventckpt.versions (
    tree_id     bigint NOT NULL,
    stream_id   bigint NOT NULL,
    version     bigint NOT NULL CHECK (version >= 1),
    created_at  text NOT NULL,                        -- ISO-8601 UTC, microseconds
    name        text,
    auto        smallint NOT NULL DEFAULT 0 CHECK (auto = 0 OR auto = 1),
    metadata    text,                                 -- JSON object, or NULL
    usage       text,                                 -- JSON object of cumulative counters, or NULL
    event_count integer NOT NULL,
    event_bytes bigint NOT NULL,
    checksum    bytea NOT NULL,                       -- chained over the parent version and the events
    PRIMARY KEY (tree_id, stream_id, version),
    FOREIGN KEY (tree_id, stream_id) REFERENCES eventckpt.streams (tree_id, stream_id)
);

-- One change inside a version: `path` a SQLite JSON path ($.messages, $.scratch.k1, $.messages[3]) on every
-- engine, `value` JSON text (NULL for delete).
CREATE TABLE eventckpt.events (
    tree_id   bigint NOT NULL,
    stream_id bigint NOT NULL,
    version   bigint NOT NULL,
    seq       integer NOT NULL,
    op        text NOT NULL CHECK (op IN ('set', 'append', 'extend', 'delete', 'incr', 'truncate')),
    path      text COLLATE "C" NOT NULL,
    value     text,
    PRIMARY KEY (tree_id, stream_id, version, seq),
    FOREIGN KEY (tree_id, stream_id, version) REFERENCES eventckpt.versions (tree_id, stream_id, version)
);
-- The history of one path, and the rebuild of a key from its own events, are range scans of this index.
CREATE INDEX events_by_path ON eventckpt.events (tree_id, stream_id, path, version, seq);

-- A materialized state: `state` holds the keys written in full at this version; `manifest` names every
-- key of the state with [base, bytes] (see eventckpt/snapshot.py).
CREATE TABLE eventckpt.snapshots (
    tree_id   bigint NOT NULL,
    stream_id bigint NOT NULL,
    version   bigint NOT NULL,
    state     text NOT NULL,
    manifest  text NOT NULL,
    PRIMARY KEY (tree_id, stream_id, version),
    FOREIGN KEY (tree_id, stream_id, version) REFERENCES eventckpt.versions (tree_id, stream_id, version)
);

-- Caller-chosen checkpoint ids (LangGraph's checkpoint_id, ...), unique within a stream tree.
CREATE TABLE eventckpt.checkpoint_ids (
    tree_id       bigint NOT NULL,
    checkpoint_id text NOT NULL,
    stream_id     bigint NOT NULL,
    version       bigint NOT NULL,
    PRIMARY KEY (tree_id, checkpoint_id),
    FOREIGN KEY (tree_id, stream_id, version) REFERENCES eventckpt.versions (tree_id, stream_id, version)
);
CREATE INDEX checkpoint_ids_by_version ON eventckpt.checkpoint_ids (tree_id, stream_id, version);

INSERT INTO eventckpt.store_info (id, schema_version) VALUES (1, 1);
