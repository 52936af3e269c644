"""The views of schema/002 make the file readable with plain SQL: lineages, checkpoints (a fork's shared
versions included), events and the history of a path; and an older file gains them on open."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

import eventckpt

VIEWS = ("lineage", "checkpoints", "changes", "path_history", "stream_heads")


@pytest.fixture
def store(db_path: Path) -> Iterator[eventckpt.Store]:
    """These views are the SQLite file's (tests/test_postgres_views.py checks PostgreSQL's)."""
    with eventckpt.open(db_path) as s:
        yield s


def forks_of_forks(store: eventckpt.Store) -> None:
    main = store.stream("main")
    for i in range(1, 6):
        main.save({"n": i, "log": [f"step {j}" for j in range(i)]}, {"input_tokens": 10 * i, "output_tokens": i},
                  name=f"v{i}", metadata={"i": i}, checkpoint_id=f"cp-{i}")
    f1 = main.fork(at=3, task_id="f1")
    f1.save({"n": 40})
    f2 = f1.fork(at=4, task_id="f2")
    f2.save({"n": 50})
    f2.fork(at=3, task_id="f3").save({"n": 30})  # below f2's own versions: its lineage skips f1 and f2


def rows(path: Path, sql: str) -> list[tuple]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_lineage_ranges(store: eventckpt.Store, db_path: Path) -> None:
    """lineage names, root first, which stream stores which versions of each stream's history."""
    forks_of_forks(store)
    got = rows(db_path, "SELECT stream, stored_in, lo, min(hi, 99) FROM lineage WHERE stream IN ('f2', 'f3') ORDER BY stream, lo")
    assert got == [("f2", "main", 1, 3), ("f2", "f1", 4, 4), ("f2", "f2", 5, 99), ("f3", "main", 1, 3), ("f3", "f3", 4, 99)]


def test_checkpoints_view(store: eventckpt.Store, db_path: Path) -> None:
    """One row per checkpoint of each stream's history, with usage columns, fork origin and ids."""
    forks_of_forks(store)
    got = rows(db_path, "SELECT version, name, input_tokens, output_tokens, fork_of, fork_version, stored_in, inherited,"
                        " checkpoint_id, metadata FROM checkpoints WHERE stream = 'f3' ORDER BY version")
    assert got == [
        (1, "v1", 10, 1, "f2", 3, "main", 1, "cp-1", '{"i":1}'),
        (2, "v2", 20, 2, "f2", 3, "main", 1, "cp-2", '{"i":2}'),
        (3, "v3", 30, 3, "f2", 3, "main", 1, "cp-3", '{"i":3}'),
        (4, None, 30, 3, "f2", 3, "f3", 0, None, None),
    ]
    assert rows(db_path, "SELECT count(*) FROM checkpoints WHERE NOT inherited") == rows(db_path, "SELECT count(*) FROM versions")
    assert [r[0] for r in rows(db_path, "SELECT version FROM checkpoints WHERE stream = 'main' ORDER BY version")] == [1, 2, 3, 4, 5]


def test_changes_and_path_history(store: eventckpt.Store, db_path: Path) -> None:
    """changes has one readable row per stored event; path_history follows a stream's lineage."""
    forks_of_forks(store)
    assert rows(db_path, "SELECT count(*) FROM changes") == rows(db_path, "SELECT count(*) FROM events")
    got = rows(db_path, "SELECT stream, version, seq, op, path, value, checkpoint FROM changes WHERE stream = 'main' AND version = 2")
    assert got == [("main", 2, 0, "set", "$.n", "2", "v2"), ("main", 2, 1, "append", "$.log", '"step 1"', "v2")]
    history = rows(db_path, "SELECT version, value, stored_in FROM path_history WHERE stream = 'f3' AND path = '$.n' ORDER BY version")
    assert history == [(1, "1", "main"), (2, "2", "main"), (3, "3", "main"), (4, "30", "f3")]
    below = rows(db_path, "SELECT version, op FROM path_history WHERE stream = 'main' AND path >= '$.log' AND path < '$.log\\'")
    assert sorted(below) == [(1, "set"), (2, "append"), (3, "append"), (4, "append"), (5, "append")]


def test_stream_heads(store: eventckpt.Store, db_path: Path) -> None:
    """stream_heads shows each stream's head, fork origin and last commit."""
    forks_of_forks(store)
    store.stream("main").fork(at=2, task_id="empty")
    got = rows(db_path, "SELECT stream, fork_of, fork_version, head, updated_at IS NOT NULL FROM stream_heads ORDER BY stream")
    assert got == [("empty", "main", 2, 2, 0), ("f1", "main", 3, 4, 1), ("f2", "f1", 4, 5, 1), ("f3", "f2", 3, 4, 1),
                   ("main", None, None, 5, 1)]


def test_views_work_in_the_sqlite3_program(store: eventckpt.Store, db_path: Path) -> None:
    """The stock sqlite3 program (3.40 on Debian 12) reads every view."""
    forks_of_forks(store)
    store.close()
    assert shutil.which("sqlite3"), "the sqlite3 program is missing (.ci/run installs it)"
    for view in VIEWS:
        result = subprocess.run(["sqlite3", str(db_path), f"SELECT count(*) FROM {view}"], capture_output=True, text=True, timeout=60)
        assert result.returncode == 0 and int(result.stdout) > 0, (view, result.stderr)


def test_an_older_file_gains_the_views_and_index(db_path: Path) -> None:
    """A file at schema 1 gets schema 2 on open, with metadata_index filled from existing versions."""
    with eventckpt.open(db_path) as store:
        task = store.stream("old")
        for i in range(4):
            task.save({"i": i}, metadata={"node": "tools" if i % 2 else "agent"})
    first = apsw.Connection(":memory:")
    first.execute(eventckpt.journal.schema_files()[0][2])
    rung_one = {name for (name,) in first.execute("SELECT name FROM sqlite_schema")}
    conn = apsw.Connection(str(db_path))
    with conn:  # everything later rungs added goes: the file is as schema 1 left it
        for kind, name in conn.execute("SELECT type, name FROM sqlite_schema WHERE sql IS NOT NULL"
                                       " ORDER BY type = 'table'").fetchall():
            if name not in rung_one:
                conn.execute(f'DROP {kind.upper()} IF EXISTS "{name}"')
        for table in rung_one:  # and columns later rungs added (005: streams.removed_head)
            old = {r[1] for r in first.execute(f'PRAGMA table_info("{table}")')}
            for column in [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")') if r[1] not in old]:
                conn.execute(f'ALTER TABLE "{table}" DROP COLUMN "{column}"')
        conn.execute("PRAGMA user_version = 1")
    conn.close()
    assert rows(db_path, "SELECT count(*) FROM sqlite_schema WHERE type = 'view'") == [(0,)]
    with eventckpt.open(db_path) as store:
        assert [cp.version for cp in store.search(metadata={"node": "tools"})] == [4, 2]
        assert store.stream("old").log(metadata={"node": "agent"})[0].version == 3
    assert rows(db_path, "PRAGMA user_version") == [(eventckpt.journal.SCHEMA_VERSION,)]
    assert len(rows(db_path, "SELECT * FROM checkpoints")) == 4
