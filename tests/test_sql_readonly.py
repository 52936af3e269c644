"""`eventckpt sql` and Store.sql run reads only: every statement that could write the file, create a file,
or change the connection is refused with a clear error before it runs; the store file stays byte for
byte as it was, no file appears beside it, and no -wal/-shm file is left behind that was not there."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner, Result

import eventckpt
from eventckpt.cli import main

WRITES = [
    "INSERT INTO streams (name, created_at) VALUES ('x', 'now')",
    "UPDATE versions SET name = 'x'",
    "DELETE FROM versions",
    "REPLACE INTO history_generation (id, generation) VALUES (1, 99)",
    "INSERT OR REPLACE INTO history_generation VALUES (1, 99)",
    "WITH x AS (SELECT 1) DELETE FROM events",
    "CREATE TABLE t (a)",
    "CREATE TEMP TABLE t (a)",
    "CREATE TABLE t AS SELECT * FROM versions",
    "CREATE INDEX i ON versions(name)",
    "CREATE UNIQUE INDEX i ON streams(created_at)",
    "CREATE VIEW v AS SELECT 1",
    "CREATE TEMP VIEW v AS SELECT 1",
    "CREATE TRIGGER tr AFTER INSERT ON versions BEGIN DELETE FROM events; END",
    "CREATE TEMP TRIGGER tr AFTER INSERT ON versions BEGIN SELECT 1; END",
    "CREATE VIRTUAL TABLE vt USING fts5(a)",
    "DROP TABLE events",
    "DROP TABLE IF EXISTS events",
    "DROP INDEX events_by_path",
    "DROP VIEW checkpoints",
    "DROP TRIGGER metadata_index_insert",
    "ALTER TABLE streams ADD COLUMN x",
    "ALTER TABLE streams RENAME TO s2",
    "ALTER TABLE streams RENAME COLUMN name TO n",
    "ALTER TABLE streams DROP COLUMN removed_head",
    "ATTACH DATABASE 'other.db' AS o",
    "ATTACH ':memory:' AS m",
    "DETACH DATABASE main",
    "VACUUM",
    "VACUUM INTO 'copy.db'",
    "VACUUM main INTO '{elsewhere}'",
    "REINDEX",
    "REINDEX events_by_path",
    "ANALYZE",
    "ANALYZE versions",
    "PRAGMA journal_mode = DELETE",
    "PRAGMA journal_mode = OFF",
    "PRAGMA user_version = 9",
    "PRAGMA application_id = 1",
    "PRAGMA writable_schema = ON",
    "PRAGMA query_only = OFF",
    "PRAGMA foreign_keys = OFF",
    "PRAGMA auto_vacuum = NONE",
    "PRAGMA page_size = 1024",
    "PRAGMA wal_checkpoint(TRUNCATE)",
    "PRAGMA incremental_vacuum",
    "PRAGMA optimize",
    "PRAGMA schema_version = 1",
    "BEGIN",
    "BEGIN IMMEDIATE",
    "COMMIT",
    "SAVEPOINT s",
    "RELEASE s",
    "SELECT load_extension('libnothing')",
    "SELECT 1; DELETE FROM versions",
]

READS = [
    ("SELECT count(*) FROM checkpoints", [(10 + 4,)]),
    ("SELECT count(*) FROM lineage", [(3,)]),
    ("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) SELECT sum(i) FROM n", [(6,)]),
    ("SELECT json_extract(metadata, '$.node') FROM versions WHERE version = 1", [("input",)]),
    ("EXPLAIN QUERY PLAN SELECT * FROM versions WHERE stream_id = 1", None),
    ("PRAGMA journal_mode", [("wal",)]),
    ("PRAGMA user_version", None),
    ("PRAGMA table_info(versions)", None),
    ("SELECT name FROM pragma_table_info('streams') WHERE name = 'removed_head'", [("removed_head",)]),
    ("PRAGMA integrity_check", [("ok",)]),
    ("PRAGMA foreign_key_check", []),
]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def demo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("demo")
    subprocess.run([sys.executable, "-m", "eventckpt", "demo", "agent.db"], cwd=where, check=True, capture_output=True)
    return where / "agent.db"


@pytest.fixture
def demo(demo_file: Path, tmp_path: Path) -> Path:
    """A copy of the demo's store, closed (no -wal/-shm beside it), alone in a directory."""
    shutil.copyfile(demo_file, tmp_path / "agent.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db"]
    return tmp_path / "agent.db"


def sql(where: Path, query: str) -> subprocess.CompletedProcess[str]:
    """`eventckpt sql agent.db QUERY` run as a real process in `where`."""
    return subprocess.run([sys.executable, "-m", "eventckpt", "sql", "agent.db", query], cwd=where,
                          capture_output=True, text=True, timeout=60)


def sql_here(where: Path, query: str) -> Result:
    """The same command run in this process (the CLI code is the same; it is much faster)."""
    return CliRunner().invoke(main, ["sql", str(where / "agent.db"), query])


