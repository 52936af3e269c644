"""Opening a store on PostgreSQL: by URL, by a psycopg connection or pool; the schema ladder inside a
caller's transaction and under concurrent first use by many processes; foreign and newer schemas refused
untouched; read-only stores; a server that refuses the connection (reported at once) or does not answer
(waited for, then StoreUnavailableError), without the pool's own messages on stderr."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from psycopg import pq
from psycopg_pool import ConnectionPool

import eventckpt
from eventckpt.journal import postgres
from eventckpt.journal.postgres import SCHEMA_VERSION

from .engines import TARGETS


@pytest.fixture
def empty_db() -> Iterator[str]:
    """The URL of a database with no eventckpt schema at all."""
    server = TARGETS.server()
    name = f"empty_{id(object())}"
    TARGETS.admin(f"CREATE DATABASE {name}")
    yield server.url(name)
    TARGETS.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def schema_of(url: str) -> list[tuple[str, str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = 'eventckpt'"
                            " ORDER BY 1").fetchall()


def test_a_url_creates_the_schema_and_works(empty_db: str) -> None:
    """The first open of a URL applies every rung; the store then saves and reads like a file."""
    with eventckpt.open(empty_db) as store:
        store.stream("t").save({"a": 1})
        assert store.stream("t").state() == {"a": 1} and store.core.backend.kind == "postgresql"
    with psycopg.connect(empty_db, autocommit=True) as conn:
        assert conn.execute("SELECT schema_version FROM eventckpt.store_info").fetchone() == (SCHEMA_VERSION,)
    assert {"checkpoints", "changes", "path_history", "lineage", "stream_heads"} <= {n for n, _ in schema_of(empty_db)}


def test_a_connection_and_a_pool_are_accepted(pg_target: str) -> None:
    """A psycopg connection (autocommit) and a psycopg_pool pool the caller owns both work, and closing
    the store leaves them open for their owner."""
    with psycopg.connect(pg_target, autocommit=True) as conn:
        with eventckpt.open(conn) as store:
            store.stream("c").save({"via": "connection"})
        assert not conn.closed and conn.execute("SELECT 1").fetchone() == (1,)
    with ConnectionPool(pg_target, min_size=1, max_size=3, open=True) as pool:  # connections not in autocommit
        with eventckpt.open(pool) as store:
            store.stream("p").save({"via": "pool"})
            assert store.stream("c").state() == {"via": "connection"}
        with pool.connection() as conn:
            assert conn.autocommit is False  # given back as it was lent
    with eventckpt.open(pg_target) as store:
        assert store.streams() == ["c", "p"]


def test_a_connection_without_autocommit_is_refused(empty_db: str) -> None:
    """A connection that is not in autocommit mode is refused with a clear error, and nothing is created."""
    with psycopg.connect(empty_db) as conn:
        with pytest.raises(eventckpt.InvalidArgumentError, match="autocommit"):
            eventckpt.open(conn)
    assert schema_of(empty_db) == []


def test_the_ladder_works_inside_the_callers_transaction(empty_db: str) -> None:
    """Opened on a connection inside the caller's transaction, the schema is applied in a savepoint of it:
    the caller's rollback takes it away again, and a later open applies it for good."""
    with psycopg.connect(empty_db, autocommit=True) as conn:
        with pytest.raises(RuntimeError):
            with conn.transaction():
                conn.execute("CREATE TABLE public.callers_own (x int)")
                eventckpt.open(conn).close()
                assert conn.execute("SELECT to_regclass('eventckpt.versions') IS NOT NULL").fetchone() == (True,)
                raise RuntimeError("the caller rolls back")
    assert schema_of(empty_db) == []
    with psycopg.connect(empty_db, autocommit=True) as conn:
        with conn.transaction():
            with eventckpt.open(conn) as store:
                store.stream("t").save({"inside": True})
    with eventckpt.open(empty_db) as store:
        assert store.stream("t").state() == {"inside": True}


FIRST_USE = """
import sys, eventckpt
with eventckpt.open(sys.argv[1]) as store:
    store.stream("p" + sys.argv[2]).save({"n": int(sys.argv[2])})
"""


def test_concurrent_first_use_by_many_processes(empty_db: str) -> None:
    """Eight processes opening a fresh database at once all succeed; the schema is applied once."""
    procs = [subprocess.Popen([sys.executable, "-c", FIRST_USE, empty_db, str(i)], stderr=subprocess.PIPE, text=True)
             for i in range(8)]
    errors = [(p.wait(120), p.stderr.read()) for p in procs]  # type: ignore[union-attr]
    assert [e for e in errors if e[0] != 0] == []
    with eventckpt.open(empty_db) as store:
        assert sorted(store.streams()) == [f"p{i}" for i in range(8)]
        assert store.core.session().__enter__().schema_version() == SCHEMA_VERSION


