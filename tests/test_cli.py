"""The eventckpt command line: every command works on a real file, prints JSON with --json, is documented
in README.md with an example, and reports errors as one line with a non-zero exit, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw
import orjson
import pytest
from click.testing import CliRunner

import eventckpt
from eventckpt.cli import main

from .conftest import journal_rows

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def run(*args: str, input: bytes | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def demo(tmp_path: Path) -> Path:
    path = tmp_path / "agent.db"
    code, out, err = run("demo", path)
    assert code == 0, err
    return path


def test_every_command_is_documented() -> None:
    """README.md's command-line table has a row for every command, and every --help shows an example."""
    section = README.split("## The command line", 1)[1].split("\n## ", 1)[0]
    for name, command in main.commands.items():
        assert f"| `eventckpt {name} " in section, name
        assert "Example: eventckpt " + name in (command.help or "").replace("\n", " "), name


def test_demo_shows_log_diff_and_fork(tmp_path: Path) -> None:
    """demo runs an agent and prints its log, a diff and a fork."""
    code, out, _ = run("demo", tmp_path / "agent.db")
    assert code == 0 and out.startswith(f"store {tmp_path / 'agent.db'}: stream 'demo', 10 versions")
    assert "log (newest first):" in out and "v10" in out and "'before tool call'" in out
    assert "+ messages[3]" in out and "~ step  2 -> 8" in out and "forked 'demo' at v3 into 'demo-retry'" in out


def test_demo_never_changes_what_is_there(demo: Path) -> None:
    """demo on a store that has its streams writes demo-2 (then demo-3) and leaves every stream there, and
    a user's fork of demo, exactly as it was."""
    with eventckpt.open(demo) as store:
        store.stream("demo").fork(at=5, task_id="mybranch").save({"mine": True})
        store.stream("demo-3-retry").save({"taken": 1})  # demo-3 is taken through its fork's name
    before = journal_rows(demo)
    code, out, err = run("demo", demo)
    assert code == 0 and "stream 'demo-2', 10 versions" in out and "into 'demo-2-retry'" in out, err
    code, out, err = run("demo", demo)
    assert code == 0 and "stream 'demo-4', 10 versions" in out, err
    with eventckpt.open(demo) as store:
        assert store.streams() == ["demo", "demo-retry", "mybranch", "demo-3-retry", "demo-2", "demo-2-retry",
                                   "demo-4", "demo-4-retry"]
        assert store.stream("mybranch").state() == {"mine": True}
        assert store.stream("demo-2").state() == store.stream("demo").state()
    after = journal_rows(demo)
    for table, rows in before.items():  # every row that was there is still there, unchanged
        if table != "sqlite_sequence":  # SQLite's counter of stream ids
            assert set(rows) <= set(after[table]), table


def test_streams_log_search_show(demo: Path) -> None:
    """The reading commands print text, and JSON with --json."""
    code, out, _ = run("streams", demo)
    assert code == 0 and "demo-retry" in out and "demo@3" in out
    streams = orjson.loads(run("streams", demo, "--json")[1])
    assert [(s["stream"], s["head"], s["fork_of"]) for s in streams] == [("demo", 10, None), ("demo-retry", 4, "demo")]
    code, out, _ = run("log", demo, "demo", "-n", "2")
    assert code == 0 and len(out.splitlines()) == 2 and out.startswith("v10")
    entries = orjson.loads(run("log", demo, "demo", "--meta", "node=tools", "--json")[1])
    assert [(e["version"], e["name"], e["metadata"]["step"]) for e in entries] == [(7, "before tool call", 6), (4, "before tool call", 3)]
    assert [e["version"] for e in orjson.loads(run("log", demo, "demo", "--meta", "step=3", "--auto", "--json")[1])] == []
    assert [e["version"] for e in orjson.loads(run("log", demo, "demo-retry", "--before", "3", "--json")[1])] == [2, 1]
    found = orjson.loads(run("search", demo, "--name", "before tool call", "--json")[1])
    assert {(e["stream"], e["version"]) for e in found} == {("demo", 4), ("demo", 7)}
    code, out, _ = run("show", demo, "demo@2")
    assert code == 0 and '"step": 1' in out
    shown = orjson.loads(run("show", demo, "demo-retry", "--json")[1])
    assert shown["version"] == 4 and shown["values"]["plan"] == ["search trains"] and shown["fork_of"]["version"] == 3


def test_diff_and_history(demo: Path) -> None:
    """diff compares two versions (or a fork); history lists a path's changes."""
    code, out, _ = run("diff", demo, "demo@3", "7")
    assert code == 0 and out.splitlines()[0] == "demo@3 -> demo@7: 5 added, 0 removed, 2 changed"
    changes = orjson.loads(run("diff", demo, "demo@3", "demo-retry", "--json")[1])
    assert changes["to"] == {"stream": "demo-retry", "version": 4}
    assert changes["changes"] == [{"kind": "changed", "path": "$.plan[0]", "old": "search flights", "new": "search trains"}]
    code, out, _ = run("history", demo, "demo", "scratch.best_fare")
    assert code == 0 and [line.split()[0] for line in out.splitlines()] == ["v7", "v4"]
    entries = orjson.loads(run("history", demo, "demo", "$.step", "--since", "8", "--json")[1])
    assert [(e["version"], e["op"], e["value"]) for e in entries] == [(9, "set", 8), (8, "set", 7)]


