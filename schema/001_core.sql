-- eventckpt core schema: streams, versions, events, snapshots, checkpoint ids.
-- Applied by the user_version ladder (eventckpt/journal.py) in one transaction with the files after it.

-- A stream is one task / session / thread. A fork names its parent and the parent's version it forked
-- at: it shares the parent's versions up to there and numbers its own versions after it.
CREATE TABLE streams (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,  -- AUTOINCREMENT: ids are never reused
    name         TEXT NOT NULL UNIQUE,
    parent_id    INTEGER REFERENCES streams(id),
    fork_version INTEGER,
    root_id      INTEGER REFERENCES streams(id),     -- NULL for a root; the tree's root for a fork
    created_at   TEXT NOT NULL,                      -- ISO-8601 UTC
    CHECK ((parent_id IS NULL) = (fork_version IS NULL)),
    CHECK ((parent_id IS NULL) = (root_id IS NULL)),
    CHECK (fork_version IS NULL OR fork_version >= 0)
);
CREATE INDEX streams_by_parent ON streams(parent_id) WHERE parent_id IS NOT NULL;

-- A version is one atomic commit (a checkpoint). The primary key is the optimistic-concurrency guard:
-- two writers can never both create version n of a stream.
CREATE TABLE versions (
    stream_id   INTEGER NOT NULL REFERENCES streams(id),
    version     INTEGER NOT NULL CHECK (version >= 1),
    created_at  TEXT NOT NULL,                        -- ISO-8601 UTC, microseconds
    name        TEXT,                                 -- optional checkpoint name
    auto        INTEGER NOT NULL DEFAULT 0 CHECK (auto = 0 OR auto = 1),
    metadata    TEXT,                                 -- JSON object, or NULL
    usage       TEXT,                                 -- JSON object of cumulative counters, or NULL
    event_count INTEGER NOT NULL,
    event_bytes INTEGER NOT NULL,                     -- bytes of the events' JSON values
    checksum    BLOB NOT NULL,                        -- chained over the parent version and the events
    PRIMARY KEY (stream_id, version)
) WITHOUT ROWID;

-- One change inside a version. `path` is a SQLite JSON path ($.messages, $.scratch.k1, $.messages[3]);
-- `value` is JSON text (NULL for delete). Clustered by version, so replay reads a contiguous range.
CREATE TABLE events (
    stream_id INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    -- ORs, not IN (...): SQLite builds a temporary table for an IN list in a CHECK on every INSERT.
    op        TEXT NOT NULL CHECK (op = 'set' OR op = 'append' OR op = 'extend' OR op = 'delete' OR op = 'incr'
                                   OR op = 'truncate'),
    path      TEXT NOT NULL,
    value     TEXT,
    PRIMARY KEY (stream_id, version, seq),
    FOREIGN KEY (stream_id, version) REFERENCES versions (stream_id, version)
) WITHOUT ROWID;
-- The history of one path, and the rebuild of a key from its own events, are range scans of this index.
CREATE INDEX events_by_path ON events(stream_id, path, version);

-- A materialized state. `state` holds the keys written in full at this version; `manifest` names every
-- key of the state with [base, bytes]: base is this version (written here), an earlier snapshot
-- version of the lineage holding it (changed since only by appends at exactly that key), or
-- [version, seq] of the event that created it (built since only by appends).
CREATE TABLE snapshots (
    stream_id INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    state     TEXT NOT NULL,
    manifest  TEXT NOT NULL,
    PRIMARY KEY (stream_id, version),
    FOREIGN KEY (stream_id, version) REFERENCES versions (stream_id, version)
) WITHOUT ROWID;

-- Caller-chosen checkpoint ids (LangGraph's checkpoint_id, ...), unique within a stream tree.
CREATE TABLE checkpoint_ids (
    tree_id       INTEGER NOT NULL,
    checkpoint_id TEXT NOT NULL,
    stream_id     INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    PRIMARY KEY (tree_id, checkpoint_id),
    FOREIGN KEY (stream_id, version) REFERENCES versions (stream_id, version)
) WITHOUT ROWID;
CREATE INDEX checkpoint_ids_by_version ON checkpoint_ids(stream_id, version);
