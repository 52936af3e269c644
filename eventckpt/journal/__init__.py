"""The journal: the only package that speaks SQL to the engine (with the files in schema/).

Every connection is set up the same way (WAL, busy timeout, foreign keys, synchronous by durability);
the schema is applied by a `user_version` ladder in one transaction; driver errors are translated into
eventckpt's errors here and nowhere else. Caller strings only ever travel as bound parameters.
"""

from __future__ import annotations

import os
from functools import partial

import apsw

from .. import errors
from .engine import (APPLICATION_ID, DURABILITY, SCHEMA_VERSION, Engine, identity, remove_wal_files, schema_files,
                     translate)
from .langgraph import LangGraphRow, LangGraphTables
from .queries import RESHAPING, Queries
from .rows import (EventRow, HistoryRow, LogRow, MetaFilter, Segment, StreamRow, SummaryRow, VersionRow,
                   _CheckpointIdTaken, _VersionTaken, json_list, segments_for)
from .tables import Tables

__all__ = [
    "APPLICATION_ID", "DURABILITY", "RESHAPING", "SCHEMA_VERSION", "Engine", "EventRow", "HistoryRow", "Journal",
    "LangGraphRow", "LogRow", "MetaFilter", "Segment", "StreamRow", "SummaryRow", "VersionRow", "_CheckpointIdTaken",
    "_VersionTaken", "connect", "json_list", "schema_files", "segments_for", "translate",
]


class Journal(Tables, LangGraphTables, Queries):
    """SQL access to one eventckpt file. Not thread-safe by itself: the Store serializes callers."""


# -- opening --------------------------------------------------------------------------------------


def connect(
    path: str, *, durability: str = "normal", timeout: float = 30.0, readonly: bool = False, vfs: str | None = None
) -> Journal:
    """Open (creating when allowed) an eventckpt file. A foreign or newer file is refused untouched.

    `vfs` names a registered SQLite VFS (an apsw.VFS subclass, e.g. a fault-injecting one in tests);
    None is SQLite's default.
    """
    memory = path == ":memory:"
    # A read-only connection to a WAL file creates its -wal and -shm when they are missing (SQLite shares
    # the WAL index with writers through them) but cannot remove them: see Engine.close.
    tidy = readonly and not memory and not any(os.path.exists(path + suffix) for suffix in ("-wal", "-shm"))
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if vfs is not None and vfs not in apsw.vfs_names():
        raise errors.InvalidArgumentError("vfs", vfs, f"is not a registered SQLite VFS {apsw.vfs_names()}")
    try:
        conn = apsw.Connection(path, flags=flags, vfs=vfs)
    except apsw.Error as exc:
        raise translate(exc, f"opening {path}") from None
    try:
        conn.set_busy_timeout(int(timeout * 1000))
        app_id, user_version, fresh = identity(conn, path)
        if readonly and (fresh or user_version < SCHEMA_VERSION):
            raise errors.SchemaError(path, "a read-only store must already hold the current schema")
        if not readonly:
            if fresh:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # must precede WAL and the first table
            if not memory:
                conn.execute("PRAGMA journal_mode = WAL").fetchall()
        conn.execute(DURABILITY[durability])
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA cache_size = -32768")  # 32 MiB: restores of long streams stay in memory
        conn.execute("PRAGMA temp_store = MEMORY")
        journal = Journal(conn, path)
        if tidy:
            journal.on_close = partial(remove_wal_files, path, vfs)
        if not readonly and user_version < SCHEMA_VERSION:
            journal.migrate()
        return journal
    except apsw.Error as exc:
        conn.close()
        raise translate(exc, f"opening {path}") from None
    except BaseException:
        conn.close()
        raise