def test_fork_and_rollback(demo: Path) -> None:
    """fork and rollback write through the API and report what they did."""
    code, out, _ = run("fork", demo, "demo@5", "--name", "again")
    assert code == 0 and out.strip() == "forked demo@5 into again"
    assert orjson.loads(run("rollback", demo, "again", "2", "--json")[1]) == {"stream": "again", "version": 6, "rollback_to": 2}
    with eventckpt.open(demo) as store:
        assert store.stream("again").state() == store.stream("demo").state(2)


def test_verify_and_stats(demo: Path) -> None:
    """verify exits 0 on a sound file and 1 with the problems on a damaged one; stats counts."""
    code, out, _ = run("verify", demo)
    assert code == 0 and out.strip().startswith("ok: 2 streams, 11 versions")
    figures = orjson.loads(run("stats", demo, "--json")[1])
    assert (figures["streams"], figures["versions"], figures["events"]) == (2, 11, 26) and figures["file_bytes"] > 0
    assert "event bytes" in run("stats", demo)[1]
    conn = apsw.Connection(str(demo))
    conn.execute("UPDATE events SET value = '7' WHERE version = 7 AND path = '$.step'")  # same size: only the chain shows it
    conn.close()
    code, out, _ = run("verify", demo)
    assert code == 1 and "checksum: demo@7" in out and "1 problems" in out
    report = orjson.loads(run("verify", demo, "--json")[1])
    assert report["ok"] is False and report["problems"][0]["version"] == 7


def test_export_and_import(demo: Path, tmp_path: Path) -> None:
    """export writes JSON Lines; import (from a file or stdin) restores every version."""
    exported = tmp_path / "demo.jsonl"
    assert run("export", demo, "demo", "--forks", "-o", exported)[0] == 0
    code, out, _ = run("import", tmp_path / "copy.db", exported)
    assert code == 0 and out.strip() == "imported 2 streams: demo, demo-retry"
    code, out, _ = run("export", demo, "demo-retry")
    assert code == 0
    assert orjson.loads(run("import", tmp_path / "other.db", "-", "--json", input=out.encode())[1]) == {"streams": ["demo-retry"]}
    with eventckpt.open(demo) as a, eventckpt.open(tmp_path / "copy.db") as b:
        for name in ("demo", "demo-retry"):
            assert [a.stream(name).state(v) for v in range(1, 11 if name == "demo" else 5)] == \
                   [b.stream(name).state(v) for v in range(1, 11 if name == "demo" else 5)]


def test_sql_is_read_only(demo: Path) -> None:
    """sql prints a query's rows and cannot change the file."""
    code, out, _ = run("sql", demo, "SELECT stream, head FROM stream_heads ORDER BY stream")
    assert code == 0 and out.splitlines() == ["stream      head", "demo        10", "demo-retry  4"]
    rows = orjson.loads(run("sql", demo, "SELECT version, checksum FROM versions LIMIT 1", "--json")[1])
    assert rows[0]["version"] == 1 and len(rows[0]["checksum"]) == 32
    before = journal_rows(demo)
    for statement in ("DELETE FROM versions", "DROP VIEW checkpoints", "PRAGMA user_version = 9"):
        code, out, err = run("sql", demo, statement)
        assert code == 1 and err.count("\n") == 1 and "ReadOnlyStoreError" in err, (statement, err)
    assert journal_rows(demo) == before


BAD_CALLS = [
    ("log", "{missing}", "demo"),
    ("log", "{db}", "nobody"),
    ("log", "{db}"),
    ("log", "{db}", "demo", "--meta", "nokey"),
    ("show", "{db}", "demo@99"),
    ("diff", "{db}", "demo@2", "nobody@1"),
    ("history", "{db}", "demo", "a..[b"),
    ("fork", "{db}", "demo@1", "--name", "demo-retry"),
    ("rollback", "{db}", "demo", "77"),
    ("sql", "{db}", "SELEKT 1"),
    ("export", "{db}", "nobody"),
    ("import", "{db}", "{garbage}"),
    ("verify", "{text}"),
    ("explode", "{db}"),
]


@pytest.mark.parametrize("args", BAD_CALLS, ids=[" ".join(a[:1] + a[2:]) for a in BAD_CALLS])
def test_errors_are_one_line(demo: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    """A bad call prints one line on stderr, exits non-zero, and writes nothing."""
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"eventckpt": "export", "format": 1}\n{"stream": "demo", "parent": null}\n')
    text = tmp_path / "notes.txt"
    text.write_text("not a database " * 100)
    names = {"db": demo, "missing": tmp_path / "missing.db", "garbage": garbage, "text": text}
    before = journal_rows(demo)
    code, out, err = run(*(a.format(**names) for a in args))
    assert code != 0 and err.startswith("Error: ") and err.count("\n") == 1, err
    assert "Traceback" not in out + err
    assert journal_rows(demo) == before


def test_real_process_entry_point(demo: Path, tmp_path: Path) -> None:
    """python -m eventckpt runs the same CLI; its errors are one line without a traceback."""
    ok = subprocess.run([sys.executable, "-m", "eventckpt", "log", str(demo), "demo", "-n", "1"], capture_output=True, text=True)
    assert ok.returncode == 0 and ok.stdout.startswith("v10")
    bad = subprocess.run([sys.executable, "-m", "eventckpt", "show", str(demo), "nobody"], capture_output=True, text=True)
    assert bad.returncode == 1 and bad.stderr == "Error: StreamNotFoundError: stream 'nobody' does not exist\n"
