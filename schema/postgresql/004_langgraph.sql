-- The LangGraph checkpointer (eventckpt.langgraph; see the SQLite schema's 004). A (thread, namespace) is
-- one stream tree; `langgraph_threads` is the lookup from the thread's names to it. Both LangGraph tables
-- are keyed by thread first (LangGraph addresses everything by thread, and may store a task's pending
-- writes before its namespace has a checkpoint): distribute them by thread_id, co-located.
CREATE TABLE eventckpt.langgraph_threads (
    thread_id     text NOT NULL,
    checkpoint_ns text NOT NULL,
    tree_id       bigint NOT NULL UNIQUE,
    PRIMARY KEY (thread_id, checkpoint_ns)
);

CREATE TABLE eventckpt.langgraph_writes (
    thread_id     text NOT NULL,
    checkpoint_ns text NOT NULL,
    checkpoint_id text NOT NULL,
    task_id       text NOT NULL,
    task_path     text NOT NULL DEFAULT '',
    writes        text NOT NULL,        -- JSON array of [idx, channel, encoding, value]
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id)
);

-- Checkpoint ids that moved: LangGraph's savers overwrite a checkpoint put again with an id the thread
-- already holds; eventckpt keeps history instead (the new version takes the id, and the version that held
-- it is recorded here, so later checkpoints still name it as their parent).
CREATE TABLE eventckpt.langgraph_moved (
    tree_id       bigint NOT NULL,
    stream_id     bigint NOT NULL,
    version       bigint NOT NULL,
    checkpoint_id text NOT NULL,
    PRIMARY KEY (tree_id, stream_id, version),
    FOREIGN KEY (tree_id, stream_id, version) REFERENCES eventckpt.versions (tree_id, stream_id, version) ON DELETE CASCADE
);

-- delete_for_runs finds a run's checkpoints by the run_id LangGraph puts in their metadata.
CREATE INDEX versions_by_run_id ON eventckpt.versions ((metadata::jsonb #>> '{metadata,run_id}'))
    WHERE metadata IS NOT NULL AND (metadata::jsonb #>> '{metadata,run_id}') IS NOT NULL;

UPDATE eventckpt.store_info SET schema_version = 4;
