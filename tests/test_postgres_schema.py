"""The PostgreSQL layout distributes by stream tree: per-tree tables are keyed by tree_id first, their
foreign keys stay within a tree, nothing locks a table or the store, and the statements of one stream's
work (save, restore, log, history, diff, fork, rollback, prune) each name their tree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

import eventckpt

ROOT = Path(__file__).resolve().parent.parent
# Looked up by a name, or one row: documented as reference tables (or keyed by LangGraph's thread id).
DIRECTORIES = {"store_info", "trees", "stream_names", "langgraph_threads", "langgraph_writes"}
PER_TREE = {"streams", "versions", "events", "snapshots", "checkpoint_ids", "tool_calls", "metadata_index",
            "langgraph_moved"}


def _catalog(target: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(target, autocommit=True) as conn:
        return conn.execute(sql).fetchall()


def test_every_per_tree_key_starts_with_tree_id(pg_target: str) -> None:
    """Every table is a per-tree table or a documented directory; every primary key, unique constraint and
    unique index of a per-tree table starts with tree_id, and its foreign keys carry tree_id."""
    eventckpt.open(pg_target).close()
    tables = {t for (t,) in _catalog(pg_target, "SELECT tablename FROM pg_tables WHERE schemaname = 'eventckpt'")}
    assert tables == PER_TREE | DIRECTORIES
    keys = _catalog(pg_target, """
        SELECT c.relname, i.indexrelid::regclass::text, i.indisprimary,
               (SELECT array_agg(a.attname ORDER BY k.n) FROM unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                JOIN pg_attribute AS a ON a.attrelid = i.indrelid AND a.attnum = k.attnum)
        FROM pg_index AS i JOIN pg_class AS c ON c.oid = i.indrelid
        JOIN pg_namespace AS s ON s.oid = c.relnamespace
        WHERE s.nspname = 'eventckpt' AND (i.indisunique OR i.indisprimary)""")
    checked = 0
    for table, index, primary, columns in keys:
        if table in PER_TREE:
            assert columns and columns[0] == "tree_id", (table, index, columns)
            checked += primary
    assert checked == len(PER_TREE)
    foreign = _catalog(pg_target, """
        SELECT c.conrelid::regclass::text, c.conname,
               (SELECT array_agg(a.attname) FROM unnest(c.conkey) AS k(attnum)
                JOIN pg_attribute AS a ON a.attrelid = c.conrelid AND a.attnum = k.attnum)
        FROM pg_constraint AS c JOIN pg_namespace AS s ON s.oid = c.connamespace
        WHERE s.nspname = 'eventckpt' AND c.contype = 'f'""")
    assert foreign
    for table, name, columns in foreign:
        assert "tree_id" in columns, (table, name, columns)


def test_no_locks_beyond_rows_and_no_write_sequence() -> None:
    """Neither the schema nor the PostgreSQL journal takes a table lock or an advisory lock (it only
    releases one a caller's SQL took), and the only sequence allocates stream ids (nothing numbers writes
    store-wide)."""
    texts = [p.read_text() for p in [*(ROOT / "schema" / "postgresql").glob("*.sql"),
                                     *(ROOT / "eventckpt" / "journal" / "postgres").glob("*.py")]]
    joined = "\n".join(texts)
    assert not re.search(r"pg_advisory(?!_unlock)|pg_try_advisory|LOCK\s+TABLE", joined, re.I)
    assert re.findall(r"CREATE SEQUENCE ([\w.]+)", joined) == ["eventckpt.stream_ids"]


def test_a_streams_statements_name_its_tree(pg_target: str) -> None:
    """Every statement that a save, transaction, restore, log, history, diff, fork, rollback and prune send
    to a per-tree table names tree_id (recorded from the connections of a pool we give the store)."""
    seen: list[str] = []

    class Recording(psycopg.Cursor):  # type: ignore[type-arg]
        def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
            seen.append(str(query if isinstance(query, str) else query.as_string(self)))
            return super().execute(query, params, **kwargs)

    eventckpt.open(pg_target).close()  # the schema first: its DDL is not a stream's work
    pool = ConnectionPool(pg_target, min_size=1, max_size=2, kwargs={"autocommit": True,
                                                                    "cursor_factory": Recording}, open=True)
    try:
        with eventckpt.open(pool, snapshots=eventckpt.SnapshotPolicy(min_tail_bytes=0)) as store:
            store.stream("other").save({"x": 1})
            seen.clear()  # what follows is one tree's work
            task = store.stream("task")
            for step in range(12):
                task.save({"messages": [{"role": "user", "content": str(i)} for i in range(step + 1)],
                           "step": step}, metadata={"node": "agent"})
            with task.transaction(name="tx") as tx:
                tx.set("scratch", {"a": 1})
            task.state(3), task.state(), task.log(), task.history("step"), task.diff(2, 9)
            branch = task.fork(at=5, task_id="branch")
            branch.save({**branch.state(), "step": 99})
            branch.diff(5, ("task", 9))
            task.rollback(4)
            task.prune(keep_last=5)
            task.state(12)
    finally:
        pool.close()
    per_tree = re.compile(r"eventckpt\.(" + "|".join(sorted(PER_TREE)) + r")\b")
    touching = [q for q in seen if per_tree.search(q)]
    assert len(touching) > 20
    missing = [q for q in touching if "tree_id" not in q]
    assert not missing, missing
