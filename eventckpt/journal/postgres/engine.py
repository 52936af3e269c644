"""The PostgreSQL engine (psycopg 3): the schema ladder, the one place driver errors are translated, and
the plumbing (statements, transactions, reconnecting) the table mixins share.

Connections run in autocommit mode: a commit is one statement (one round trip) and is its own
transaction; `write()`, `read()` and `batch()` open explicit transactions (savepoints when nested, or
when the caller's connection already holds a transaction: eventckpt never commits a transaction it did
not begin). Reads run at REPEATABLE READ (one snapshot for the whole read), writes at READ COMMITTED with
the primary keys deciding every race.

A connection that drops outside a transaction is replaced (from the pool) and the statement retried when
it is a read; a commit in flight is looked up by its checksum to learn whether it landed. Inside a
transaction the loss is reported as StoreUnavailableError (`committed=False`: the server rolls back a
transaction whose connection is gone; None when COMMIT itself was in flight).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING, Any, NoReturn

import psycopg
from psycopg import errors as pg

from ... import errors
from ..ladder import ladder_files

if TYPE_CHECKING:
    from . import PostgresBackend

_DUPLICATE = (pg.UniqueViolation, pg.DuplicateSchema, pg.DuplicateObject, pg.DuplicateTable, pg.DuplicateFunction)
_LADDER_TRIES = 10


# -- the schema ladder ----------------------------------------------------------------------------


def schema_files() -> list[tuple[int, str, str]]:
    """(number, name, sql) of every PostgreSQL schema file, in ladder order."""
    return ladder_files("postgresql")


SCHEMA_VERSION = schema_files()[-1][0]


def stored_version(conn: psycopg.Connection[Any], target: str) -> int:
    """The schema version the database holds (0: none yet); refuses a foreign `eventckpt` schema and a
    newer store."""
    row = conn.execute(
        "SELECT to_regclass('eventckpt.store_info') IS NOT NULL,"
        " (SELECT count(*) FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = 'eventckpt')"
    ).fetchone()
    assert row is not None
    has_info, objects = row
    if not has_info:
        if objects:
            raise errors.ForeignFileError(target, "its schema `eventckpt` holds tables that are not an eventckpt store")
        return 0
    found = conn.execute("SELECT schema_version FROM eventckpt.store_info WHERE id = 1").fetchone()
    if found is None:
        raise errors.ForeignFileError(target, "eventckpt.store_info has no row: not an eventckpt store")
    version = int(found[0])
    if version > SCHEMA_VERSION:
        raise errors.NewerSchemaError(target, version, SCHEMA_VERSION)
    return version


def migrate(conn: psycopg.Connection[Any], target: str, readonly: bool = False, create: bool = True) -> None:
    """Apply the schema files above the database's version, all in one transaction (a savepoint when the
    caller's connection holds a transaction). Safe under concurrent first use by many processes: the one
    that loses the race on a catalog name, or waits on the store_info row lock, finds the work done."""
    for _ in range(_LADDER_TRIES):
        try:
            with conn.transaction():
                version = stored_version(conn, target)
                if version == SCHEMA_VERSION:
                    return
                if not version and (readonly or not create):
                    raise errors.StoreNotFoundError(target, "the database holds no eventckpt store (schema eventckpt)")
                if readonly:
                    raise errors.OlderSchemaError(target, version, SCHEMA_VERSION)
                if version:  # wait for (and then see) another process's upgrade
                    conn.execute("SELECT schema_version FROM eventckpt.store_info WHERE id = 1 FOR UPDATE")
                    version = stored_version(conn, target)
                for number, name, sql in schema_files():
                    if number > version:
                        try:
                            conn.execute(sql)
                        except _DUPLICATE:
                            raise
                        except psycopg.Error as exc:
                            raise errors.SchemaError(target, f"applying {name} failed: {exc}") from None
            return
        except _DUPLICATE:
            continue  # another process created the same objects first: read its work
        except psycopg.Error as exc:
            raise translate(exc, f"migrating {target}") from None
    raise errors.SchemaError(target, "the schema could not be applied (other processes kept changing it)")


_SAFE_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\ufffe")


def with_nul(text: str | None) -> str | None:
    """JSON text read through eventckpt.json_safe() (schema 001) with its NUL escapes back: each \\ufffe
    escape that json_safe wrote is \\u0000 again (eventckpt's own JSON never writes \\ufffe as an escape)."""
    if text is None or "\\ufffe" not in text:
        return text
    return _SAFE_NUL.sub(r"\1\\u0000", text)


# -- error translation (the one boundary) ---------------------------------------------------------


def said(exc: psycopg.Error) -> str:
    """What a driver error says, on one line (errors reach users as one line, the CLI's included): the
    server's primary message, without its DETAIL, CONTEXT and LINE pointer; else the driver's own text."""
    return exc.diag.message_primary or " ".join(str(exc).split())


def translate(exc: psycopg.Error, where: str, *, committed: bool | None = False) -> errors.EventCkptError:
    """The eventckpt error for a driver error. `committed` is what a lost connection means for the
    write in flight (see StoreUnavailableError)."""
    code = getattr(exc, "sqlstate", None) or type(exc).__name__
    text = said(exc)
    if isinstance(exc, pg.QueryCanceled):  # statement_timeout, or a cancel: no other writer is involved
        why = "ran past the server's statement_timeout" if "statement timeout" in text else "was canceled"
        return errors.StoreBusyError(f"{where}: the statement {why} ({text})", code=code)
    if isinstance(exc, (pg.SerializationFailure, pg.DeadlockDetected, pg.LockNotAvailable)):
        return errors.StoreBusyError(f"{where}: the server gave up waiting for other writers ({text})", code=code)
    if isinstance(exc, (pg.ReadOnlySqlTransaction, pg.InsufficientPrivilege)):
        return errors.ReadOnlyStoreError(f"{where}: the store cannot be written ({text})", code=code)
    if isinstance(exc, pg.DiskFull):
        return errors.StorageFullError(f"{where}: the server's disk is full ({text})", code=code)
    if isinstance(exc, (pg.DataCorrupted, pg.IndexCorrupted)):
        return errors.CorruptStoreError(f"{where}: the database is damaged ({text})", code=code)
    if isinstance(exc, psycopg.OperationalError) or isinstance(exc, psycopg.InterfaceError):
        return errors.StoreUnavailableError(f"{where}: the server is unreachable or the connection dropped ({text})",
                                            code=code, committed=committed)
    return errors.StorageError(f"{where}: {text}", code=code)


def lost(exc: BaseException) -> bool:
    """Whether a driver error means the connection is gone (not that a statement failed)."""
    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)) and not isinstance(
        exc, (pg.QueryCanceled, pg.LockNotAvailable))


