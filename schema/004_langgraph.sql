-- The LangGraph checkpointer (eventckpt.langgraph): which stream tree holds each thread's namespace,
-- and the writes LangGraph stores next to its checkpoints. A LangGraph checkpoint is one version of a
-- stream in that tree: its channels are the state, and the version's metadata is the JSON object
-- {"metadata": LangGraph's metadata, "checkpoint": LangGraph's checkpoint fields (v, ts,
-- channel_versions, versions_seen, updated_channels, ...)}.

-- One row per (thread, checkpoint namespace): the root of the stream tree holding its checkpoints.
-- Checkpoint ids live in checkpoint_ids under that tree; a checkpoint whose parent is not the head of
-- its stream is a fork in the same tree.
CREATE TABLE langgraph_threads (
    thread_id     TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    tree_id       INTEGER NOT NULL UNIQUE REFERENCES streams(id),
    PRIMARY KEY (thread_id, checkpoint_ns)
) WITHOUT ROWID;

-- A task's writes attached to a checkpoint (LangGraph's "pending writes"): `writes` is a JSON array of
-- [idx, channel, encoding, value] ordered by idx, where encoding is null for a plain JSON value, else
-- [serde type, form] telling how the saver's serializer encoded it ("tree": its msgpack as JSON;
-- "bytes": the serialized bytes).
CREATE TABLE langgraph_writes (
    thread_id     TEXT NOT NULL,
    checkpoint_ns TEXT NOT NULL,
    checkpoint_id TEXT NOT NULL,
    task_id       TEXT NOT NULL,
    task_path     TEXT NOT NULL DEFAULT '',
    writes        TEXT NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id)
) WITHOUT ROWID;

-- delete_for_runs finds a run's checkpoints by the run_id LangGraph puts in their metadata.
CREATE INDEX versions_by_run_id ON versions(json_extract(metadata, '$.metadata.run_id'))
    WHERE json_extract(metadata, '$.metadata.run_id') IS NOT NULL;
