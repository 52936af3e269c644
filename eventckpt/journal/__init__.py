"""The journal: the only package that speaks SQL or imports a database driver.

`contract.py` documents what every engine promises (`Journal`, `Backend`); `rows.py` holds the rows they
exchange with the rest of eventckpt. Engines: `sqlite` (apsw, one file, the embedded default) and
`postgres` (psycopg 3, shared by many hosts).
"""

from __future__ import annotations

from .contract import Backend, Journal
from .rows import (CheckpointIdTaken, Commit, EventRow, HistoryRewritten, HistoryRow, LangGraphRow, LogRow, MetaFilter,
                   Segment, StreamKey, StreamRef, StreamRow, VersionRow, VersionTaken, clip, segments_for)
from .sqlite import APPLICATION_ID, DURABILITY, SCHEMA_VERSION, schema_files
from .sqlite import connect as connect_sqlite

__all__ = [
    "APPLICATION_ID", "DURABILITY", "SCHEMA_VERSION", "Backend", "CheckpointIdTaken", "Commit", "EventRow",
    "HistoryRewritten", "HistoryRow", "Journal", "LangGraphRow", "LogRow", "MetaFilter", "Segment", "StreamKey", "StreamRef",
    "StreamRow", "VersionRow", "VersionTaken", "clip", "connect_sqlite", "schema_files", "segments_for",
]
