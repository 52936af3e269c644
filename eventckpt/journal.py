"""The journal: the only module that speaks SQL to the engine (with the files in schema/).

Every connection is set up the same way (WAL, busy timeout, foreign keys, synchronous by durability);
the schema is applied by a `user_version` ladder in one transaction; driver errors are translated into
eventckpt's errors here and nowhere else. Caller strings only ever travel as bound parameters.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple, NoReturn

import apsw
import orjson

from . import errors
from .paths import child_ranges

APPLICATION_ID = 0x45434B50  # "ECKP": marks the file as an eventckpt store
DURABILITY = {"normal": "PRAGMA synchronous = NORMAL", "full": "PRAGMA synchronous = FULL"}
_SCHEMA_FILE = re.compile(r"(\d{3})_[a-z0-9_]+\.sql\Z")


# -- the schema ladder ----------------------------------------------------------------------------


def _schema_dir() -> Any:
    packaged = resources.files("eventckpt") / "schema"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "schema"  # a source checkout


def schema_files() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every schema file, in ladder order: numbers start at 1 and are unique.

    Numbers are handed out per feature branch, so a branch may lack a rung another branch adds; the
    schema version is the highest number, and a file applies every rung above its user_version.
    """
    found = []
    for entry in _schema_dir().iterdir():
        m = _SCHEMA_FILE.match(entry.name)
        if m:
            found.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort()
    numbers = [n for n, _, _ in found]
    if not numbers or numbers[0] != 1 or len(set(numbers)) != len(numbers):
        raise RuntimeError(f"schema files must start at 001 and be numbered uniquely: {[name for _, name, _ in found]}")
    return found


SCHEMA_VERSION = schema_files()[-1][0]


# -- rows -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamRow:
    id: int
    name: str
    parent_id: int | None
    fork_version: int | None
    root_id: int | None
    created_at: str

    @property
    def tree_id(self) -> int:
        return self.root_id if self.root_id is not None else self.id


@dataclass(frozen=True, slots=True)
class VersionRow:
    stream_id: int
    version: int
    created_at: str
    name: str | None
    auto: int
    metadata: str | None
    usage: str | None
    event_count: int
    event_bytes: int
    checksum: bytes


@dataclass(frozen=True, slots=True)
class Segment:
    """Versions lo..hi of a lineage, owned by one stream."""

    stream_id: int
    lo: int
    hi: int


EventRow = tuple[int, int, str, str, "str | None"]  # version, seq, op, path, value


class LogRow(NamedTuple):
    stream_id: int
    version: int
    created_at: str
    name: str | None
    auto: int
    metadata: str | None
    usage: str | None
    checkpoint_id: str | None


class HistoryRow(NamedTuple):
    stream_id: int
    version: int
    seq: int
    op: str
    path: str
    value: str | None
    created_at: str


@dataclass(frozen=True, slots=True)
class MetaFilter:
    """metadata[key] == value: `path` is the key's JSON path, `json` the value's JSON text, `indexed` the
    (key, value) to look up in metadata_index when the value is a str or an int."""

    path: str
    json: str
    indexed: tuple[str, Any] | None

_STREAM_COLS = "id, name, parent_id, fork_version, root_id, created_at"
_VERSION_COLS = "stream_id, version, created_at, name, auto, metadata, usage, event_count, event_bytes, checksum"
_INSERT_STREAM = (
    "INSERT INTO streams (name, parent_id, fork_version, root_id, created_at) VALUES (?, ?, ?, ?, ?)"
    " RETURNING " + _STREAM_COLS
)
_INSERT_VERSION = "INSERT INTO versions (" + _VERSION_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
_S_COLS = ", ".join("s." + c for c in _STREAM_COLS.split(", "))


@dataclass(frozen=True, slots=True)
class LangGraphRow:
    """A LangGraph checkpoint as the saver lists it: where its state lives and what LangGraph adds."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    stream: str  # the name of the stream holding its version
    version: int
    metadata: str | None
    parent_id: str | None  # the checkpoint id of the previous version of its lineage
    writes: str | None  # JSON array of [task id, [[idx, channel, encoding, value], ...]] in writes order


# The parent is the previous version of the lineage: in the same stream, or (for a fork's first own
# version) the fork point, which the saver always takes in the stream that owns it. Writes come back in
# writes_sort_key order (task_path, task_id, idx).
_LG_CHECKPOINTS = """
SELECT t.thread_id, t.checkpoint_ns, c.checkpoint_id, s.name, c.version, v.metadata,
  (SELECT p.checkpoint_id FROM checkpoint_ids AS p
    WHERE p.stream_id = CASE WHEN c.version - 1 > coalesce(s.fork_version, 0) THEN s.id ELSE s.parent_id END
      AND p.version = c.version - 1),
  (SELECT '[' || group_concat('[' || json_quote(w.task_id) || ',' || w.writes || ']', ','
                               ORDER BY w.task_path, w.task_id) || ']'
     FROM langgraph_writes AS w
    WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = t.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id)
