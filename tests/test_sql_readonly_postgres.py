"""Store.sql on PostgreSQL runs one read-only statement: a write, a second statement after END or COMMIT,
or a statement that ends the transaction is refused, nothing is written, and nothing a statement sets
(SET, set_config) stays on the connection the store goes on using."""

from __future__ import annotations

import pytest

import eventckpt

from .conftest import journal_rows

REFUSED = [
    "UPDATE streams SET name = 'hacked'",
    "END; UPDATE streams SET name = 'hacked'",
    "COMMIT; DELETE FROM metadata_index",
    "SELECT 1; DELETE FROM metadata_index",
    "COMMIT",
    "ROLLBACK",
    "END",
    "CREATE TEMP TABLE t (a int)",
]
LEFT_NOTHING = [
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
    "SET search_path TO public",
    "SELECT set_config('search_path', 'public', false)",
    "SELECT set_config('default_transaction_read_only', 'on', false)",
    "SET statement_timeout = 1",
]


@pytest.mark.parametrize("query", REFUSED + LEFT_NOTHING)
def test_the_read_only_sql_changes_nothing(pg_target: str, query: str) -> None:
    """Each statement is refused with a typed error or runs without effect; the rows are as they were, and
    the same (single) connection then reads and writes as before."""
    with eventckpt.open(pg_target, pool_size=1) as store:
        store.stream("a").save({"x": 1}, metadata={"k": "v"})
        before = journal_rows(pg_target)
        if query in REFUSED:
            with pytest.raises((eventckpt.ReadOnlyStoreError, eventckpt.InvalidArgumentError)):
                store.sql(query)
        else:
            store.sql(query)
        assert journal_rows(pg_target) == before
        assert store.sql("SELECT name FROM streams") == (["name"], [("a",)])
        assert store.stream("a").save({"x": 2}).version == 2 and store.streams() == ["a"]


def test_a_percent_sign_in_a_literal_is_text(pg_target: str) -> None:
    """A `%` in the caller's SQL is not taken for a placeholder."""
    with eventckpt.open(pg_target) as store:
        store.stream("a%b").save({"x": 1})
        assert store.sql("SELECT name FROM streams WHERE name LIKE 'a%'") == (["name"], [("a%b",)])
