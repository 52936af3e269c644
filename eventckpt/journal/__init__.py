"""The journal: the only package that speaks SQL or imports a database driver.

`contract.py` documents what every engine promises (`Journal`, `Backend`); `rows.py` holds the rows they
exchange with the rest of eventckpt. Engines: `sqlite` (apsw, one file, the embedded default) and
`postgres` (psycopg 3, shared by many hosts).
"""

from __future__ import annotations

from typing import Any

from ..errors import InvalidArgumentError
from .contract import Backend, Journal
from .rows import (CheckpointIdTaken, Commit, EventRow, HistoryRewritten, HistoryRow, LangGraphRow, LogRow, MetaFilter, MetaTerm,
                   Segment, StreamKey, StreamRef, StreamRow, SummaryRow, VersionRow, VersionTaken, clip,
                   segments_for)
from .sqlite import APPLICATION_ID, DURABILITY, SCHEMA_VERSION, schema_files
from .sqlite import connect as connect_sqlite


def is_postgres(target: Any) -> bool:
    """Whether `target` names a PostgreSQL store (a postgresql:// URL, a psycopg connection or pool),
    decided without importing psycopg for the file paths SQLite users pass."""
    if isinstance(target, str):  # a URL's scheme is case-insensitive (RFC 3986): POSTGRESQL:// too
        return target[:13].lower().startswith(("postgresql://", "postgres://"))
    return type(target).__module__.split(".")[0] in ("psycopg", "psycopg_pool")


def _lower_scheme(url: str) -> str:
    """The URL with its scheme in lower case: libpq reads only postgresql:// and postgres:// as URLs."""
    scheme, sep, rest = url.partition("://")
    return scheme.lower() + sep + rest


def connect(target: Any, *, durability: str = "normal", timeout: float = 30.0, readonly: bool = False,
            vfs: str | None = None, pool_size: int = 10, create: bool = True) -> Backend:
    """The backend of the store `target` names: a file path (or ":memory:") for SQLite; a
    postgresql:// URL, a psycopg connection or a psycopg_pool pool for PostgreSQL. Without `create`
    (always when `readonly`), a store that does not exist yet raises StoreNotFoundError and nothing is
    created."""
    if is_postgres(target):
        if vfs is not None:
            raise InvalidArgumentError("vfs", vfs, "is an SQLite option; a PostgreSQL store has no VFS")
        try:
            from .postgres import connect as connect_postgres
        except ImportError as exc:
            raise InvalidArgumentError("target", target, "a PostgreSQL store needs psycopg 3 and psycopg_pool:"
                                       f" pip install 'eventckpt[postgres]' ({exc})") from None
        if isinstance(target, str):
            target = _lower_scheme(target)
        return connect_postgres(target, durability=durability, timeout=timeout, readonly=readonly, pool_size=pool_size,
                                create=create)
    return connect_sqlite(target, durability=durability, timeout=timeout, readonly=readonly, vfs=vfs, create=create)

__all__ = [
    "APPLICATION_ID", "DURABILITY", "SCHEMA_VERSION", "Backend", "CheckpointIdTaken", "Commit", "EventRow",
    "HistoryRewritten", "HistoryRow", "Journal", "LangGraphRow", "LogRow", "MetaFilter", "MetaTerm", "Segment", "StreamKey", "StreamRef",
    "StreamRow", "SummaryRow", "VersionRow", "VersionTaken", "clip", "connect", "connect_sqlite", "is_postgres", "schema_files", "segments_for",
]
