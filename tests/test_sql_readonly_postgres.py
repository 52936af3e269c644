"""Store.sql on PostgreSQL runs one statement that returns rows, so that nothing changes: a write, a
second statement after END or COMMIT, a command that is no query (COPY, ANALYZE, CHECKPOINT, NOTIFY, DO,
PREPARE, SET), a function that needs more than reading (even for a superuser, even after set_config('role',
...)) and a session advisory lock are refused, nothing is written, and nothing stays on the connection the
store goes on using."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest

import eventckpt

from .conftest import journal_rows
from .engines import TARGETS

# Written by the server (as its own user) if COPY TO PROGRAM or COPY TO a file ever ran.
WITNESS = os.path.join(tempfile.gettempdir(), f"eventckpt-sql-witness-{uuid.uuid4().hex}")

REFUSED = [
    "UPDATE streams SET name = 'hacked'",
    "UPDATE streams SET name = 'hacked' RETURNING name",
    "WITH gone AS (DELETE FROM metadata_index RETURNING 1) SELECT count(*) FROM gone",
    "SELECT * INTO stolen FROM streams",
    "SELECT * FROM streams FOR UPDATE",
    "SELECT nextval('stream_ids')",
    "END; UPDATE streams SET name = 'hacked'",
    "COMMIT; DELETE FROM metadata_index",
    "SELECT 1; DELETE FROM metadata_index",
    "COMMIT",
    "ROLLBACK",
    "END",
    "CREATE TEMP TABLE t (a int)",
    f"COPY (SELECT 'written') TO PROGRAM 'cat > {WITNESS}'",
    f"COPY streams TO '{WITNESS}'",
    "COPY streams TO STDOUT",
    "ANALYZE versions",
    "CHECKPOINT",
    "NOTIFY eventckpt_test",
    "LISTEN eventckpt_test",
    "DO $$ BEGIN PERFORM pg_advisory_lock(4242); END $$",
    "PREPARE leaked AS SELECT 1",
    "DISCARD ALL",
    "LOCK TABLE streams",
    "SET search_path TO public",
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
    "SET statement_timeout = 1",
    "SELECT lo_import('/etc/hostname')",
    "SELECT pg_read_file('/etc/hostname')",
    "SELECT pg_reload_conf()",
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename IS NOT NULL AND pid <> pg_backend_pid()",
    "SELECT set_config('role', 'none', true), query_to_xml('SELECT pg_reload_conf()', false, false, '')",
    "SELECT set_config('session_authorization', current_user::text, true)",
    "SELECT pg_try_advisory_lock(4242)",
    "SELECT pg_advisory_lock(4242)::text, pg_advisory_lock_shared(-7, 9)::text",
    "SELECT pg_advisory_lock(4242)",
]
LEFT_NOTHING = [
    "SELECT set_config('search_path', 'public', false)",
    "SELECT set_config('default_transaction_read_only', 'on', false)",
    "SELECT pg_notify('eventckpt_test', 'x')::text",
    "SELECT pg_advisory_xact_lock(4242)::text",
]


@pytest.mark.parametrize("query", REFUSED + LEFT_NOTHING)
def test_the_read_only_sql_changes_nothing(pg_target: str, query: str) -> None:
    """Each statement is refused with a typed error (one line) or runs without effect; the rows are as they
    were, no file was written, no lock or prepared statement stays, and the same (single) connection then
    reads and writes as before."""
    with eventckpt.open(pg_target, pool_size=1) as store, psycopg.connect(pg_target, autocommit=True) as other:
        store.stream("a").save({"x": 1}, metadata={"k": "v"})
        before = journal_rows(pg_target)
        if query in REFUSED:
            with pytest.raises((eventckpt.ReadOnlyStoreError, eventckpt.InvalidArgumentError)) as refused:
                store.sql(query)
            assert "\n" not in str(refused.value)
        else:
            store.sql(query)
        assert journal_rows(pg_target) == before
        assert not os.path.exists(WITNESS)
        assert other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone() == (0,)
        assert store.sql("SELECT name FROM pg_prepared_statements WHERE NOT name LIKE '\\_pg3\\_%'"
                         " UNION ALL SELECT * FROM pg_listening_channels()") == (["name"], [])
        assert store.sql("SELECT name FROM streams") == (["name"], [("a",)])
        assert store.sql("SELECT current_user = session_user, current_setting('transaction_read_only')") == (
            ["?column?", "current_setting"], [(False, "on")])  # still the reader's role, still read-only
        assert store.stream("a").save({"x": 2}).version == 2 and store.streams() == ["a"]


def test_queries_explain_and_show_answer_with_their_types(pg_target: str) -> None:
    """A query over the views returns typed values under the statement's own column names; VALUES, TABLE,
    EXPLAIN (any format) and SHOW answer too."""
    with eventckpt.open(pg_target) as store:
        store.stream("a").save({"x": 1}, metadata={"node": "agent"}, token_usage={"input_tokens": 3})
        columns, rows = store.sql("SELECT stream, version, input_tokens, metadata ->> 'node' AS node, 1.50::numeric(4, 2)"
                                  " AS n, ARRAY[1, 2] AS a, created_at FROM checkpoints")
        assert columns == ["stream", "version", "input_tokens", "node", "n", "a", "created_at"]
        assert rows[0][:6] == ("a", 1, Decimal(3), "agent", Decimal("1.50"), [1, 2]) and rows[0][6].tzinfo
        assert store.sql("VALUES (1, 'x')") == (["column1", "column2"], [(1, "x")])
        assert store.sql("TABLE stream_heads")[1][0][:3] == ("a", None, None)
        assert store.sql("EXPLAIN SELECT * FROM streams")[0] == ["QUERY PLAN"]
        assert isinstance(store.sql("EXPLAIN (FORMAT JSON) SELECT * FROM streams")[1][0][0], list)
        assert store.sql("SHOW transaction_read_only") == (["transaction_read_only"], [("on",)])
        assert store.sql("SELECT pg_sleep(0)::text") == (["pg_sleep"], [("",)])


def test_a_percent_sign_in_a_literal_is_text(pg_target: str) -> None:
    """A `%` in the caller's SQL is not taken for a placeholder."""
    with eventckpt.open(pg_target) as store:
        store.stream("a%b").save({"x": 1})
        assert store.sql("SELECT name FROM streams WHERE name LIKE 'a%'") == (["name"], [("a%b",)])


