"""The engines every behavioural test runs on, and fresh stores on them.

    target = TARGETS.take("postgresql")   # a postgresql:// URL of an empty store (or a file path for "sqlite")
    ...
    TARGETS.give_back(target)

PostgreSQL stores are databases of one throw-away server the test session starts itself (tests/pgserver.py)
on first use. A new database is cloned from a migrated template; one given back is emptied (TRUNCATE) and
handed out again. Without PostgreSQL binaries the PostgreSQL variants are skipped with a clear message on
a developer's machine, and fail in CI (the CI variable is set): CI must never skip them.
"""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

from .pgserver import PostgresServer, binaries

ENGINES = ("sqlite", "postgresql")
_TEMPLATE = "eventckpt_template"
_TABLES = ("events", "snapshots", "checkpoint_ids", "tool_calls", "metadata_index", "versions", "stream_names",
           "streams", "trees", "langgraph_writes", "langgraph_threads", "langgraph_moved")


class Targets:
    def __init__(self) -> None:
        self._server: PostgresServer | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="eventckpt-targets-"))
        self._free: list[str] = []
        self._count = itertools.count(1)
        atexit.register(self.close)

    def server(self) -> PostgresServer:
        if self._server is None:
            if binaries() is None:
                message = ("PostgreSQL server binaries not found (Debian: apt-get install postgresql); "
                           "the PostgreSQL variants of the tests need them")
                if os.environ.get("CI"):
                    raise RuntimeError(message + " and CI must not skip them")
                pytest.skip(message)
            # its own folder under the system's temporary directory: the server runs as an unprivileged user
            # when we are root, and must be able to reach it
            self._server = PostgresServer.start(Path(tempfile.mkdtemp(prefix="eventckpt-pg-")))
            import eventckpt
            import psycopg

            with psycopg.connect(self._server.url(), autocommit=True) as conn:
                conn.execute(f"CREATE DATABASE {_TEMPLATE}")
            eventckpt.open(self._server.url(_TEMPLATE)).close()  # the schema, once
        return self._server

    def take(self, engine: str) -> str:
        """An empty store on `engine` (sqlite: a new file path; postgresql: a database URL)."""
        n = next(self._count)
        if engine == "sqlite":
            folder = self._dir / f"s{n}"
            folder.mkdir()
            return str(folder / "agent.db")
        server = self.server()
        if self._free:
            return server.url(self._free.pop())
        name = f"t{n}"
        self.admin(f"CREATE DATABASE {name} TEMPLATE {_TEMPLATE} STRATEGY FILE_COPY")
        return server.url(name)

    def give_back(self, target: str, *, reuse: bool = True) -> None:
        """Return a store: a PostgreSQL database is emptied for the next test (or dropped when it cannot be
        emptied, e.g. a connection was left open); a file is deleted."""
        if not target.startswith("postgresql://"):
            shutil.rmtree(Path(target).parent, ignore_errors=True)
            return
        import psycopg

        name = target.rsplit("/", 1)[1]
        if reuse:
            try:
                with psycopg.connect(target, autocommit=True) as conn:
                    conn.execute("SET lock_timeout = '2s'")
                    conn.execute("TRUNCATE " + ", ".join(f"eventckpt.{t}" for t in _TABLES))
                    conn.execute("ALTER SEQUENCE eventckpt.stream_ids RESTART")
                    ok = conn.execute("SELECT schema_version FROM eventckpt.store_info").fetchone() is not None
                if ok:
                    self._free.append(name)
                    return
            except psycopg.Error:
                pass
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(self.server().url(), autocommit=True) as conn:
            conn.execute(sql)

    def rows(self, target: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table of a store, read with a separate connection (to compare before/after)."""
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            tables = [r[0] for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'eventckpt'"
                " AND table_type = 'BASE TABLE' ORDER BY table_name")]
            return {t: conn.execute(f"SELECT * FROM eventckpt.{t} ORDER BY 1").fetchall() if t == "trees" else
                    conn.execute(f"SELECT * FROM eventckpt.{t} ORDER BY 1, 2").fetchall() for t in tables}

    def close(self) -> None:
        if self._server is not None:
            self._server.destroy()
            self._server = None
        shutil.rmtree(self._dir, ignore_errors=True)


TARGETS = Targets()
