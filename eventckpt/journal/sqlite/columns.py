"""SQL fragments the SQLite journal modules share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

STREAM_COLS = "id, name, parent_id, fork_version, root_id, created_at"
VERSION_COLS = "stream_id, version, created_at, name, auto, metadata, usage, event_count, event_bytes, checksum"
INSERT_STREAM = (
    "INSERT INTO streams (name, parent_id, fork_version, root_id, created_at) VALUES (?, ?, ?, ?, ?)"
    " RETURNING " + STREAM_COLS
)
INSERT_VERSION = "INSERT INTO versions (" + VERSION_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
S_COLS = ", ".join("s." + c for c in STREAM_COLS.split(", "))


def json_list(values: Sequence[Any]) -> str:
    """A JSON array of ints/strs, bound as one parameter (for `IN (SELECT value FROM json_each(?))`)."""
    return orjson.dumps(list(values)).decode()