def test_a_foreign_eventckpt_schema_is_refused_untouched(empty_db: str) -> None:
    """A database whose `eventckpt` schema holds someone else's tables is refused and not modified."""
    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA eventckpt")
        conn.execute("CREATE TABLE eventckpt.theirs (x int)")
    before = schema_of(empty_db)
    with pytest.raises(eventckpt.ForeignFileError):
        eventckpt.open(empty_db)
    assert schema_of(empty_db) == before


def test_a_newer_store_is_refused_untouched(pg_target: str) -> None:
    """A store written by a newer eventckpt (a higher schema version) is refused and not modified."""
    with psycopg.connect(pg_target, autocommit=True) as conn:
        conn.execute("UPDATE eventckpt.store_info SET schema_version = schema_version + 1")
    try:
        with pytest.raises(eventckpt.NewerSchemaError):
            eventckpt.open(pg_target)
    finally:
        with psycopg.connect(pg_target, autocommit=True) as conn:
            conn.execute("UPDATE eventckpt.store_info SET schema_version = schema_version - 1")


def test_a_read_only_open_of_an_older_store_is_refused_untouched(pg_target: str) -> None:
    """A read-only open of a store at an earlier schema version raises OlderSchemaError (naming `eventckpt
    upgrade`) and does not upgrade it; a writable open then does."""
    with psycopg.connect(pg_target, autocommit=True) as conn:
        conn.execute("UPDATE eventckpt.store_info SET schema_version = schema_version - 1")
        older = conn.execute("SELECT schema_version FROM eventckpt.store_info").fetchone()[0]
    try:
        with pytest.raises(eventckpt.OlderSchemaError) as info:
            eventckpt.open(pg_target, readonly=True)
        assert info.value.found == older and "eventckpt upgrade" in str(info.value)
        with psycopg.connect(pg_target, autocommit=True) as conn:
            assert conn.execute("SELECT schema_version FROM eventckpt.store_info").fetchone()[0] == older
    finally:
        with psycopg.connect(pg_target, autocommit=True) as conn:
            conn.execute("UPDATE eventckpt.store_info SET schema_version = schema_version + 1")


def test_a_read_only_store_reads_and_refuses_writes(pg_target: str) -> None:
    """readonly=True reads every version and refuses any write with ReadOnlyStoreError."""
    with eventckpt.open(pg_target) as store:
        store.stream("t").save({"a": 1})
    with eventckpt.open(pg_target, readonly=True) as store:
        assert store.stream("t").state() == {"a": 1}
        with pytest.raises(eventckpt.ReadOnlyStoreError):
            store.stream("t").save({"a": 2})
        with pytest.raises(eventckpt.ReadOnlyStoreError):
            store.stream("t").fork(task_id="f")
    with eventckpt.open(pg_target) as store:
        assert store.streams() == ["t"] and store.stream("t").version == 1


def test_a_read_only_open_of_an_empty_database_creates_nothing(empty_db: str) -> None:
    """A read-only open of a database without the schema is an error and creates nothing."""
    with pytest.raises(eventckpt.SchemaError):
        eventckpt.open(empty_db, readonly=True)
    assert schema_of(empty_db) == []


def test_the_path_shown_hides_the_password(pg_target: str) -> None:
    """Store.path (and every error message) names the database without its password."""
    with psycopg.connect(pg_target, autocommit=True) as conn:
        conn.execute("ALTER USER eventckpt PASSWORD 'hunter2'")  # trust auth: accepted and ignored
    with_password = pg_target.replace("eventckpt@", "eventckpt:hunter2@")
    with eventckpt.open(with_password) as store:
        assert "hunter2" not in store.path and "hunter2" not in repr(store)
        assert store.path.startswith("postgresql://eventckpt@127.0.0.1:")


def test_a_missing_database_or_role_is_refused_at_once_on_one_line(pg_target: str) -> None:
    """A database or a role the server does not have is reported at once, not after the 30 s timeout: a
    StorageError naming it, on one line, not an unreachable server."""
    base, port = pg_target.rsplit("/", 1)[0], TARGETS.server().port
    for url, named in [(f"{base}/no_such_database", '"no_such_database"'),
                       (f"postgresql://no_such_role@127.0.0.1:{port}/postgres", '"no_such_role"')]:
        start = time.monotonic()
        with pytest.raises(eventckpt.StorageError) as info:
            eventckpt.open(url, timeout=30)
        assert time.monotonic() - start < 10
        message = str(info.value)
        assert not isinstance(info.value, eventckpt.StoreUnavailableError) and info.value.code == "refused"
        assert f"{named} does not exist" in message and "\n" not in message


OPEN = """
import sys, eventckpt
try:
    eventckpt.open(sys.argv[1], timeout=float(sys.argv[2]))
except eventckpt.StoreUnavailableError as exc:
    print(exc)
"""


