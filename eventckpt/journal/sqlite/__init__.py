"""The SQLite journal (apsw): one file, the embedded default.

Every connection is set up the same way (WAL, busy timeout, foreign keys, synchronous by durability);
the schema (schema/NNN_*.sql) is applied by a `user_version` ladder in one transaction; driver errors are
translated into eventckpt's errors in engine.py and nowhere else.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from functools import partial

import apsw

from ... import errors
from ..contract import Backend, Journal
from .engine import APPLICATION_ID, DURABILITY, SCHEMA_VERSION, identity, remove_wal_files, schema_files, translate
from .langgraph import LangGraphTables
from .queries import RESHAPING, Queries
from .tables import Tables

__all__ = ["APPLICATION_ID", "DURABILITY", "RESHAPING", "SCHEMA_VERSION", "STATEMENT_CACHE", "SqliteBackend",
           "SqliteJournal", "configure", "connect", "schema_files"]


class SqliteJournal(Tables, LangGraphTables, Queries, Journal):
    """SQL access to one eventckpt file over one apsw connection."""

    kind = "sqlite"


class SqliteBackend(Backend):
    """One connection to one file; threads take turns on it (SQLite has one writer at a time anyway, and
    an apsw connection's transaction belongs to the whole connection)."""

    kind = "sqlite"

    def __init__(self, journal: SqliteJournal, timeout: float = 30.0, vfs: str | None = None) -> None:
        super().__init__()
        self.journal = journal
        self.target = journal.path
        self._lock = threading.RLock()
        self._reopen = partial(connect, journal.path, timeout=timeout, readonly=True, vfs=vfs)

    def own_snapshot(self) -> AbstractContextManager[Journal] | None:
        if self.target == ":memory:":  # a second connection would open another, empty, database
            return None
        return _own_snapshot(self._reopen)

    def acquire(self) -> AbstractContextManager[Journal]:
        return _Turn(self._lock, self.journal, None)

    def session(self, check: Callable[[], None] | None = None) -> AbstractContextManager[Journal]:
        # One connection behind a reentrant lock: a thread already in a session takes the lock again and
        # gets the same journal, which is what Backend.session promises, without a thread-local to keep.
        return _Turn(self._lock, self.journal, check)

    def close(self) -> None:
        with self._lock:
            self.journal.close()


@contextmanager
def _own_snapshot(reopen: Callable[[], SqliteBackend]) -> Iterator[Journal]:
    backend = reopen()  # read-only: it cannot write, and leaves no -wal/-shm of its own behind
    try:
        with backend.journal.read():
            yield backend.journal
    finally:
        backend.close()


class _Turn:
    """The connection, held by one thread at a time (a class: it is entered on every call); `check()` runs
    once it is held."""

    __slots__ = ("_lock", "_journal", "_check")

    def __init__(self, lock: threading.RLock, journal: Journal, check: Callable[[], None] | None) -> None:
        self._lock, self._journal, self._check = lock, journal, check

    def __enter__(self) -> Journal:
        self._lock.acquire()
        if self._check is not None:
            try:
                self._check()
            except BaseException:
                self._lock.release()
                raise
        return self._journal

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


STATEMENT_CACHE = 512  # prepared statements kept per connection (apsw's largest)


def configure(conn: apsw.Connection, durability: str = "normal") -> None:
    """Set up a connection to a store file as every eventckpt connection is (the benchmarks' bare apsw
    reference calls this too, so that it pays for the same checks)."""
    conn.execute(DURABILITY[durability])
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA cache_size = -32768")  # 32 MiB: restores of long streams stay in memory
    conn.execute("PRAGMA temp_store = MEMORY")
    # Plans never depend on the values bound to a statement (the query planner stability guarantee).
    # Without it, a statement whose WHERE the planner matched against a partial index's (events, versions
    # and streams have some) is marked to be prepared again whenever a parameter is bound: apsw's
    # statement cache then saves nothing, and a join read from the store costs 4-60 us more each time.
    # Set before any query: a statement prepared without it keeps its mark even after it is set.
    conn.config(apsw.SQLITE_DBCONFIG_ENABLE_QPSG, 1)


def enter_wal(conn: apsw.Connection, timeout: float) -> None:
    """Put the file in WAL mode, waiting up to `timeout` for other connections. Leaving rollback mode
    needs the file to itself, and SQLite answers SQLITE_BUSY at once, without calling the busy handler,
    while another connection reads it: so several processes or threads opening one new store at the same
    moment would fail. The first to succeed makes the mode stick in the file, so the wait is short."""
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL").fetchall()
            return
        except apsw.BusyError:
            if time.monotonic() + pause > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


def connect(
    path: str, *, durability: str = "normal", timeout: float = 30.0, readonly: bool = False, vfs: str | None = None,
    create: bool = True,
) -> SqliteBackend:
    """Open (creating when allowed) an eventckpt file. A foreign or newer file is refused untouched.

    Without `create` (always when `readonly`), a missing or empty file raises StoreNotFoundError and is
    left as it was: nothing is created or written.

    `vfs` names a registered SQLite VFS (an apsw.VFS subclass, e.g. a fault-injecting one in tests);
    None is SQLite's default.
    """
    memory = path == ":memory:"
    # A read-only connection to a WAL file creates its -wal and -shm when they are missing (SQLite shares
    # the WAL index with writers through them) but cannot remove them: see remove_wal_files.
    tidy = readonly and not memory and not any(os.path.exists(path + suffix) for suffix in ("-wal", "-shm"))
    create = create and not readonly
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    if create:
        flags |= apsw.SQLITE_OPEN_CREATE
    if vfs is not None and vfs not in apsw.vfs_names():
        raise errors.InvalidArgumentError("vfs", vfs, f"is not a registered SQLite VFS {apsw.vfs_names()}")
    try:
        # apsw's statement cache keeps prepared statements by their text; at its default size a diff's
        # twenty statements already pushed each other out, and were prepared again on every call.
        conn = apsw.Connection(path, flags=flags, vfs=vfs, statementcachesize=STATEMENT_CACHE)
    except apsw.CantOpenError as exc:
        if not create and not memory and not os.path.exists(path):
            raise errors.StoreNotFoundError(path, "no such file: there is no store to read") from None
        raise translate(exc, f"opening {path}") from None
    except apsw.Error as exc:
        raise translate(exc, f"opening {path}") from None
    try:
        conn.set_busy_timeout(int(timeout * 1000))
        app_id, user_version, fresh = identity(conn, path)
        if fresh and not create and not memory:
            raise errors.StoreNotFoundError(path, "the file is empty: there is no store to read")
        if readonly and user_version < SCHEMA_VERSION:
            raise errors.OlderSchemaError(path, user_version, SCHEMA_VERSION)
        if not readonly:
            if fresh:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # must precede WAL and the first table
            if not memory:
                enter_wal(conn, timeout)
        configure(conn, durability)
        journal = SqliteJournal(conn, path)
        if tidy:
            journal.on_close = partial(remove_wal_files, path, vfs)
        if not readonly and user_version < SCHEMA_VERSION:
            journal.migrate()
        return SqliteBackend(journal, timeout, vfs)
    except BaseException as exc:  # a refused file is left as it was: closed, and no -wal/-shm of ours left
        conn.close()
        if tidy:
            remove_wal_files(path, vfs)
        if isinstance(exc, apsw.Error):
            raise translate(exc, f"opening {path}") from None
        raise