@pytest.mark.parametrize("query", WRITES)
def test_every_kind_of_write_is_refused(demo: Path, tmp_path_factory: pytest.TempPathFactory, query: str) -> None:
    """A statement that would write, create a file or change the connection exits 1 with one clear line
    (ReadOnlyStoreError naming what was refused); the file is unchanged and nothing new is beside it (or,
    for VACUUM INTO an absolute path, there)."""
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "copy.db"
    query = query.replace("{elsewhere}", str(elsewhere))
    before = digest(demo)
    done = sql(demo.parent, query) if query.startswith(("VACUUM", "PRAGMA journal_mode")) else sql_here(demo.parent, query)
    assert done.exit_code == 1 if isinstance(done, Result) else done.returncode == 1
    assert done.stderr.count("\n") == 1, done.stderr
    assert "ReadOnlyStoreError" in done.stderr and "sql runs read-only queries" in done.stderr and "is not allowed" in done.stderr
    assert digest(demo) == before
    assert sorted(p.name for p in demo.parent.iterdir()) == ["agent.db"]
    assert not elsewhere.exists()


def test_the_refusal_names_the_statement(demo: Path) -> None:
    """The message says what was refused: a writing PRAGMA by name and value, VACUUM through its ATTACH."""
    assert "PRAGMA journal_mode = DELETE is not allowed" in sql(demo.parent, "PRAGMA journal_mode=DELETE").stderr
    assert "ATTACH (and VACUUM, which attaches its target) is not allowed" in sql(demo.parent, "VACUUM INTO 'x.db'").stderr
    assert "the function load_extension() is not allowed" in sql(demo.parent, "SELECT load_extension('x')").stderr
    assert "DELETE versions is not allowed" in sql(demo.parent, "DELETE FROM versions").stderr
    assert "ALTER TABLE streams is not allowed" in sql(demo.parent, "ALTER TABLE streams ADD COLUMN x").stderr


@pytest.mark.parametrize("query,rows", READS, ids=[q for q, _ in READS])
def test_reads_are_allowed(demo: Path, query: str, rows: list | None) -> None:
    """SELECT on tables and views (recursive ones too), JSON functions, EXPLAIN and PRAGMAs that read work,
    through Store.sql and the command, and leave the file as it was with nothing beside it."""
    before = digest(demo)
    with eventckpt.open(demo, create=False) as store:
        columns, got = store.sql(query)
    assert (rows is None or got == rows) and (columns or not got), got
    done = sql_here(demo.parent, query)
    assert done.exit_code == 0, done.stderr
    assert digest(demo) == before and sorted(p.name for p in demo.parent.iterdir()) == ["agent.db"]


def test_wal_files_another_connection_holds_are_left_alone(demo: Path) -> None:
    """While another connection has the store open (its -wal and -shm exist), sql leaves them in place and
    works; refused writes change nothing that connection sees."""
    other = apsw.Connection(str(demo))
    other.execute("SELECT count(*) FROM versions").fetchall()
    try:
        names = sorted(p.name for p in demo.parent.iterdir())
        assert names == ["agent.db", "agent.db-shm", "agent.db-wal"]
        assert sql(demo.parent, "SELECT count(*) FROM versions").stdout.splitlines()[-1].strip() == "11"
        assert sql(demo.parent, "PRAGMA journal_mode = DELETE").returncode == 1
        assert sorted(p.name for p in demo.parent.iterdir()) == names
        assert other.execute("PRAGMA journal_mode").fetchall() == [("wal",)]
    finally:
        other.close()


def test_store_sql_refuses_writes(demo: Path) -> None:
    """Store.sql (what the command runs) raises ReadOnlyStoreError for a write, and the store stays usable."""
    with eventckpt.open(demo, create=False) as store:
        with pytest.raises(eventckpt.ReadOnlyStoreError, match=r"changing the schema \(CREATE, DROP\) is not allowed"):
            store.sql("DROP TABLE events")
        with pytest.raises(eventckpt.InvalidArgumentError):
            store.sql(3)  # type: ignore[arg-type]
        assert store.stream("demo").save({"after": True}).version == 11


def test_one_statement_at_a_time(demo: Path) -> None:
    """Two statements are refused before either runs (as on PostgreSQL), with one clear line; they were run
    and printed under the first one's column names. Comments and semicolons after one statement are fine."""
    two = "SELECT stream AS s FROM stream_heads; SELECT version, input_tokens FROM checkpoints"
    with eventckpt.open(demo, create=False) as store:
        with pytest.raises(eventckpt.InvalidArgumentError, match="one statement at a time"):
            store.sql(two)
        with pytest.raises(eventckpt.InvalidArgumentError, match="one statement at a time"):
            store.sql("SELECT 1;; SELECT 2")
        assert store.sql("SELECT 1 AS one; -- a note") == (["one"], [(1,)])
        assert store.sql("SELECT ';SELECT 2' AS t; /* done */ ;") == (["t"], [(";SELECT 2",)])
    done = sql_here(demo.parent, two)
    assert done.exit_code != 0 and done.stderr.count("\n") == 1 and "one statement at a time" in done.stderr
