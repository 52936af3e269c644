-- Agent integrations: tool invocations recorded with the version that made them, and the generation
-- counter that retention (prune, expire, remove) bumps when it rewrites existing history.

-- One tool call, committed in the same transaction as the version that made it. `call_id` is stable
-- (the caller's, e.g. an LLM tool-call id, or generated); an undo is itself recorded as a call whose
-- `undoes` names the call it reversed, so undoing never clears the record of what happened.
CREATE TABLE tool_calls (
    stream_id INTEGER NOT NULL,
    version   INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    call_id   TEXT NOT NULL,
    name      TEXT NOT NULL,         -- the tool's name
    arguments TEXT NOT NULL,          -- JSON object
    result    TEXT,                   -- JSON (NULL when the call failed)
    error     TEXT,                   -- 'ExceptionType: message' (NULL when the call succeeded)
    undoes    TEXT,                   -- call_id this call reversed (an undo record), else NULL
    PRIMARY KEY (stream_id, version, seq),
    FOREIGN KEY (stream_id, version) REFERENCES versions (stream_id, version) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX tool_calls_by_undoes ON tool_calls(undoes) WHERE undoes IS NOT NULL;
CREATE INDEX tool_calls_by_call_id ON tool_calls(call_id);

-- Bumped (in the same transaction) whenever retention rewrites history that is already committed.
-- Every Store checks it inside its write transaction and drops its cached heads when it moved: a
-- cached head's snapshot tracker may refer to snapshots or events that no longer exist.
CREATE TABLE history_generation (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
INSERT INTO history_generation (id, generation) VALUES (1, 0);