def test_mistakes_are_invalid_arguments_on_one_line(pg_target: str) -> None:
    """A statement that does not parse, names what does not exist, or returns a void column is an
    InvalidArgumentError saying where, on one line; nothing ran."""
    with eventckpt.open(pg_target) as store:
        for query, says in [("SELEC 1", 'syntax error at or near "SELEC" (at character 1)'),
                            ("SELECT * FROM nosuch", 'relation "nosuch" does not exist (at character 15)'),
                            ("SELECT pg_sleep(0)", "column 'pg_sleep' is void")]:
            with pytest.raises(eventckpt.InvalidArgumentError) as info:
                store.sql(query)
            assert says in str(info.value) and "\n" not in str(info.value)


def test_a_callers_own_advisory_lock_is_kept(pg_target: str) -> None:
    """On a connection the caller gave, holding its own session advisory lock, a statement that takes
    another is refused and only the statement's lock is released."""
    with psycopg.connect(pg_target, autocommit=True) as conn, psycopg.connect(pg_target, autocommit=True) as other:
        conn.execute("SELECT pg_advisory_lock(7)")
        with eventckpt.open(conn) as store:
            with pytest.raises(eventckpt.ReadOnlyStoreError, match="advisory lock"):
                store.sql("SELECT pg_try_advisory_lock(8), pg_try_advisory_lock(8), pg_try_advisory_lock(7)")
        held = other.execute("SELECT objid, pid FROM pg_locks WHERE locktype = 'advisory'").fetchall()
        assert held == [(7, conn.info.backend_pid)]


def role_url(role: str, database: str) -> str:
    return f"postgresql://{role}@127.0.0.1:{TARGETS.server().port}/{database}"


def test_a_failing_statement_leaves_no_lock_either(pg_target: str) -> None:
    """A statement that takes session advisory locks and then fails reports its own error, and the locks
    are gone."""
    with eventckpt.open(pg_target, pool_size=1) as store, psycopg.connect(pg_target, autocommit=True) as other:
        with pytest.raises(eventckpt.StorageError, match="division by zero"):
            store.sql("SELECT pg_advisory_lock(-4242)::text, pg_advisory_lock_shared(1, -2)::text,"
                      " 1 / (random() > 2)::int")  # volatile: divides (by zero) after the locks, not at planning
        assert other.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'").fetchone() == (0,)


@pytest.fixture
def app_role() -> Iterator[str]:
    """A login role that is no superuser, owning a database of its own (named as the role)."""
    name = f"app_{uuid.uuid4().hex[:12]}"
    TARGETS.admin(f"CREATE ROLE {name} LOGIN")
    TARGETS.admin(f"CREATE DATABASE {name} OWNER {name}")
    yield name
    TARGETS.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    TARGETS.admin(f"DROP ROLE IF EXISTS {name}")


def test_a_non_superusers_store_runs_sql_with_its_own_rights(app_role: str) -> None:
    """A store created by a role that is no superuser reads through the function that role owns (its own
    rights): reads work, and writes, COPY and SET ROLE stay refused. Another role, which may not run that
    function, reads with its own rights, and is refused the same."""
    url = role_url(app_role, app_role)
    with eventckpt.open(url) as store:
        store.stream("a").save({"x": 1})
        assert store.sql("SELECT name, current_user::text FROM streams") == (["name", "current_user"], [("a", app_role)])
    reader = f"{app_role}_reader"
    TARGETS.admin(f"CREATE ROLE {reader} LOGIN")
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"GRANT USAGE ON SCHEMA eventckpt TO {reader}")
            conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA eventckpt TO {reader}")
        before = journal_rows(url)
        for who in (app_role, reader):
            with eventckpt.open(role_url(who, app_role), readonly=True) as store:
                assert store.sql("SELECT name, current_user::text FROM streams") == (["name", "current_user"], [("a", who)])
                for query in ("UPDATE streams SET name = 'b' RETURNING name", "COPY streams TO STDOUT",
                              "SELECT set_config('role', 'none', true)" if who == app_role else "SET ROLE NONE"):
                    with pytest.raises(eventckpt.ReadOnlyStoreError):
                        store.sql(query)
        assert journal_rows(url) == before
    finally:
        with psycopg.connect(TARGETS.server().url(app_role), autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {reader}")
        TARGETS.admin(f"DROP ROLE {reader}")


def test_a_superusers_sql_never_runs_with_its_own_rights() -> None:
    """Without the reader function (a store whose function was dropped), a superuser's SQL is refused
    rather than run with a superuser's powers."""
    target = TARGETS.take("postgresql")
    try:
        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("DROP FUNCTION eventckpt.read_only_sql(text)")
        with eventckpt.open(target) as store:
            with pytest.raises(eventckpt.ReadOnlyStoreError, match="superuser"):
                store.sql("SELECT 1")
    finally:
        TARGETS.give_back(target, reuse=False)
