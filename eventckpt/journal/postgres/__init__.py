"""The PostgreSQL journal (psycopg 3 + psycopg_pool): one store shared by many processes and hosts.

    eventckpt.open("postgresql://user@host/db")    # eventckpt opens (and closes) its own pool
    eventckpt.open(pool)                            # a psycopg_pool.ConnectionPool you own
    eventckpt.open(conn)                            # one psycopg connection you own (autocommit=True)

Each thread in a session gets its own pooled connection: a Store shared by threads never serializes them
in-process. Install with `pip install 'eventckpt[postgres]'`.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import conninfo, pq
from psycopg_pool import ConnectionPool

from ... import errors
from ..contract import Backend, Journal
from .caller_sql import CallerSQL
from .engine import SCHEMA_VERSION, migrate, said, schema_files, translate
from .langgraph import LangGraphTables
from .queries import Queries
from .tables import Tables

__all__ = ["SCHEMA_VERSION", "PostgresBackend", "PostgresJournal", "connect", "schema_files"]

# psycopg and its pool log what they retry or ignore (each failed connection attempt, a rollback that could
# not run) as warnings; a program that set up no logging got them on stderr through logging's last resort,
# around eventckpt's own one-line errors. A NullHandler keeps them out of stderr and leaves them to a
# program's own logging configuration, unchanged, as the logging HOWTO advises libraries.
logging.getLogger("psycopg").addHandler(logging.NullHandler())


class PostgresJournal(Tables, LangGraphTables, Queries, CallerSQL, Journal):
    """SQL access to one eventckpt store on PostgreSQL over one connection."""

    kind = "postgresql"


def describe(target: Any) -> str:
    """What to show users for a target: its URL without a password."""
    if isinstance(target, str):
        info = conninfo.conninfo_to_dict(target)
    elif isinstance(target, psycopg.Connection):
        info = conninfo.conninfo_to_dict(target.info.dsn)
    else:
        info = conninfo.conninfo_to_dict(target.conninfo)
    user = f"{info['user']}@" if info.get("user") else ""
    port = f":{info['port']}" if info.get("port") else ""
    return f"postgresql://{user}{info.get('host', '')}{port}/{info.get('dbname', '')}"


# A server with no connection slot left answers, but a slot may free up in time: wait for it, as for a server
# that is down. (Only the message tells: libpq keeps no SQLSTATE of a refused connection, 53300 here. A
# server whose messages are not in English is then refused at once.)
_FULL = re.compile(r"too many (?:clients|connections)|connection slots are reserved")


class PostgresBackend(Backend):
    """A pool (eventckpt's own for a URL, or the caller's), or one connection the caller gave."""

    kind = "postgresql"

    def __init__(self, target: Any, *, timeout: float, settings: dict[str, str], pool_size: int) -> None:
        super().__init__()
        self.target = describe(target)
        self.timeout = timeout
        self.settings = settings
        self._owned = isinstance(target, str)
        self._lock = threading.RLock()  # one caller connection: threads take turns
        self.conn: psycopg.Connection[Any] | None = None
        self.pool: ConnectionPool | None = None
        self._switched: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()  # caller's, autocommit by us
        self._configured: weakref.WeakSet[psycopg.Connection[Any]] = weakref.WeakSet()
        if isinstance(target, str):
            deadline = time.monotonic() + timeout
            unreachable = self._first_connection(target)
            self.pool = ConnectionPool(target, min_size=1, max_size=pool_size, kwargs={"autocommit": True},
                                       configure=self._configure, timeout=timeout, open=False,
                                       name="eventckpt")
            try:
                self.pool.open(wait=True, timeout=max(deadline - time.monotonic(), 1.0))
            except psycopg.Error as exc:
                self.pool.close()
                if unreachable is None:
                    raise translate(exc, f"opening {self.target}") from None
                if _FULL.search(str(unreachable)):  # it answers, but every connection slot stayed taken
                    raise errors.StoreUnavailableError(
                        f"opening {self.target}: the server had no free connection slot for {timeout:g} s"
                        f" (max_connections reached: {said(unreachable)})", code="unreachable") from None
                raise errors.StoreUnavailableError(f"opening {self.target}: the server stayed unreachable for"
                                                   f" {timeout:g} s ({said(unreachable)})", code="unreachable") from None
        elif isinstance(target, ConnectionPool):
            self.pool = target
        else:
            if not target.autocommit:
                raise errors.InvalidArgumentError(
                    "target", self.target, "a connection given to eventckpt must have autocommit=True"
                    " (eventckpt's commits are single statements; it never commits a transaction it did not begin)")
            self.conn = target
            self._configure(target)

    def _first_connection(self, target: str) -> psycopg.Error | None:
        """Connect once, before the pool does. A server that answers and refuses the connection (no such
        database or role, authentication failed) is reported at once: the pool would retry it in the
        background until the timeout, and then call the server unreachable. A server that does not
        answer, answers that it is starting up or shutting down, or has no connection slot free, may be
        ready in time: its error is returned, and the pool waits for it. (libpq gives no SQLSTATE for a failed connection; PQping tells
        the two apart: any answer but "cannot connect now" means the server is up.) A server may come up
        between a failed connection and the ping: so a connection refused by a server that then answers
        is tried once more, and only one refused again, with the server still answering, is a refusal."""
        info = conninfo.make_conninfo(target, connect_timeout=str(max(2, math.ceil(self.timeout))))
        for _ in range(2):
            try:
                psycopg.connect(info).close()
                return None
            except psycopg.Error as exc:
                if pq.PGconn.ping(info.encode()) != pq.Ping.OK or _FULL.search(str(exc)):
                    return exc
                refused = exc
        raise errors.StorageError(f"opening {self.target}: the server refused the connection ({said(refused)})",
                                  code="refused") from None

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        """Set up every connection the same way (settings bound as parameters, never SQL text)."""
        for name, value in self.settings.items():
            conn.execute("SELECT set_config(%s, %s, false)", (name, value))

    def _checkout(self) -> psycopg.Connection[Any]:
        assert self.pool is not None
        try:
            conn = self.pool.getconn(timeout=self.timeout)
        except psycopg.Error as exc:
            raise translate(exc, self.target, committed=False) from None
        if not conn.autocommit and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.autocommit = True  # a caller's pool: restored at check-in
            self._switched.add(conn)
        if not self._owned and conn not in self._configured:
            self._configure(conn)
            self._configured.add(conn)
        return conn

    def _checkin(self, conn: psycopg.Connection[Any]) -> None:
        assert self.pool is not None
        if conn in self._switched and not conn.broken and not conn.closed:
            conn.autocommit = False
            self._switched.discard(conn)
        self.pool.putconn(conn)

    @contextmanager
    def acquire(self) -> Iterator[Journal]:
        if self.pool is None:
            with self._lock:
                assert self.conn is not None
                yield PostgresJournal(self.conn, self.target, None)
            return
        journal = PostgresJournal(self._checkout(), self.target, self)
        try:
            yield journal
        finally:
            self._checkin(journal.conn)

    def replace(self, conn: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
        """Give a dropped connection back (the pool discards it) and take a working one. When one dropped,
        the others idle in the pool probably did too (a server restart): they are checked first, once,
        instead of on every checkout."""
        self._checkin(conn)
        assert self.pool is not None
        self.pool.check()
        return self._checkout()

    def close(self) -> None:
        if self._owned and self.pool is not None:
            self.pool.close()


def connect(target: Any, *, durability: str = "normal", timeout: float = 30.0, readonly: bool = False,
            pool_size: int = 10, create: bool = True) -> PostgresBackend:
    """Open the store in a PostgreSQL database, creating its schema (`eventckpt`) on first use.

    durability: "full" forces synchronous_commit=on (every acknowledged commit is flushed to the server's
        WAL); "normal" keeps the server's setting (on by default).
    timeout: seconds to wait for a connection, and for another writer's lock, before an error.
    """
    settings = {"lock_timeout": f"{int(timeout * 1000)}ms", "application_name": "eventckpt"}
    if durability == "full":
        settings["synchronous_commit"] = "on"
    if readonly:
        settings["default_transaction_read_only"] = "on"
    backend = PostgresBackend(target, timeout=timeout, settings=settings, pool_size=pool_size)
    try:
        with backend.acquire() as journal:
            assert isinstance(journal, PostgresJournal)
            migrate(journal.conn, backend.target, readonly=readonly, create=create)
    except BaseException:
        backend.close()
        raise
    return backend