class Engine:
    """One connection's plumbing: statements with translated errors, transactions, reconnecting."""

    def __init__(self, conn: psycopg.Connection[Any], target: str, backend: PostgresBackend | None = None) -> None:
        self.conn = conn
        self.path = target
        self.backend = backend
        self._depth = 0
        self._batch = False

    # -- plumbing ---------------------------------------------------------------------------------

    def _fail(self, exc: psycopg.Error) -> NoReturn:
        raise translate(exc, self.path) from None

    def _execute(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> psycopg.Cursor[Any]:
        """Run one statement. Outside a transaction a dropped connection is replaced and a read retried
        once (every statement run outside a transaction is a read, except `append`, which handles its own
        loss); inside one the loss is reported."""
        try:
            return self.conn.execute(sql, args)
        except psycopg.Error as exc:
            if not lost(exc) or self._depth or not self.reconnect():
                self._fail(exc)
        try:
            return self.conn.execute(sql, args)
        except psycopg.Error as exc:
            self._fail(exc)

    def _rows(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        cur = self._execute(sql, args)
        try:
            return cur.fetchall() if cur.description is not None else []
        except psycopg.Error as exc:
            self._fail(exc)

    def _one(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> Any:
        rows = self._rows(sql, args)
        return rows[0] if rows else None

    def _run(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> int:
        """Run a statement; the number of rows it changed."""
        return self._execute(sql, args).rowcount

    def _many(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        rows = list(rows)
        if not rows:
            return
        try:
            with self.conn.cursor() as cur:
                cur.executemany(sql, rows)
        except psycopg.Error as exc:
            self._fail(exc)

    def reconnect(self) -> bool:
        """Replace a dropped connection (waiting for the server to come back, up to the pool's timeout).
        False when this journal cannot (a connection the caller gave, which only the caller can reopen)."""
        if self.backend is None:
            return False
        self.conn = self.backend.replace(self.conn)
        return True

    # -- transactions -----------------------------------------------------------------------------

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @property
    def batching(self) -> bool:
        return self._batch

    @contextmanager
    def _transaction(self, *, read_only: bool = False) -> Iterator[None]:
        """A psycopg transaction (a savepoint when one is open), with driver errors translated. A
        connection lost inside it means the server rolled it back; lost at COMMIT, nobody knows."""
        outermost = self.conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        self._depth += 1
        body_done = False
        try:
            with ExitStack() as stack:
                self._begin(stack, outermost, read_only)
                yield
                body_done = True
        except psycopg.Error as exc:
            raise translate(exc, self.path, committed=None if body_done and outermost else False) from None
        finally:
            self._depth -= 1
            if self._depth == 0 and (self.conn.closed or self.conn.broken):
                self.reconnect()  # the next call gets a working connection

    def _begin(self, stack: ExitStack, outermost: bool, read_only: bool) -> None:
        """Enter a psycopg transaction on `stack`. A connection found dropped at BEGIN of an outermost
        transaction (the server restarted since it was last used) is replaced and BEGIN sent again:
        nothing of the transaction has run yet, so this is safe for writes too."""
        for again in (False, True):
            conn = self.conn
            if outermost:
                conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ if read_only else None
                conn.read_only = True if read_only else None
            try:
                stack.enter_context(conn.transaction())
                return
            except psycopg.Error as exc:
                if again or not outermost or not lost(exc) or not self.reconnect():
                    raise

    @contextmanager
    def write(self) -> Iterator[None]:
        """One write transaction (READ COMMITTED; a savepoint inside batch())."""
        if self._depth and not self._batch:
            raise RuntimeError("write transactions do not nest (outside batch())")
        with self._transaction():
            yield

    @contextmanager
    def read(self) -> Iterator[None]:
        """A consistent read snapshot (REPEATABLE READ, READ ONLY); joins an open transaction."""
        if self._depth:
            yield
            return
        with self._transaction(read_only=True):
            yield

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One transaction around many writes; writes inside are savepoints."""
        with self._transaction():
            self._batch = True
            try:
                yield
            finally:
                self._batch = False

    def close(self) -> None:
        """Nothing here: the backend owns the connection."""

    def schema_version(self) -> int:
        return int(self._one("SELECT schema_version FROM eventckpt.store_info WHERE id = 1")[0])
