-- Tool invocations, committed in the same statement as the version that made them (see the SQLite
-- schema's 003). Retention's generation lives per tree in eventckpt.trees (001).
CREATE TABLE eventckpt.tool_calls (
    tree_id   bigint NOT NULL,
    stream_id bigint NOT NULL,
    version   bigint NOT NULL,
    seq       integer NOT NULL,
    call_id   text NOT NULL,
    name      text NOT NULL,
    arguments text NOT NULL,      -- JSON object
    result    text,               -- JSON (NULL when the call failed)
    error     text,               -- 'ExceptionType: message' (NULL when the call succeeded)
    undoes    text,               -- call_id this call reversed (an undo record), else NULL
    PRIMARY KEY (tree_id, stream_id, version, seq),
    FOREIGN KEY (tree_id, stream_id, version) REFERENCES eventckpt.versions (tree_id, stream_id, version) ON DELETE CASCADE
);
CREATE INDEX tool_calls_by_undoes ON eventckpt.tool_calls (tree_id, undoes) WHERE undoes IS NOT NULL;
CREATE INDEX tool_calls_by_call_id ON eventckpt.tool_calls (tree_id, call_id);

UPDATE eventckpt.store_info SET schema_version = 3;
