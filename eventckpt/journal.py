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
from typing import Any, NoReturn

import apsw
import orjson

from . import errors

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
        app_id = conn.execute("PRAGMA application_id").fetchall()[0][0]
        user_version = conn.execute("PRAGMA user_version").fetchall()[0][0]
        objects = conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()[0][0]
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
        if conn.execute("PRAGMA page_count").fetchall()[0][0] == 0:
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


def json_list(values: Sequence[Any]) -> str:
    """A JSON array of ints/strs, bound as one parameter (for `IN (SELECT value FROM json_each(?))`)."""
    return orjson.dumps(list(values)).decode()


class _VersionTaken(Exception):
    """Internal: another writer created this version first (the primary key refused ours)."""


class _CheckpointIdTaken(Exception):
    """Internal: the checkpoint id is already used in the tree."""


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
