"""The SQLite engine: how every connection is set up and checked, the schema ladder, the one place driver
errors are translated, and the plumbing (statements, transactions) the table mixins share."""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, NoReturn

import apsw

from ... import errors
from ..ladder import ladder_files

APPLICATION_ID = 0x45434B50  # "ECKP": marks the file as an eventckpt store
DURABILITY = {"normal": "PRAGMA synchronous = NORMAL", "full": "PRAGMA synchronous = FULL"}


# -- the schema ladder ----------------------------------------------------------------------------


def schema_files() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every schema file, in ladder order."""
    return ladder_files()


SCHEMA_VERSION = schema_files()[-1][0]

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


def undecodable(exc: UnicodeDecodeError, where: str, sql: str) -> errors.CorruptStoreError:
    """The error for a stored string that is not UTF-8: apsw decodes TEXT as it fetches a row, so a flipped
    bit in a string surfaces as Python's UnicodeDecodeError, not as a driver error. It names the table the
    statement reads, so the damage can be found (verify narrows it to a version)."""
    table = re.search(r"\bFROM\s+([\w.]+)", sql, re.IGNORECASE)
    what = f"a row of {table[1]}" if table else "a row"
    return errors.CorruptStoreError(f"{where}: the file is damaged: a stored string in {what} is not UTF-8 "
                                    f"({exc.reason} at byte {exc.start})", code="corrupt")


def identity(conn: apsw.Connection, path: str) -> tuple[int, int, bool]:
    """(application_id, user_version, fresh) of the file; refuses foreign and newer files."""
    # The size is taken before the read: taken after, another opener's first commit could land in between,
    # and a new store would look like a file SQLite reads as empty although it has bytes (a foreign file).
    size = os.path.getsize(path) if path != ":memory:" and os.path.isfile(path) else 0
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
    if fresh and size > 0 and pages == 0:
        # SQLite reads a 1-byte file as an empty database: it is someone's data, not a fresh store
        raise errors.ForeignFileError(path, "not a SQLite database (or an encrypted one)")
    return app_id, user_version, fresh


def remove_wal_files(path: str, vfs: str | None) -> None:
    """Remove the empty -wal and the -shm a read-only connection left, if no other connection uses them.

    Only a connection that may write deletes them, when it is the last one to close (SQLite decides
    that with its own locks). So a read-write connection reads the schema and closes: with no other
    connection open SQLite removes both files; the WAL is empty (nobody wrote), so nothing reaches the
    database and its bytes stay as they were. With another connection open, or a WAL that holds
    someone's commits, both files stay, as they must.
    """
    try:
        if os.path.getsize(path + "-wal") != 0:
            return False
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READWRITE, vfs=vfs)
        try:
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        finally:
            conn.close()
    except (OSError, apsw.Error):
        pass  # a read-only directory or file, or a busy writer: the files stay, and harm nothing


_SERIALS = itertools.count()  # one per connection of the process (change marks)


class Engine:
    """One connection's plumbing: statements with translated errors, transactions, the ladder."""

    def __init__(self, conn: apsw.Connection, path: str) -> None:
        self.conn = conn
        self.path = path
        self._serial = next(_SERIALS)
        self._depth = 0
        # The file's generation as this connection last read or set it, and the data version it read it
        # at (inside a transaction): while no other connection commits, it cannot move.
        self._generation_seen: tuple[int, int] | None = None
        self._batch = False  # inside batch(): write transactions are savepoints of one outer transaction
        self.on_close: Callable[[], None] | None = None  # run once after the connection closed

    # -- plumbing ---------------------------------------------------------------------------------

    def _fail(self, exc: apsw.Error, sql: str) -> NoReturn:
        raise translate(exc, self.path) from None

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[Any]:
        try:
            return self.conn.execute(sql, args).fetchall()
        except apsw.Error as exc:
            self._fail(exc, sql)
        except UnicodeDecodeError as exc:
            raise undecodable(exc, self.path, sql) from None

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

    def change_mark(self) -> Hashable | None:
        # PRAGMA data_version moves on another connection's commit (its statement starts a read, so the
        # pager looks at the file); the file-control data version and total_changes() move on this
        # connection's own writes, committed or not. The connection's serial keeps marks of two
        # connections apart.
        if self._depth:
            return None  # a transaction's own writes may still be rolled back
        try:
            (external,) = self.conn.execute("PRAGMA data_version").fetchone()
        except apsw.Error as exc:
            self._fail(exc, "PRAGMA data_version")
        return (self._serial, external, self.conn.data_version(), self.conn.total_changes())

    @property
    def batching(self) -> bool:
        """Inside batch(): write transactions are savepoints of one outer transaction."""
        return self._batch

    def begin(self) -> None:
        """Start a write transaction: BEGIN IMMEDIATE takes the write lock (waiting up to the busy timeout),
        so nothing read inside it can change before COMMIT. Inside batch() it is a savepoint instead."""
        if self._depth:
            if not self._batch:
                raise RuntimeError("write transactions do not nest (outside batch())")
            self._run("SAVEPOINT inner")
            self._depth += 1
            return
        self._run("BEGIN IMMEDIATE")
        self._depth = 1

    def commit(self) -> None:
        if self._depth > 1:  # a savepoint of batch(): durable only when the batch commits
            self._run("RELEASE inner")
            self._depth -= 1
            return
        seen = self._generation_seen
        before = self.conn.data_version() if seen is not None else None
        try:
            self.conn.execute("COMMIT")
        except apsw.Error as exc:
            self.rollback()
            self._fail(exc, "COMMIT")
        self._depth = 0
        if seen is not None and seen[1] == before:
            # The generation was read (or set) at this transaction's data version, so nobody committed
            # since, and our own COMMIT moves the data version: carry the generation over to it, and the
            # next transaction checks it without a query unless another connection commits first.
            self._generation_seen = (seen[0], self.conn.data_version())

    def rollback(self) -> None:
        self._generation_seen = None  # a rolled-back bump_generation() never happened: read the file again
        if self._depth > 1:  # undo one savepoint of batch(); the outer transaction goes on
            self._depth -= 1
            if not self.conn.get_autocommit():
                try:
                    self.conn.execute("ROLLBACK TO inner")
                    self.conn.execute("RELEASE inner")
                except apsw.Error:
                    pass  # SQLite already rolled the whole transaction back: batch() will fail at COMMIT
            return
        self._depth = 0
        self._rollback()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One write transaction around many writes (an import): each write inside is a savepoint, and
        all of them reach the file at the end, or none do (an exception, a killed process, a power cut)."""
        self.begin()
        self._batch = True
        try:
            yield
        except BaseException:
            self._batch = False
            self._depth = 1
            self.rollback()
            raise
        self._batch = False
        if self._depth != 1:
            raise RuntimeError("a write inside batch() was left open")
        if self.conn.get_autocommit():  # SQLite rolled everything back under a savepoint (e.g. disk full)
            self._depth = 0
            raise errors.StorageError(f"{self.path}: the batch was rolled back by SQLite", code="rollback")
        self.commit()

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

    def read(self) -> AbstractContextManager[None]:
        """A consistent read snapshot across several queries (joins an open transaction)."""
        return _Read(self)

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
        if self.on_close is not None:
            done, self.on_close = self.on_close, None
            done()


    def schema_version(self) -> int:
        return self._one("PRAGMA user_version")[0]


class _Read:
    """What Engine.read() returns (a class: every read of the API enters one, and a generator-based
    context manager costs several times as much)."""

    __slots__ = ("_engine", "_began")

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    def __enter__(self) -> None:
        engine = self._engine
        self._began = not engine._depth  # inside a transaction: join it
        if self._began:
            engine._run("BEGIN")
            engine._depth = 1

    def __exit__(self, *exc: object) -> None:
        if self._began:
            engine = self._engine
            engine._depth = 0
            engine._rollback()  # a read transaction has nothing to commit
