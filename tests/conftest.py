"""Shared fixtures: tests run against real stores, never mocks.

`store_target` / `store` / `new_target` are parametrized over both engines (a real SQLite file, and a
database on a real throw-away PostgreSQL server the session starts itself; see tests/engines.py), so
every behavioural test runs on each. `db_path` is a plain SQLite file, for the tests about the file
itself (bytes, pragmas, the sqlite3 CLI, VFS faults)."""

from __future__ import annotations

import datetime as dt

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, settings

import eventckpt

from .engines import ENGINES, TARGETS

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a fresh SQLite store file."""
    return tmp_path / "agent.db"


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    """The engine a behavioural test runs on ("sqlite" and "postgresql")."""
    return request.param


@pytest.fixture
def new_target(engine: str) -> Iterator[Callable[[], str]]:
    """Make empty stores on the test's engine (file paths or postgresql:// URLs); cleaned up after."""
    made: list[str] = []

    def make() -> str:
        made.append(TARGETS.take(engine))
        return made[-1]

    yield make
    for target in made:
        TARGETS.give_back(target)


class _Named(dict):  # type: ignore[type-arg]
    def __init__(self, make: Callable[[], str]) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: str) -> str:
        self[key] = target = self.make()
        return target


@pytest.fixture
def named(new_target: Callable[[], str]) -> dict[str, str]:
    """Empty stores by name on the test's engine: named["a.db"] is the same store each time it is used."""
    return _Named(new_target)


@pytest.fixture
def store_target(new_target: Callable[[], str]) -> str:
    """Where an empty store lives, on each engine: open it with eventckpt.open(store_target)."""
    return new_target()


@pytest.fixture
def pg_target() -> Iterator[str]:
    """An empty store on PostgreSQL alone (for what only PostgreSQL has: pools, servers, many hosts)."""
    target = TARGETS.take("postgresql")
    yield target
    TARGETS.give_back(target)


@pytest.fixture
def store(store_target: str) -> Iterator[eventckpt.Store]:
    """An open store on each engine."""
    with eventckpt.open(store_target) as s:
        yield s


@pytest.fixture(params=["native", "python"])
def comparison(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How ops.same decides: the C extension eventckpt.exactcompare ("native"; CI must have built it), or
    the definition in Python alone ("python": what a machine without a C compiler runs)."""
    from eventckpt import ops

    if request.param == "python":
        monkeypatch.setattr(ops, "native_same", None)
    elif ops.native_same is None:
        message = "eventckpt.exactcompare was not built (no C compiler when eventckpt was installed)"
        if os.environ.get("CI"):
            pytest.fail(message + " and CI must test it")
        pytest.skip(message)
    return request.param


def journal_rows(path: Path | str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read with a separate plain connection (to compare before/after)."""
    if str(path).startswith("postgresql://"):
        return TARGETS.rows(str(path))
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
        return {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY 1, 2').fetchall() for t in tables}
    finally:
        conn.close()


def strict_equal(a: Any, b: Any) -> bool:
    """Equal and stored the same, written independently of eventckpt: exact types all the way down (1, 1.0
    and True differ), and whatever else a value's repr shows (0.0 and -0.0, Decimal 1.0 and 1.00, a
    datetime's zone); a dict's key order and a set's member order do not matter."""
    return canonical(a) == canonical(b)


def canonical(value: Any) -> tuple[str, Any]:
    """A comparable form of `value` naming its type at every level (repr for the leaves)."""
    t = type(value)
    if t is dict:
        return ("dict", tuple(sorted((canonical(k), canonical(v)) for k, v in value.items())))
    if t is list or t is tuple:
        return (t.__name__, tuple(map(canonical, value)))
    if t is set or t is frozenset:
        return (t.__name__, tuple(sorted(map(canonical, value))))
    if t is dt.datetime or t is dt.time:  # the repr shows the zone and a fold of 1; the offset it implies too
        return (t.__name__, repr((value, value.utcoffset())))
    return (f"{t.__module__}.{t.__qualname__}", repr(value))


class RawSQL:
    """Plain SQL on a store, beside eventckpt (to inspect or tamper with rows): SQLite through apsw,
    PostgreSQL through psycopg with the store's schema first on the search path. `?` placeholders on
    both; `kind` tells a test which dialect it is speaking when the SQL must differ."""

    def __init__(self, target: Path | str) -> None:
        self.target = str(target)
        self.kind = "postgresql" if self.target.startswith("postgresql://") else "sqlite"
        if self.kind == "sqlite":
            self.conn: Any = apsw.Connection(self.target)
        else:
            import psycopg

            self.conn = psycopg.connect(self.target, autocommit=True)
            self.conn.execute("SET search_path TO eventckpt, public")

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.kind == "sqlite":
            return self.conn.execute(sql, args).fetchall()
        cur = self.conn.execute(sql.replace("?", "%s"), args) if args else self.conn.execute(sql)
        return [tuple(r) for r in cur.fetchall()] if cur.description else []

    def one(self, sql: str, args: tuple[Any, ...] = ()) -> Any:
        """The first column of the first row."""
        return self.execute(sql, args)[0][0]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> RawSQL:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_cli_example(command: str, cwd: Path | str | None = None) -> tuple[int, str]:
    """Run a README/--help example of the CLI as a real process, as a newcomer would paste it; (exit
    status, stderr). `eventckpt serve` runs until stopped: it must print its URL and answer there, and is
    then stopped with SIGTERM (its --open goes to a browser that does nothing)."""
    import shlex
    import signal
    import subprocess
    import sys
    import urllib.request

    argv = [sys.executable, "-m", "eventckpt", *shlex.split(command)[1:]]
    if argv[3:4] != ["serve"]:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
        return done.returncode, done.stderr
    env = {**os.environ, "BROWSER": "true"}
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        url = line.split(" at ", 1)[1].split()[0] if " at " in line else ""
        with urllib.request.urlopen(url + "streams.json", timeout=30) as answer:
            assert answer.status == 200, (command, answer.status)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    return proc.returncode, err