def test_a_server_that_does_not_answer_is_waited_for_silently() -> None:
    """Where no server listens, open waits out its timeout (2 s) and raises StoreUnavailableError on one
    line, naming the cause; psycopg's pool writes nothing to stderr meanwhile."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", OPEN, f"postgresql://eventckpt@127.0.0.1:{port}/x", "2"],
                          capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.count("\n") == 1 and "unreachable" in done.stdout and "Connection refused" in done.stdout
    assert time.monotonic() - start >= 2


def test_opening_while_the_server_is_down_waits_for_it(pg_target: str) -> None:
    """A store opened while its server is stopped opens once the server is back (within the timeout):
    a server that does not answer, or is starting up, is waited for, not refused."""
    server = TARGETS.server()
    opened: dict[str, Any] = {}

    def open_store() -> None:
        try:
            opened["store"] = eventckpt.open(pg_target, timeout=60)
        except Exception as exc:  # noqa: BLE001 - reported below
            opened["error"] = exc

    server.stop("fast")
    try:
        thread = threading.Thread(target=open_store)
        thread.start()
        time.sleep(1.5)
    finally:
        server.restart()
    thread.join(60)
    assert "error" not in opened, opened
    with opened["store"] as store:
        assert store.stream("a").save({"x": 1}).version == 1


def test_a_server_back_between_a_failed_connection_and_the_ping_is_not_refused(
        pg_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that comes up after open's first connection failed and before open asks it whether it is
    up (as a restarting server may) is connected to, not reported as refusing the connection."""
    server = TARGETS.server()
    ping = pq.PGconn.ping
    restarted: list[bool] = []

    def back_then_ping(info: bytes) -> Any:
        if not restarted:  # the connection was refused: the server comes back right now
            restarted.append(True)
            server.restart()
        return ping(info)

    monkeypatch.setattr(postgres, "pq", SimpleNamespace(PGconn=SimpleNamespace(ping=back_then_ping), Ping=pq.Ping))
    server.stop("fast")
    try:
        with eventckpt.open(pg_target, timeout=60) as store:
            assert store.stream("a").save({"x": 1}).version == 1
    finally:
        if not restarted:
            server.restart()
    assert restarted


def test_a_server_with_no_free_connection_slot_is_waited_for() -> None:
    """A connection refused for want of a free slot (here the role's CONNECTION LIMIT) is not refused at
    once like a missing database: open waits, and opens when a slot frees up within the timeout."""
    server = TARGETS.server()
    name = f"limited_{id(object())}"
    TARGETS.admin(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT 1")
    TARGETS.admin(f"CREATE DATABASE {name} OWNER {name}")
    url = f"postgresql://{name}@127.0.0.1:{server.port}/{name}"
    try:
        holder = psycopg.connect(url, autocommit=True)  # the role's only slot
        opened: dict[str, Any] = {}

        def open_store() -> None:
            try:
                opened["store"] = eventckpt.open(url, timeout=60, pool_size=1)
            except Exception as exc:  # noqa: BLE001 - reported below
                opened["error"] = exc

        thread = threading.Thread(target=open_store)
        thread.start()
        time.sleep(1.5)
        assert thread.is_alive() and not opened  # waiting, not refused
        holder.close()
        thread.join(60)
        assert "error" not in opened, opened
        with opened["store"] as store:
            assert store.stream("a").save({"x": 1}).version == 1
    finally:
        TARGETS.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        TARGETS.admin(f"DROP ROLE IF EXISTS {name}")


def test_a_server_whose_slots_stay_taken_is_reported_as_full() -> None:
    """Opening while every connection slot stays taken past the timeout says the server has no free
    connection slot, not that it stayed unreachable."""
    server = TARGETS.server()
    name = f"full_{id(object())}"
    TARGETS.admin(f"CREATE ROLE {name} LOGIN CONNECTION LIMIT 0")
    try:
        with pytest.raises(eventckpt.StoreUnavailableError, match="no free connection slot") as caught:
            eventckpt.open(f"postgresql://{name}@127.0.0.1:{server.port}/postgres", timeout=0.5)
        assert "unreachable for" not in str(caught.value)
    finally:
        TARGETS.admin(f"DROP ROLE IF EXISTS {name}")


def test_a_statement_timeout_is_named_as_such(pg_target: str) -> None:
    """A read cut short by the server's statement_timeout says so, not that other writers kept it waiting."""
    with eventckpt.open(pg_target + "?options=-c%20statement_timeout%3D100") as store:
        with pytest.raises(eventckpt.StoreBusyError, match="statement_timeout") as caught:
            store.sql("SELECT pg_sleep(2)::text")
        assert "other writers" not in str(caught.value)
