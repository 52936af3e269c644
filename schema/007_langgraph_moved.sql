-- The LangGraph checkpointer (eventckpt.langgraph), continued: checkpoint ids that moved.
--
-- LangGraph's own savers overwrite a checkpoint that is put again with an id the thread already holds.
-- eventckpt keeps history instead: the new checkpoint is a new version and takes the id, and the
-- version that held it before is recorded here, so that the checkpoints after it still name it as
-- their parent (as SqliteSaver's rows do).
CREATE TABLE langgraph_moved (
    stream_id     INTEGER NOT NULL,
    version       INTEGER NOT NULL,
    checkpoint_id TEXT NOT NULL,
    PRIMARY KEY (stream_id, version),
    FOREIGN KEY (stream_id, version) REFERENCES versions (stream_id, version) ON DELETE CASCADE
) WITHOUT ROWID;