FROM langgraph_threads AS t
JOIN checkpoint_ids AS c ON c.tree_id = t.tree_id
JOIN streams AS s ON s.id = c.stream_id
JOIN versions AS v ON v.stream_id = c.stream_id AND v.version = c.version
WHERE {where}
ORDER BY c.checkpoint_id DESC
LIMIT ?
"""


# -- error translation (the one boundary) ---------------------------------------------------------


def translate(exc: apsw.Error, where: str) -> errors.EventCkptError:
    """The eventckpt error for a driver error."""
    msg = f"{where}: {exc}"
    if isinstance(exc, (apsw.BusyError, apsw.LockedError)):
        return errors.StoreBusyError(
            f"{where}: another connection kept the store busy past the busy timeout", code="busy"
        )
    if isinstance(exc, apsw.ReadOnlyError):
        return errors.ReadOnlyStoreError(f"{where}: the store is read-only ({exc})", code="readonly")
    if isinstance(exc, apsw.FullError):
        return errors.StorageFullError(f"{where}: the disk is full ({exc})", code="full")
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return errors.CorruptStoreError(f"{where}: the file is damaged ({exc})", code="corrupt")
    if isinstance(exc, apsw.CantOpenError):
        return errors.StorageError(f"{where}: cannot open the file ({exc})", code="cantopen")
    if isinstance(exc, apsw.IOError):
        return errors.StorageError(f"{where}: I/O error ({exc})", code="ioerr")
    return errors.StorageError(msg, code=type(exc).__name__)


# -- opening --------------------------------------------------------------------------------------


def connect(
    path: str, *, durability: str = "normal", timeout: float = 30.0, readonly: bool = False, vfs: str | None = None
) -> Journal:
    """Open (creating when allowed) an eventckpt file. A foreign or newer file is refused untouched.

    `vfs` names a registered SQLite VFS (an apsw.VFS subclass, e.g. a fault-injecting one in tests);
    None is SQLite's default.
    """
    memory = path == ":memory:"
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
    if vfs is not None and vfs not in apsw.vfs_names():
        raise errors.InvalidArgumentError("vfs", vfs, f"is not a registered SQLite VFS {apsw.vfs_names()}")
    try:
        conn = apsw.Connection(path, flags=flags, vfs=vfs)
    except apsw.Error as exc:
        raise translate(exc, f"opening {path}") from None
    try:
        conn.set_busy_timeout(int(timeout * 1000))
        app_id, user_version, fresh = _identity(conn, path)
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
        if not readonly and user_version < SCHEMA_VERSION:
            journal.migrate()
        return journal
    except apsw.Error as exc:
        conn.close()
        raise translate(exc, f"opening {path}") from None
    except BaseException:
        conn.close()
        raise


def _identity(conn: apsw.Connection, path: str) -> tuple[int, int, bool]:
    """(application_id, user_version, fresh) of the file; refuses foreign and newer files."""
    try:
        # One statement, one read snapshot: read apart, another process's migration could commit between
        # the reads, and a half-seen store (no application_id yet, tables already) would look foreign.
        app_id, user_version, objects, pages = conn.execute(
            "SELECT (SELECT application_id FROM pragma_application_id), (SELECT user_version FROM"
            " pragma_user_version), (SELECT count(*) FROM sqlite_schema), (SELECT page_count FROM pragma_page_count)"
        ).fetchall()[0]
    except apsw.NotADBError:
        raise errors.ForeignFileError(path, "not a SQLite database (or an encrypted one)") from None
    except apsw.CorruptError as exc:
        raise errors.CorruptStoreError(f"{path}: the file is damaged ({exc})", code="corrupt") from None
    if app_id != APPLICATION_ID and (app_id != 0 or objects):
        raise errors.ForeignFileError(path, "a SQLite database that is not an eventckpt store")
    if user_version > SCHEMA_VERSION:
        raise errors.NewerSchemaError(path, user_version, SCHEMA_VERSION)
    fresh = objects == 0 and app_id == 0
    if fresh and path != ":memory:" and os.path.isfile(path) and os.path.getsize(path) > 0:
        # SQLite reads a 1-byte file as an empty database: it is someone's data, not a fresh store
        if pages == 0:
            raise errors.ForeignFileError(path, "not a SQLite database (or an encrypted one)")
    return app_id, user_version, fresh


class Journal:
    """SQL access to one eventckpt file. Not thread-safe by itself: the Store serializes callers."""

    def __init__(self, conn: apsw.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self._depth = 0
        self._committed_at: int | None = None  # the file's data version right after our last commit

    # -- plumbing ---------------------------------------------------------------------------------

    def _fail(self, exc: apsw.Error, sql: str) -> NoReturn:
        raise translate(exc, self.path) from None

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return self.conn.execute(sql, args).fetchall()
        except apsw.Error as exc:
            self._fail(exc, sql)

    def _one(self, sql: str, args: Sequence[Any] = ()) -> Any:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    def _run(self, sql: str, args: Sequence[Any] = ()) -> None:
        try:
            self.conn.execute(sql, args)
        except apsw.Error as exc:
            self._fail(exc, sql)

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self.conn.executemany(sql, rows)
        except apsw.Error as exc:
            self._fail(exc, sql)

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    def begin(self) -> None:
        """Start a write transaction: BEGIN IMMEDIATE takes the write lock (waiting up to the busy timeout),
        so nothing read inside it can change before COMMIT."""
        if self._depth:
            raise RuntimeError("write transactions do not nest")
        self._run("BEGIN IMMEDIATE")
        self._depth = 1

    def commit(self) -> None:
        try:
            self.conn.execute("COMMIT")
        except apsw.Error as exc:
            self.rollback()
            self._fail(exc, "COMMIT")
        self._depth = 0
        self._committed_at = self.conn.data_version()

    def others_committed(self) -> bool:
        """Inside a transaction: whether another connection may have committed since our last commit
        (a file-control call, no SQL; True when unsure)."""
        return self._committed_at is None or self.conn.data_version() != self._committed_at

    def rollback(self) -> None:
        self._depth = 0
        self._rollback()

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction: committed on a clean exit, rolled back on an exception."""
        self.begin()
        try:
            yield
        except BaseException:
            self.rollback()
            raise
        self.commit()

    @contextmanager
    def read(self) -> Iterator[None]:
        """A consistent read snapshot across several queries (joins an open transaction)."""
        if self._depth:
            yield
            return
        self._run("BEGIN")
        self._depth = 1
        try:
            yield
        finally:
            self._depth = 0
            self._rollback()  # a read transaction has nothing to commit

    def _rollback(self) -> None:
        if not self.conn.get_autocommit():
            try:
                self.conn.execute("ROLLBACK")
            except apsw.Error:
                pass  # SQLite already rolled back (e.g. after SQLITE_FULL)

    def migrate(self) -> None:
        """Apply the schema files above the file's user_version, all in one transaction."""
        with self.write():
            current = self._one("PRAGMA user_version")[0]  # re-read: another process may have migrated
            if current >= SCHEMA_VERSION:
                return
            for number, name, sql in schema_files():
                if number > current:
                    try:
                        self.conn.execute(sql)
                    except apsw.Error as exc:
                        raise errors.SchemaError(self.path, f"applying {name} failed: {exc}") from None
            self._run(f"PRAGMA application_id = {APPLICATION_ID:d}")
            self._run(f"PRAGMA user_version = {SCHEMA_VERSION:d}")

    def close(self) -> None:
        try:
            self.conn.close()
        except apsw.Error as exc:
            raise translate(exc, self.path) from None

    def schema_version(self) -> int:
        return self._one("PRAGMA user_version")[0]

    # -- streams ----------------------------------------------------------------------------------

    def stream(self, name: str) -> StreamRow | None:
        row = self._one(f"SELECT {_STREAM_COLS} FROM streams WHERE name = ?", (name,))
        return StreamRow(*row) if row else None

    def stream_and_head(self, name: str) -> tuple[StreamRow, int] | None:
        """The stream and its head version (its fork version while it has none of its own)."""
        row = self._one(
            f"SELECT {_STREAM_COLS}, coalesce((SELECT max(version) FROM versions WHERE stream_id = streams.id),"
            " fork_version, 0) FROM streams WHERE name = ?",
            (name,),
        )
        return (StreamRow(*row[:6]), row[6]) if row else None

    def stream_names(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM streams ORDER BY id")]

    def children(self, stream_id: int) -> list[StreamRow]:
        return [StreamRow(*r) for r in self._rows(f"SELECT {_STREAM_COLS} FROM streams WHERE parent_id = ?", (stream_id,))]

    def lineage(self, stream_id: int) -> list[StreamRow]:
        """The stream and its ancestors, root first."""
        rows = self._rows(
            f"""WITH RECURSIVE chain({_STREAM_COLS}, depth) AS (
                  SELECT {_STREAM_COLS}, 0 FROM streams WHERE id = ?
                  UNION ALL
                  SELECT s.id, s.name, s.parent_id, s.fork_version, s.root_id, s.created_at, c.depth + 1
                  FROM streams AS s JOIN chain AS c ON s.id = c.parent_id)
                SELECT {_STREAM_COLS} FROM chain ORDER BY depth DESC""",
            (stream_id,),
        )
        return [StreamRow(*r) for r in rows]

    def create_stream(self, name: str, created_at: str, parent: StreamRow | None = None, fork_version: int | None = None) -> StreamRow:
        try:
            row = self.conn.execute(
                _INSERT_STREAM,
                (name, parent.id if parent else None, fork_version, parent.tree_id if parent else None, created_at),
            ).fetchall()[0]
        except apsw.ConstraintError:
            raise errors.StreamExistsError(name) from None
        except apsw.Error as exc:
            self._fail(exc, "INSERT INTO streams")
        return StreamRow(*row)

    def delete_stream(self, stream_id: int) -> None:
        for table in ("checkpoint_ids", "snapshots", "events", "versions"):
            self._run(f"DELETE FROM {table} WHERE stream_id = ?", (stream_id,))
        self._run("DELETE FROM streams WHERE id = ?", (stream_id,))

    def reclaim(self, pages: int | None = None) -> None:
        """Give free pages back to the file system (incremental vacuum)."""
        self._rows("PRAGMA incremental_vacuum" + (f"({int(pages)})" if pages else ""))

    # -- versions ---------------------------------------------------------------------------------

    def version_row(self, stream_id: int, version: int) -> VersionRow | None:
        row = self._one(f"SELECT {_VERSION_COLS} FROM versions WHERE stream_id = ? AND version = ?", (stream_id, version))
        return VersionRow(*row) if row else None

    def version_rows(self, segments: Sequence[Segment]) -> list[VersionRow]:
        out: list[VersionRow] = []
        for seg in segments:
            rows = self._rows(
                f"SELECT {_VERSION_COLS} FROM versions WHERE stream_id = ? AND version BETWEEN ? AND ? ORDER BY version",
                (seg.stream_id, seg.lo, seg.hi),
            )
            out.extend(VersionRow(*r) for r in rows)
        return out

    def version_numbers(self, segments: Sequence[Segment]) -> list[int]:
        out: list[int] = []
        for seg in segments:
            out.extend(
                r[0]
                for r in self._rows(
                    "SELECT version FROM versions WHERE stream_id = ? AND version BETWEEN ? AND ? ORDER BY version",
                    (seg.stream_id, seg.lo, seg.hi),
                )
            )
        return out

    def count_versions(self, segments: Sequence[Segment]) -> int:
        return sum(
            self._one(
                "SELECT count(*) FROM versions WHERE stream_id = ? AND version BETWEEN ? AND ?",
                (seg.stream_id, seg.lo, seg.hi),
            )[0]
            for seg in segments
        )

    def insert_version(self, row: VersionRow) -> None:
        try:
            self.conn.execute(
                _INSERT_VERSION,
                (
                    row.stream_id, row.version, row.created_at, row.name, row.auto,
                    row.metadata, row.usage, row.event_count, row.event_bytes, row.checksum,
                ),
            )
        except apsw.ConstraintError:
            raise _VersionTaken() from None
        except apsw.Error as exc:
            self._fail(exc, "INSERT INTO versions")

    def insert_events(self, stream_id: int, version: int, rows: Sequence[tuple[str, str, bytes | None]]) -> None:
        """Insert a version's events; values are JSON as UTF-8 bytes (stored as TEXT, never as BLOB)."""
        self._many(
            "INSERT INTO events (stream_id, version, seq, op, path, value) VALUES (?, ?, ?, ?, ?, ?)",
            [(stream_id, version, seq, op, path, value.decode() if value is not None else None)
             for seq, (op, path, value) in enumerate(rows)],
        )

    # -- snapshots --------------------------------------------------------------------------------

    def insert_snapshot(self, stream_id: int, version: int, state: str, manifest: str) -> None:
        self._run(
            "INSERT OR REPLACE INTO snapshots (stream_id, version, state, manifest) VALUES (?, ?, ?, ?)",
            (stream_id, version, state, manifest),
        )

    def latest_snapshot(self, segments: Sequence[Segment]) -> tuple[int, str, str] | None:
        """(version, state, manifest) of the newest snapshot within the segments."""
        for seg in reversed(segments):
            row = self._one(
                "SELECT version, state, manifest FROM snapshots WHERE stream_id = ? AND version BETWEEN ? AND ?"
                " ORDER BY version DESC LIMIT 1",
                (seg.stream_id, seg.lo, seg.hi),
            )
            if row:
                return row
        return None

    def snapshot_value(self, stream_id: int, version: int, path: str) -> str | None:
        """The JSON text of one key written in full by a snapshot."""
        row = self._one("SELECT state -> ? FROM snapshots WHERE stream_id = ? AND version = ?", (path, stream_id, version))
        return row[0] if row else None

    # -- events -----------------------------------------------------------------------------------

    def tail(self, segments: Sequence[Segment], after: int) -> list[EventRow]:
        """Every event of the lineage with version > after, in order."""
        out: list[EventRow] = []
        for seg in segments:
            if seg.hi <= after:
                continue
            out.extend(
                self._rows(
                    "SELECT version, seq, op, path, value FROM events"
                    " WHERE stream_id = ? AND version > ? AND version <= ? ORDER BY version, seq",
                    (seg.stream_id, max(after, seg.lo - 1), seg.hi),
                )
            )
        return out

    def key_values(self, segments: Sequence[Segment], path: str, start: tuple[int, int], upto: int) -> list[tuple[str, str]]:
        """(op, value) of the events at exactly `path` from event `start` (version, seq) through version
        `upto`, in order: the bulk part of rebuilding a shared key."""
        out: list[tuple[str, str]] = []
        for seg in segments:
            lo, hi = max(start[0], seg.lo), min(upto, seg.hi)
            if lo <= hi:
                out.extend(
                    self._rows(
                        "SELECT op, value FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ?"
                        " AND version BETWEEN ? AND ? AND (version > ? OR seq >= ?) ORDER BY version, seq",
                        (seg.stream_id, path, lo, hi, start[0], start[1]),
                    )
                )
        return out

    def key_events(self, segments: Sequence[Segment], path: str, children: Iterable[tuple[str, str]], after: int) -> list[EventRow]:
        """Every event at `path` or below it with version > after, in order (uses events_by_path)."""
        out: list[EventRow] = []
        for seg in segments:
            if seg.hi <= after:
                continue
            lo = max(after + 1, seg.lo)
            rows = self._rows(
                "SELECT version, seq, op, path, value FROM events INDEXED BY events_by_path"
                " WHERE stream_id = ? AND path = ? AND version BETWEEN ? AND ? ORDER BY version, seq",
                (seg.stream_id, path, lo, seg.hi),
            )
            below: list[EventRow] = []
            for start, stop in children:
                below.extend(
                    self._rows(
                        "SELECT version, seq, op, path, value FROM events INDEXED BY events_by_path"
                        " WHERE stream_id = ? AND path >= ? AND path < ? AND version BETWEEN ? AND ?",
                        (seg.stream_id, start, stop, lo, seg.hi),
                    )
                )
            if below:
                rows.extend(below)
                rows.sort(key=lambda r: (r[0], r[1]))
            out.extend(rows)
        return out

    # -- checkpoint ids ---------------------------------------------------------------------------

    def insert_checkpoint_id(self, tree_id: int, checkpoint_id: str, stream_id: int, version: int) -> None:
        try:
            self.conn.execute(
                "INSERT INTO checkpoint_ids (tree_id, checkpoint_id, stream_id, version) VALUES (?, ?, ?, ?)",
                (tree_id, checkpoint_id, stream_id, version),
            )
        except apsw.ConstraintError:
            raise _CheckpointIdTaken() from None
        except apsw.Error as exc:
            self._fail(exc, "INSERT INTO checkpoint_ids")

    def find_checkpoint_id(self, tree_id: int, checkpoint_id: str) -> tuple[int, int] | None:
        return self._one(
            "SELECT stream_id, version FROM checkpoint_ids WHERE tree_id = ? AND checkpoint_id = ?",
            (tree_id, checkpoint_id),
        )

    def checkpoint_id_of(self, stream_id: int, version: int) -> str | None:
        row = self._one("SELECT checkpoint_id FROM checkpoint_ids WHERE stream_id = ? AND version = ?", (stream_id, version))
        return row[0] if row else None

    # -- tool calls (schema 003) ------------------------------------------------------------------

    _TOOL_COLS = "call_id, name, arguments, result, error, undoes"

    def insert_tool_calls(self, stream_id: int, version: int, rows: Sequence[Sequence[Any]]) -> None:
        """Insert a version's tool calls: (call_id, name, arguments, result, error, undoes) in order."""
        self._many(
            f"INSERT INTO tool_calls (stream_id, version, seq, {self._TOOL_COLS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(stream_id, version, seq, *row) for seq, row in enumerate(rows)],
        )

    def tool_calls(self, segments: Sequence[Segment], after: int = 0) -> list[tuple[Any, ...]]:
        """(version, call_id, name, arguments, result, error, undoes) of the lineage's calls in versions
        > after, oldest first."""
        out: list[tuple[Any, ...]] = []
        for seg in segments:
            if seg.hi > after:
                out.extend(self._rows(
                    f"SELECT version, {self._TOOL_COLS} FROM tool_calls WHERE stream_id = ? AND version > ?"
                    " AND version <= ? ORDER BY version, seq",
                    (seg.stream_id, max(after, seg.lo - 1), seg.hi),
                ))
        return out

    def undone_call_ids(self, tree_id: int, call_ids: Sequence[str]) -> set[str]:
        """The ids among `call_ids` that a successful undo record anywhere in the stream tree names."""
        rows = self._rows(
            "SELECT DISTINCT t.undoes FROM tool_calls AS t JOIN streams AS s ON s.id = t.stream_id"
            " WHERE t.undoes IN (SELECT value FROM json_each(?)) AND t.error IS NULL"
            " AND coalesce(s.root_id, s.id) = ?",
            (json_list(call_ids), tree_id),
        )
        return {r[0] for r in rows}

    # -- retention (rewriting committed history) --------------------------------------------------

    def generation(self) -> int:
        """The history generation: bumped by every retention rewrite (see schema 003)."""
        return self._one("SELECT generation FROM history_generation WHERE id = 1")[0]

    def bump_generation(self) -> int:
        return self._one("UPDATE history_generation SET generation = generation + 1 WHERE id = 1 RETURNING generation")[0]

    def snapshots_in(self, stream_id: int, lo: int, hi: int) -> list[tuple[int, str, str]]:
        """(version, state, manifest) of one stream's snapshots with lo <= version <= hi, in order."""
        return self._rows(
            "SELECT version, state, manifest FROM snapshots WHERE stream_id = ? AND version BETWEEN ? AND ? ORDER BY version",
            (stream_id, lo, hi),
        )

    def events_of(self, stream_id: int, version: int) -> list[tuple[str, str, str | None]]:
        """(op, path, value) of one version's events, in order."""
        return self._rows("SELECT op, path, value FROM events WHERE stream_id = ? AND version = ? ORDER BY seq",
                          (stream_id, version))

    def tool_rows_of(self, stream_id: int, version: int) -> list[tuple[Any, ...]]:
        return self._rows(f"SELECT {self._TOOL_COLS} FROM tool_calls WHERE stream_id = ? AND version = ? ORDER BY seq",
                          (stream_id, version))

    def remove_versions(self, stream_id: int, versions: Sequence[int]) -> None:
        """Delete versions with everything that belongs to them (their tool calls cascade)."""
        doomed = json_list(list(versions))
        for table in ("checkpoint_ids", "snapshots", "events", "versions"):
            self._run(f"DELETE FROM {table} WHERE stream_id = ? AND version IN (SELECT value FROM json_each(?))",
                      (stream_id, doomed))

    def rewrite_version(self, stream_id: int, version: int, events: Sequence[tuple[str, str, str | None]],
                        tools: Sequence[Sequence[Any]], event_bytes: int) -> None:
        """Replace one version's events and tool calls (in order) and its event counters."""
        self._run("DELETE FROM events WHERE stream_id = ? AND version = ?", (stream_id, version))
        self._run("DELETE FROM tool_calls WHERE stream_id = ? AND version = ?", (stream_id, version))
        self._many("INSERT INTO events (stream_id, version, seq, op, path, value) VALUES (?, ?, ?, ?, ?, ?)",
                   [(stream_id, version, seq, *event) for seq, event in enumerate(events)])
        self.insert_tool_calls(stream_id, version, tools)
        self._run("UPDATE versions SET event_count = ?, event_bytes = ? WHERE stream_id = ? AND version = ?",
                  (len(events), event_bytes, stream_id, version))

    def set_checksum(self, stream_id: int, version: int, checksum: bytes) -> None:
        self._run("UPDATE versions SET checksum = ? WHERE stream_id = ? AND version = ?", (checksum, stream_id, version))


    # -- LangGraph saver (eventckpt.langgraph; tables in schema/004_langgraph.sql) ------------------

    def langgraph_tree(self, thread_id: str, checkpoint_ns: str) -> tuple[StreamRow, int] | None:
        """The root stream of a thread's namespace and the root's head version."""
        row = self._one(
            f"SELECT {_S_COLS}, coalesce((SELECT max(version) FROM versions WHERE stream_id = s.id), 0)"
            " FROM langgraph_threads AS t JOIN streams AS s ON s.id = t.tree_id"
            " WHERE t.thread_id = ? AND t.checkpoint_ns = ?",
            (thread_id, checkpoint_ns),
        )
        return (StreamRow(*row[:6]), row[6]) if row else None

    def langgraph_trees(self, thread_id: str) -> list[tuple[str, StreamRow]]:
        """(namespace, root stream) of every namespace of a thread."""
        rows = self._rows(
            f"SELECT t.checkpoint_ns, {_S_COLS} FROM langgraph_threads AS t JOIN streams AS s ON s.id = t.tree_id"
            " WHERE t.thread_id = ? ORDER BY t.checkpoint_ns",
            (thread_id,),
        )
        return [(r[0], StreamRow(*r[1:])) for r in rows]

    def langgraph_set_tree(self, thread_id: str, checkpoint_ns: str, tree_id: int, replaces: int | None = None) -> bool:
        """Point a thread's namespace at a stream tree: a new row when `replaces` is None, else only if it
        still points at `replaces`. False when that did not hold (someone else changed it)."""
        if replaces is None:
            try:
                self.conn.execute(
                    "INSERT INTO langgraph_threads (thread_id, checkpoint_ns, tree_id) VALUES (?, ?, ?)",
                    (thread_id, checkpoint_ns, tree_id),
                )
            except apsw.ConstraintError:
                return False
            except apsw.Error as exc:
                self._fail(exc, "INSERT INTO langgraph_threads")
            return True
        self._run(
            "UPDATE langgraph_threads SET tree_id = ? WHERE thread_id = ? AND checkpoint_ns = ? AND tree_id = ?",
            (tree_id, thread_id, checkpoint_ns, replaces),
        )
        return self.conn.changes() == 1

    def langgraph_forget(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str] | None = None) -> None:
        """Delete a namespace's writes for `checkpoint_ids`, or (None) its writes and its tree row."""
        if checkpoint_ids is None:
            args: tuple[Any, ...] = (thread_id, checkpoint_ns)
            self._run("DELETE FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ?", args)
            self._run("DELETE FROM langgraph_threads WHERE thread_id = ? AND checkpoint_ns = ?", args)
            return
        self._run(
            "DELETE FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ?"
            " AND checkpoint_id IN (SELECT value FROM json_each(?))",
            (thread_id, checkpoint_ns, orjson.dumps(list(checkpoint_ids)).decode()),
        )

    def langgraph_locate(self, tree_id: int, checkpoint_id: str) -> tuple[StreamRow, int, int] | None:
        """(stream holding it, its version, that stream's head version) of a checkpoint id in a tree."""
        row = self._one(
            f"SELECT {_S_COLS}, c.version, (SELECT max(version) FROM versions WHERE stream_id = s.id)"
            " FROM checkpoint_ids AS c JOIN streams AS s ON s.id = c.stream_id"
            " WHERE c.tree_id = ? AND c.checkpoint_id = ?",
            (tree_id, checkpoint_id),
        )
        return (StreamRow(*row[:6]), row[6], row[7]) if row else None

    def langgraph_checkpoints(
        self,
        *,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        before: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        limit: int | None = None,
    ) -> list[LangGraphRow]:
        """Checkpoints newest first (by checkpoint id), each with its metadata, its parent's checkpoint id
        and its writes, in one query. `metadata` holds (JSON path, JSON value) pairs that must all match."""
        where, args = [], []
        for column, value, test in (
            ("t.thread_id", thread_id, "="), ("t.checkpoint_ns", checkpoint_ns, "="),
            ("c.checkpoint_id", checkpoint_id, "="), ("c.checkpoint_id", before, "<"),
        ):
            if value is not None:
                where.append(f"{column} {test} ?")
                args.append(value)
        for path, value in metadata:
            where.append("json_extract(v.metadata, ?) IS json_extract(?, '$')")
            args += [path, value]
        args.append(-1 if limit is None else limit)
        rows = self._rows(
            _LG_CHECKPOINTS.format(where=" AND ".join(where) or "1"),
            args,
        )
        return [LangGraphRow(*r) for r in rows]

    def langgraph_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str) -> str | None:
        """The JSON array of one task's writes on a checkpoint."""
        row = self._one(
            "SELECT writes FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
            " AND task_id = ?",
            (thread_id, checkpoint_ns, checkpoint_id, task_id),
        )
        return row[0] if row else None

    def langgraph_set_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                             task_path: str, writes: str, *, replace: bool) -> bool:
        """Store one task's writes; without `replace`, only if the task has none yet (False then)."""
        self._run(
            ("INSERT OR REPLACE" if replace else "INSERT OR IGNORE") + " INTO langgraph_writes (thread_id,"
            " checkpoint_ns, checkpoint_id, task_id, task_path, writes) VALUES (?, ?, ?, ?, ?, ?)",
            (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes),
        )
        return self.conn.changes() == 1

    def langgraph_copy_writes(self, source: str, target: str, checkpoint_ns: str) -> None:
        self._run(
            "INSERT INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes)"
            " SELECT ?, checkpoint_ns, checkpoint_id, task_id, task_path, writes FROM langgraph_writes"
            " WHERE thread_id = ? AND checkpoint_ns = ?",
            (target, source, checkpoint_ns),
        )

    def langgraph_runs(self, run_ids: Sequence[str]) -> list[tuple[str, str, str]]:
        """(thread, namespace, checkpoint id) of every checkpoint whose metadata names one of the runs."""
        return self._rows(
            "SELECT t.thread_id, t.checkpoint_ns, c.checkpoint_id FROM versions AS v"
            " JOIN checkpoint_ids AS c ON c.stream_id = v.stream_id AND c.version = v.version"
            " JOIN streams AS s ON s.id = v.stream_id"
            " JOIN langgraph_threads AS t ON t.tree_id = coalesce(s.root_id, s.id)"
            " WHERE json_extract(v.metadata, '$.metadata.run_id') IS NOT NULL"
            " AND json_extract(v.metadata, '$.metadata.run_id') IN (SELECT value FROM json_each(?))",
            (orjson.dumps(list(run_ids)).decode(),),
        )

    def tree_streams(self, root_id: int) -> list[StreamRow]:
        """The root and every stream forked from it (directly or not), oldest first (parents first)."""
        rows = self._rows(
            "WITH RECURSIVE sub(id) AS"
            " (SELECT ? UNION ALL SELECT s.id FROM streams AS s JOIN sub ON s.parent_id = sub.id)"
            f" SELECT {_STREAM_COLS} FROM streams WHERE id IN sub ORDER BY id",
            (root_id,),
        )
        return [StreamRow(*r) for r in rows]

    def tree_fingerprint(self, tree_id: int) -> tuple[int, str | None]:
        """(number of checkpoint ids, the greatest) of a tree: changes whenever a checkpoint is added."""
        return tuple(self._one("SELECT count(*), max(checkpoint_id) FROM checkpoint_ids WHERE tree_id = ?", (tree_id,)))

    def copy_stream_rows(self, source: int, target: int, target_tree: int) -> None:
        """Copy a stream's versions, events, snapshots and checkpoint ids into an empty stream of the same
        shape (same parent versions). Checksums stay valid: they chain over content, not stream ids."""
        for sql in (
            f"INSERT INTO versions ({_VERSION_COLS}) SELECT ?, version, created_at, name, auto, metadata, usage,"
            " event_count, event_bytes, checksum FROM versions WHERE stream_id = ?",
            "INSERT INTO events (stream_id, version, seq, op, path, value)"
            " SELECT ?, version, seq, op, path, value FROM events WHERE stream_id = ?",
            "INSERT INTO snapshots (stream_id, version, state, manifest)"
            " SELECT ?, version, state, manifest FROM snapshots WHERE stream_id = ?",
        ):
            self._run(sql, (target, source))
        self._run(
            "INSERT INTO checkpoint_ids (tree_id, checkpoint_id, stream_id, version)"
            " SELECT ?, checkpoint_id, ?, version FROM checkpoint_ids WHERE stream_id = ?",
            (target_tree, target, source),
        )

    # -- queries: log, search, history, diff, verify, stats (schema/002_queries.sql) ---------------
    # Caller strings (names, paths, metadata keys and values) only ever travel as bound parameters: the
    # SQL below is assembled from fixed fragments. INDEXED BY where SQLite, without statistics, would
    # rather scan a stream's events by version than use the path indexes.

    def log_rows(self, segments: Sequence[Segment], *, before: int | None, limit: int | None, name: str | None,
                 auto: bool | None, meta: Sequence[MetaFilter]) -> list[LogRow]:
        """The versions of a lineage that pass the filters, newest first (at most `limit`)."""
        source, where, args, alias = _version_source(name, auto, meta)
        ids = any(self._one("SELECT 1 FROM checkpoint_ids WHERE stream_id = ? AND version BETWEEN ? AND ? LIMIT 1",
                            (seg.stream_id, seg.lo, seg.hi)) for seg in segments)
        columns = _LOG_COLS if ids else _LOG_ROW + ", NULL"  # most lineages have no checkpoint ids
        sql = (f"SELECT {columns} FROM {source} WHERE {' AND '.join(where + [f'{alias}.stream_id = ?', f'{alias}.version BETWEEN ? AND ?'])}"
               f" ORDER BY {alias}.version DESC LIMIT ?")
        out: list[LogRow] = []
        for seg in reversed(segments):
            hi = seg.hi if before is None else min(seg.hi, before - 1)
            wanted = -1 if limit is None else limit - len(out)
            if hi >= seg.lo and wanted:
                out.extend(map(LogRow._make, self._rows(sql, [*args, seg.stream_id, seg.lo, hi, wanted])))
        return out

    def search_rows(self, *, name: str | None, meta: Sequence[MetaFilter], limit: int | None) -> list[LogRow]:
        """Stored versions of every stream that pass the filters, newest first."""
        source, where, args, _ = _version_source(name, None, meta)
        sql = f"SELECT {_LOG_COLS} FROM {source}" + (f" WHERE {' AND '.join(where)}" if where else "")
        return list(map(LogRow._make, self._rows(sql + " ORDER BY v.created_at DESC, v.stream_id, v.version DESC LIMIT ?",
                                                 [*args, -1 if limit is None else limit])))

    def history_rows(self, segments: Sequence[Segment], path: str, ancestors: Sequence[tuple[str, str, bool]],
                     since: int, until: int, limit: int | None) -> list[HistoryRow]:
        """Events at `path`, below it, and those at its ancestors that replace or remove it, newest first.

        `ancestors` are (path, path relative to it, True when the ancestor is a list): a list ancestor is
        read through events_reshaping, so its appends are never scanned.
        """
        below = child_ranges(path)
        out: list[HistoryRow] = []
        for seg in reversed(segments):
            lo, hi = max(seg.lo, since), min(seg.hi, until)
            wanted = -1 if limit is None else limit - len(out)
            if lo > hi or not wanted:
                continue
            span = (lo, hi, wanted)
            rows = self._rows(_HISTORY.format(value="e.value", index="events_by_path", where="e.path = ?"),
                              (seg.stream_id, path, *span))
            more = []
            for start, stop in below:
                more += self._rows(_HISTORY.format(value="e.value", index="events_by_path", where="e.path >= ? AND e.path < ?"),
                                   (seg.stream_id, start, stop, *span))
            for text, rel, is_list in ancestors:
                index, ops = ("events_reshaping", f"{RESHAPING} AND e.op <> 'extend'") if is_list else ("events_by_path", "e.op IN ('set', 'delete')")
                more += self._rows(_HISTORY.format(value="CASE e.op WHEN 'set' THEN e.value -> ? ELSE e.value END", index=index,
                                                   where=f"e.path = ? AND {ops}"), (rel, seg.stream_id, text, *span))
            if more:
                rows += more
                rows.sort(key=lambda r: (r[1], r[2]), reverse=True)
            out.extend(map(HistoryRow._make, rows if limit is None else rows[:wanted]))
        return out

    # diff: what a range of events touched, and the value or list length of a path at a version

    def touched(self, seg: Segment, after: int, upto: int) -> dict[str, tuple[int, int]]:
        """Every path with an event in versions (after, upto] of one segment -> (version, seq) of its last.

        A range of few events is grouped directly; a long one is answered by a loose scan of the path
        index (one seek per distinct path), unless the stream has more distinct paths than that is worth.
        """
        lo, hi = max(seg.lo, after + 1), min(seg.hi, upto)
        if lo > hi:
            return {}
        rows = None
        if hi - lo >= _DIRECT_GROUP_LIMIT:  # versions: a lower bound of the events in the range
            cap = (hi - lo) // 4
            rows = self._rows(_LOOSE_TOUCHED, (seg.stream_id, lo, hi, cap + 1))
            if len(rows) > cap:
                rows = None
        if rows is None:
            rows = self._rows("SELECT path, max((version << 32) | seq) FROM events WHERE stream_id = ? AND version BETWEEN ? AND ?"
                              " GROUP BY path", (seg.stream_id, lo, hi))
        return {path: (last >> 32, last & 0xFFFFFFFF) for path, last in rows if last is not None}

    def event_at(self, stream_id: int, version: int, seq: int) -> tuple[str, str, str | None]:
        """(op, path, value) of one event."""
        return self._one("SELECT op, path, value FROM events WHERE stream_id = ? AND version = ? AND seq = ?",
                         (stream_id, version, seq))

    def newest_event(self, segments: Sequence[Segment], path: str, upto: int, *, reset: bool = False) -> EventRow | None:
        """The last event at exactly `path` with version <= upto (with `reset`: the last set of a list,
        delete or truncate there, read from events_reshaping)."""
        sql = _NEWEST_RESET if reset else _NEWEST
        for seg in reversed(segments):
            hi = min(seg.hi, upto)
            if hi >= seg.lo:
                row = self._one(sql, (seg.stream_id, path, seg.lo, hi))
                if row:
                    return row
        return None

    def growth(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> int:
        """How many items appends and extends at exactly `path` added after event `after` through `upto`.

        Appends are counted in the path index without reading them; extends (rare) are read from
        events_reshaping. The caller knows that nothing reset the list in that range.
        """
        total = 0
        for seg, lo, hi in _clip(segments, after[0] - 1, upto):
            args = (seg.stream_id, path, after[0], after[1], lo, hi)
            count = self._one("SELECT count(*) FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ?"
                              " AND (version, seq) > (?, ?) AND version BETWEEN ? AND ?", args)[0]
            extends, items = self._one(
                f"SELECT count(*), coalesce(sum(json_array_length(e.value)), 0) FROM events AS e INDEXED BY events_reshaping"
                f" WHERE e.stream_id = ? AND e.path = ? AND (e.version, e.seq) > (?, ?) AND e.version BETWEEN ? AND ?"
                f" AND {RESHAPING} AND e.op = 'extend'", args)
            total += count - extends + items
        return total

    def item_deletes(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> list[str]:
        """Paths of deletes below the list at `path` after event `after` through `upto` (the caller keeps
        those of its items)."""
        out: list[str] = []
        for seg, lo, hi in _clip(segments, after[0] - 1, upto):
            out.extend(r[0] for r in self._rows(
                f"SELECT e.path FROM events AS e INDEXED BY events_reshaping WHERE e.stream_id = ? AND e.path >= ? AND e.path < ?"
                f" AND (e.version, e.seq) > (?, ?) AND e.version BETWEEN ? AND ? AND {RESHAPING} AND e.op = 'delete'",
                (seg.stream_id, path + "[", path + "\\", after[0], after[1], lo, hi)))
        return out

    def json_at(self, segments: Sequence[Segment], version: int, seq: int, rel: str, *, text: bool = False
                ) -> tuple[str | None, int | None, str | None, bool]:
        """(JSON type, array length, JSON text when `text`) of the part at `rel` ('$': all) of one event's
        value, and whether the value holds tagged forms (a "$dict" hides its keys from JSON paths)."""
        owner = next(s for s in segments if s.lo <= version <= s.hi)
        return self._one("SELECT json_type(value, ?1), json_array_length(value, ?1), CASE WHEN ?2 THEN value -> ?1 END,"
                         " instr(value, '{\"$') > 0 FROM events WHERE stream_id = ?3 AND version = ?4 AND seq = ?5",
                         (rel, text, owner.stream_id, version, seq))

    def touched_below(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> bool:
        """Whether any event below `path` lies after event `after` through version `upto`."""
        for seg, lo, hi in _clip(segments, after[0] - 1, upto):
            for start, stop in child_ranges(path):
                if self._one("SELECT 1 FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path >= ? AND path < ?"
                             " AND (version, seq) > (?, ?) AND version BETWEEN ? AND ? LIMIT 1",
                             (seg.stream_id, start, stop, after[0], after[1], lo, hi)):
                    return True
        return False

    # verify and stats

    def streams_all(self) -> list[StreamRow]:
        return [StreamRow(*r) for r in self._rows(f"SELECT {_STREAM_COLS} FROM streams ORDER BY id")]

    def extent(self, stream_id: int) -> tuple[int, int]:
        """The lowest and highest version of the stream in versions, events or snapshots ((0, 0): none)."""
        bounds = [self._one(f"SELECT min(version), max(version) FROM {t} WHERE stream_id = ?", (stream_id,))
                  for t in ("versions", "events", "snapshots")]
        return min((lo for lo, _ in bounds if lo is not None), default=0), max((hi or 0 for _, hi in bounds), default=0)

    def snapshot_versions(self, stream_id: int) -> list[int]:
        return [r[0] for r in self._rows("SELECT version FROM snapshots WHERE stream_id = ? ORDER BY version", (stream_id,))]

    def snapshot_row(self, stream_id: int, version: int) -> tuple[str, str]:
        """(state, manifest) of one snapshot."""
        return self._one("SELECT state, manifest FROM snapshots WHERE stream_id = ? AND version = ?", (stream_id, version))

    def integrity_problems(self) -> list[str]:
        """What PRAGMA integrity_check and foreign_key_check find, and metadata_index rows that disagree
        with versions.metadata (empty when the file is sound)."""
        out = [r[0] for r in self._rows("PRAGMA integrity_check") if r[0] != "ok"]
        out += [f"foreign key: {table} row {rowid} has no {parent} row" for table, rowid, parent, _ in self._rows("PRAGMA foreign_key_check")]
        for label, sql in _INDEX_CHECKS:
            out += [f"metadata_index {label}: stream {r[2]} version {r[3]} {r[0]!r}={r[1]!r}" for r in self._rows(sql)]
        return out

    def totals(self) -> dict[str, int]:
        """Counts and bytes of the whole file (O(file): for stats, not for hot paths)."""
        streams, forks = self._one("SELECT count(*), count(parent_id) FROM streams")
        versions, event_bytes = self._one("SELECT count(*), coalesce(sum(event_bytes), 0) FROM versions")
        events = self._one("SELECT count(*) FROM events")[0]
        snapshots, snapshot_bytes = self._one("SELECT count(*), coalesce(sum(length(CAST(state AS BLOB)) + length(CAST(manifest AS BLOB))), 0) FROM snapshots")
        page_size, pages, free = (self._one(f"PRAGMA {p}")[0] for p in ("page_size", "page_count", "freelist_count"))
        return {"streams": streams, "forks": forks, "versions": versions, "events": events, "event_bytes": event_bytes,
                "snapshots": snapshots, "snapshot_bytes": snapshot_bytes, "database_bytes": page_size * pages,
                "free_bytes": page_size * free}

    def query(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run the caller's own SQL (the read-only `sql` command: the connection refuses writes) and
        return its column names and rows."""
        try:
            cursor = self.conn.cursor()
            cursor.execute(sql, args)
            try:
                columns = [d[0] for d in cursor.get_description()]
            except apsw.ExecutionCompleteError:
                return [], []
            return columns, [tuple(r) for r in cursor]
        except apsw.SQLError as exc:
            raise errors.InvalidArgumentError("sql", sql, str(exc)) from None
        except apsw.Error as exc:
            self._fail(exc, sql)


class _VersionTaken(Exception):
    """Internal: another writer created this version first (the primary key refused ours)."""


class _CheckpointIdTaken(Exception):
    """Internal: the checkpoint id is already used in the tree."""


# -- query fragments (schema/002_queries.sql) --------------------------------------------------------

# The partial index events_reshaping is used only by queries that repeat its WHERE clause verbatim.
RESHAPING = "(e.op = 'delete' OR e.op = 'truncate' OR e.op = 'extend' OR (e.op = 'set' AND substr(e.value, 1, 1) = '['))"
_DIRECT_GROUP_LIMIT = 500  # versions in a range below which grouping its events beats seeking every path

_LOG_ROW = "v.stream_id, v.version, v.created_at, v.name, v.auto, v.metadata, v.usage"
_LOG_COLS = _LOG_ROW + ", (SELECT c.checkpoint_id FROM checkpoint_ids AS c WHERE c.stream_id = v.stream_id AND c.version = v.version)"

_HISTORY = ("SELECT e.stream_id, e.version, e.seq, e.op, e.path, {value}, v.created_at FROM events AS e INDEXED BY {index}"
            " JOIN versions AS v ON v.stream_id = e.stream_id AND v.version = e.version"
            " WHERE e.stream_id = ? AND {where} AND e.version BETWEEN ? AND ? ORDER BY e.version DESC, e.seq DESC LIMIT ?")

_NEWEST = ("SELECT version, seq, op, path, value FROM events INDEXED BY events_by_path"
           " WHERE stream_id = ? AND path = ? AND version BETWEEN ? AND ? ORDER BY version DESC, seq DESC LIMIT 1")
_NEWEST_RESET = ("SELECT e.version, e.seq, e.op, e.path, e.value FROM events AS e INDEXED BY events_reshaping"
                 f" WHERE e.stream_id = ? AND e.path = ? AND e.version BETWEEN ? AND ? AND {RESHAPING} AND e.op <> 'extend'"
                 " ORDER BY e.version DESC, e.seq DESC LIMIT 1")

# Distinct paths of a stream by a loose index scan (one seek each), with the last event of each in a range.
_LOOSE_TOUCHED = """
WITH RECURSIVE p(path) AS (
    SELECT (SELECT min(path) FROM events INDEXED BY events_by_path WHERE stream_id = ?1)
    UNION ALL
    SELECT (SELECT min(path) FROM events INDEXED BY events_by_path WHERE stream_id = ?1 AND path > p.path)
    FROM p WHERE p.path IS NOT NULL
    LIMIT ?4)
SELECT path, (SELECT (version << 32) | seq FROM events INDEXED BY events_by_path
              WHERE stream_id = ?1 AND path = p.path AND version BETWEEN ?2 AND ?3 ORDER BY version DESC, seq DESC LIMIT 1)
FROM p WHERE path IS NOT NULL"""

_EXPECTED_TAGS = ("SELECT e.key, e.value, v.stream_id, v.version FROM versions AS v, json_each(v.metadata) AS e"
                  " WHERE v.metadata IS NOT NULL AND (e.type = 'text' OR e.type = 'integer')")
_INDEX_CHECKS = (
    ("lacks", f"{_EXPECTED_TAGS} EXCEPT SELECT key, value, stream_id, version FROM metadata_index"),
    ("has a stray row", f"SELECT key, value, stream_id, version FROM metadata_index EXCEPT {_EXPECTED_TAGS}"),
)


def _version_source(name: str | None, auto: bool | None, meta: Sequence[MetaFilter]) -> tuple[str, list[str], list[Any], str]:
    """FROM clause, WHERE terms, their arguments and the alias that drives the scan for a filtered list of
    versions: the name index, else metadata_index for a str/int metadata value, else versions itself."""
    where: list[str] = []
    args: list[Any] = []
    driver = next((m for m in meta if m.indexed is not None), None) if name is None else None
    if name is not None:
        source, alias = "versions AS v INDEXED BY versions_by_name", "v"
        where.append("v.name = ?")
        args.append(name)
    elif driver is not None:
        source, alias = "metadata_index AS m JOIN versions AS v ON v.stream_id = m.stream_id AND v.version = m.version", "m"
        where += ["m.key = ?", "m.value = ?"]
        args += driver.indexed  # type: ignore[arg-type]
    else:
        source, alias = "versions AS v", "v"
    if auto is not None:
        where.append("v.auto = ?")
        args.append(int(auto))
    for m in meta:
        if m is not driver:
            where.append("v.metadata -> ? = json(?)")
            args += [m.path, m.json]
    return source, where, args, alias


def _clip(segments: Sequence[Segment], after: int, upto: int) -> Iterator[tuple[Segment, int, int]]:
    """(segment, lo, hi) for the parts of the segments within versions (after, upto]."""
    for seg in segments:
        lo, hi = max(seg.lo, after + 1), min(seg.hi, upto)
        if lo <= hi:
            yield seg, lo, hi


def segments_for(chain: Sequence[StreamRow], upto: int) -> list[Segment]:
    """The lineage of the last stream in `chain` (root first) as segments, clipped to versions <= upto.

    Walking up from the leaf, each ancestor contributes its own versions only up to the lowest fork
    point below it: a fork of a fork may branch below the middle stream's own versions.
    """
    out = []
    limit = upto
    for row in reversed(chain):
        lo = (row.fork_version or 0) + 1
        if lo <= limit:
            out.append(Segment(row.id, lo, limit))
        if row.fork_version is not None:
            limit = min(limit, row.fork_version)
    out.reverse()
    return out


def json_list(values: Sequence[Any]) -> str:
    """A JSON array of ints/strs, bound as one parameter (for `IN (SELECT value FROM json_each(?))`)."""
    return orjson.dumps(list(values)).decode()
