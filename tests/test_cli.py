"""The eventckpt command line: every command works on a real file, prints JSON with --json, is documented
in README.md with an example, and reports errors as one line with a non-zero exit, never a traceback."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import apsw
import orjson
import pytest
from click.testing import CliRunner

import eventckpt
from eventckpt.cli import main

from .conftest import run_cli_example, journal_rows

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


def test_values_json_cannot_hold_print_for_people(tmp_path: Path) -> None:
    """diff, history and log print big ints, bytes, decimals and dicts with number keys as their repr
    (not as quoted text, and without failing); JSON data stays JSON."""
    import decimal

    path = tmp_path / "v.db"
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"big": 2**64, "nk": {1: "a"}, "b": b"hi", "d": decimal.Decimal("1.0"), "s": "x"}, metadata={"n": 2**70})
        task.save({"big": 2**64 + 1, "nk": {1: "b"}, "b": b"ho", "d": decimal.Decimal("1.00"), "s": "y"})
    code, out, err = run("diff", path, "t@1", "t@2")
    assert code == 0 and not err, err
    assert out.splitlines()[1:] == ["~ b  b'hi' -> b'ho'", "~ big  18446744073709551616 -> 18446744073709551617",
                                    "~ d  Decimal('1.0') -> Decimal('1.00')", "~ nk  {1: 'a'} -> {1: 'b'}", '~ s  "x" -> "y"']
    code, out, _ = run("history", path, "t", "nk")
    assert code == 0 and [line.split()[-2:] for line in out.splitlines()] == [["{1:", "'b'}"], ["{1:", "'a'}"]]
    code, out, _ = run("log", path, "t")
    assert code == 0 and out.splitlines()[1].endswith("n=1180591620717411303424")



def test_meta_filters_keep_big_ints_exact(tmp_path: Path) -> None:
    """--meta n=2**70 matches the checkpoint whose n is that int, not one whose n is the float it rounds to."""
    path = tmp_path / "m.db"
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"a": 1}, metadata={"n": 2**70})
        task.save({"a": 2}, metadata={"n": float(2**70)})
        task.save({"a": 3}, metadata={"n": [2**70 + 1]})
    for meta, versions in ((f"n={2**70}", [1]), (f"n={float(2**70)!r}", [2]), (f"n=[{2**70 + 1}]", [3]),
                           ("n=1e400", []), ("n=NaN", [])):
        code, out, err = run("log", path, "t", "--meta", meta, "--json")
        assert code == 0, err
        assert [e["version"] for e in orjson.loads(out)] == versions, meta
        code, out, err = run("search", path, "--meta", meta, "--json")
        assert [e["version"] for e in orjson.loads(out)] == versions, meta


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
    ("show", "{db}", "demo@-1"),
    ("show", "{db}", "demo@3.0"),
    ("show", "{db}", "demo@"),
    ("show", "{db}", "demo@x3"),
    ("diff", "{db}", "demo@3", "v50"),
    ("diff", "{db}", "nosuch"),
    ("diff", "{db}", "demo@3", "nosuch"),
    ("diff", "{db}", "demo@0"),
    ("rollback", "{db}", "nosuch", "1"),
    ("fork", "{db}", "demo@1", "--name", "x@5"),
    ("fork", "{db}", "demo@1", "--name", "x@v5"),
    ("history", "{db}", "demo", "scratch..k"),
    ("history", "{db}", "demo", "$."),
    ("history", "{db}", "demo", ""),
    ("history", "{db}", "demo", "messages.3"),
    ("history", "{db}", "demo", "messages[3"),
    ("history", "{db}", "demo", '"a.b'),
    ("history", "{db}", "nosuch", "step"),
    ("import", "{db}", "{cut}"),
]


@pytest.mark.parametrize("args", BAD_CALLS, ids=[" ".join(a[:1] + a[2:]) for a in BAD_CALLS])
def test_errors_are_one_line(demo: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    """A bad call prints one line on stderr, exits non-zero, and writes nothing."""
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"eventckpt": "export", "format": 1}\n{"stream": "demo", "parent": null}\n')
    text = tmp_path / "notes.txt"
    text.write_text("not a database " * 100)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(run("export", demo, "demo", "--forks")[1].splitlines(keepends=True)[:5]))
    names = {"db": demo, "missing": tmp_path / "missing.db", "garbage": garbage, "text": text, "cut": cut}
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


MESSAGES = [
    (("show", "demo@-1"), "InvalidArgumentError: invalid version 'demo@-1': a version is a whole number such as 3 or v3"),
    (("show", "demo@3.0"), "invalid version 'demo@3.0'"),
    (("show", "demo@"), "invalid version 'demo@'"),
    (("show", "nosuch@x.com"), "StreamNotFoundError: stream 'nosuch@x.com' does not exist"),
    (("diff", "demo@3", "v50"), "VersionNotFoundError: stream 'demo' has no version 50 (head is 10)"),
    (("diff", "nosuch"), "StreamNotFoundError: stream 'nosuch' does not exist"),
    (("diff", "demo@3", "nosuch@2"), "StreamNotFoundError: stream 'nosuch' does not exist"),
    (("rollback", "nosuch", "1"), "StreamNotFoundError: stream 'nosuch' does not exist"),
    (("fork", "demo@1", "--name", "x@5"), "invalid task_id 'x@5': a new stream name cannot end in '@' and a number"),
    (("history", "demo", "messages.3"), "PathError: invalid path 'messages.3': malformed at '.3'"),
    (("history", "demo", "scratch..k"), "PathError: invalid path 'scratch..k': malformed at '..k'"),
    (("history", "demo", ""), "PathError: invalid path '': an empty path"),
]


@pytest.mark.parametrize("args,message", MESSAGES, ids=[" ".join(a) for a, _ in MESSAGES])
def test_errors_say_what_is_wrong(demo: Path, args: tuple[str, ...], message: str) -> None:
    """A missing stream or version, a malformed version or path, and a name STREAM@VERSION cannot address
    each get an error that names them (not an empty answer, not a misleading one)."""
    code, _, err = run(args[0], demo, *args[1:])
    assert code == 1 and message in err, err


def test_versions_as_the_log_prints_them(demo: Path) -> None:
    """STREAM@vN is STREAM@N, in show, diff (both sides) and fork; a bare vN is a version of the first stream."""
    assert run("show", demo, "demo@v3", "--json")[1] == run("show", demo, "demo@3", "--json")[1]
    assert run("diff", demo, "demo@v3", "v7")[1] == run("diff", demo, "demo@3", "7")[1]
    assert run("diff", demo, "demo@3", "demo-retry@v4", "--json")[1] == run("diff", demo, "demo@3", "demo-retry@4", "--json")[1]
    assert run("fork", demo, "demo@v2", "--name", "two")[1].strip() == "forked demo@2 into two"


def test_names_holding_at_stay_addressable(demo: Path) -> None:
    """A stream named like an e-mail address is created, shown at its head and at a version; a legacy name
    ending in @N (written before such names were refused) is shown at its head, and its versions with @N."""
    assert run("fork", demo, "demo@3", "--name", "user@example.com")[0] == 0
    assert orjson.loads(run("show", demo, "user@example.com", "--json")[1])["version"] == 3
    assert orjson.loads(run("show", demo, "user@example.com@2", "--json")[1])["values"]["step"] == 1
    conn = apsw.Connection(str(demo))  # a name an older eventckpt let through
    conn.execute("UPDATE streams SET name = 'x@5' WHERE name = 'user@example.com'")
    conn.close()
    assert orjson.loads(run("show", demo, "x@5", "--json")[1])["stream"] == "x@5"
    assert orjson.loads(run("show", demo, "x@5@2", "--json")[1])["version"] == 2


def test_history_says_when_nothing_changed(demo: Path) -> None:
    """history prints "no changes" when a path never changed (and [] with --json); an appended item's
    history is the append that created it."""
    code, out, _ = run("history", demo, "demo", "scratch.nothing")
    assert code == 0 and out == "no changes of scratch.nothing in demo\n"
    assert orjson.loads(run("history", demo, "demo", "scratch.nothing", "--json")[1]) == []
    entries = orjson.loads(run("history", demo, "demo", "messages[3]", "--json")[1])
    assert [(e["version"], e["op"], e["path"]) for e in entries] == [(4, "append", "$.messages")]
    assert entries[0]["value"]["content"] == "Step 3: calling search_flights(LIS)"


READ_COMMANDS = [("streams",), ("verify",), ("stats",), ("log", "demo"), ("show", "demo"), ("history", "demo", "step"),
                 ("diff", "demo@1"), ("search", "--name", "x"), ("export", "demo"), ("sql", "SELECT 1"),
                 ("fork", "demo"), ("rollback", "demo", "1")]


@pytest.mark.parametrize("args", READ_COMMANDS, ids=[a[0] for a in READ_COMMANDS])
def test_commands_on_an_empty_or_missing_file_change_nothing(tmp_path: Path, args: tuple[str, ...]) -> None:
    """Every command but demo and import, given an empty (0-byte) file, fails with StoreNotFoundError and
    leaves it 0 bytes, with no -wal/-shm beside it; a missing file stays missing, with StoreNotFoundError and
    exit status 1 too (not click's "does not exist" usage error, exit status 2)."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    code, _, err = run(args[0], empty, *args[1:])
    assert code == 1 and "StoreNotFoundError" in err and "empty" in err, err
    assert empty.stat().st_size == 0 and sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"]
    code, _, err = run(args[0], tmp_path / "missing.db", *args[1:])
    assert code == 1 and err.startswith("Error: StoreNotFoundError: ") and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.db"], err


def test_a_failed_import_leaves_no_store_behind(demo: Path, tmp_path: Path) -> None:
    """An import that fails (cut short, header only) into a new path leaves no file there, and into an
    empty file leaves it empty; the same lines whole import fine."""
    lines = run("export", demo, "demo", "--forks")[1].splitlines(keepends=True)
    assert len(lines) == 15 and orjson.loads(lines[-1])["eventckpt"] == "end"
    (tmp_path / "empty.db").write_bytes(b"")
    for cut in (lines[:5], lines[:1], lines[:-1]):
        source = tmp_path / "cut.jsonl"
        source.write_text("".join(cut))
        code, _, err = run("import", tmp_path / "new.db", source)
        assert code == 1 and "cut short" in err, err
        assert not (tmp_path / "new.db").exists()
        assert run("import", tmp_path / "empty.db", source)[0] == 1 and (tmp_path / "empty.db").stat().st_size == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db", "cut.jsonl", "empty.db"]
    code, out, _ = run("import", tmp_path / "new.db", "-", input="".join(lines).encode())
    assert code == 0 and out.strip() == "imported 2 streams: demo, demo-retry"


def test_stats_reports_the_wal_apart(demo: Path) -> None:
    """stats' file_bytes is the store file alone; the write-ahead log is wal_bytes."""
    with eventckpt.open(demo) as store:  # keep a connection open so the WAL is not folded in at close
        for i in range(50):
            store.stream("big").save({"blob": "x" * 20_000, "i": i})
        figures = orjson.loads(run("stats", demo, "--json")[1])
        wal = Path(str(demo) + "-wal").stat().st_size
        assert wal > 0 and figures["wal_bytes"] == wal
        assert figures["file_bytes"] == demo.stat().st_size


def table_examples() -> list[str]:
    section = README.split("## The command line", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `(eventckpt [^`]*)` \|", section, re.M)


def test_the_readme_table_and_help_examples_work_on_the_demo_file(tmp_path: Path) -> None:
    """Every example of README's command table (the same as the commands' --help examples) runs in order,
    as a real process, on the file `eventckpt demo agent.db` writes, and exits 0."""
    examples = table_examples()
    assert len(examples) == len(main.commands) and examples[0] == "eventckpt demo agent.db"
    helps = {re.search(r"Example: (eventckpt .*)", " ".join((c.help or "").split())).group(1) for c in main.commands.values()}
    assert helps == set(examples)
    for command in ["eventckpt demo agent.db"] + examples:
        status, err = run_cli_example(command, tmp_path)
        assert status == 0, (command, err)


def test_a_store_saved_with_nan_is_shown(tmp_path: Path) -> None:
    """NaN and infinities a program stored with allow_nan=True are shown and diffed (not a failure)."""
    path = tmp_path / "n.db"
    with eventckpt.open(path, allow_nan=True) as store:
        store.stream("n").save({"x": float("nan"), "y": [float("inf")]})
        store.stream("n").save({"x": 1.0, "y": [float("inf")]})
    code, out, err = run("show", path, "n@1")
    assert code == 0 and not err and "NaN" in out.replace("nan", "NaN"), err
    code, out, err = run("diff", path, "n@1", "n@2")
    assert code == 0 and out.splitlines()[1:] == ["~ x  nan -> 1.0"], (out, err)


def test_human_output_shows_a_change_of_type(tmp_path: Path) -> None:
    """diff and history for people show a value JSON would make look like another (a tuple, a datetime, a UUID,
    a dict with number keys) as its repr, so a real change never prints as the same text on both sides."""
    import datetime as dt
    import uuid

    path = tmp_path / "t.db"
    ident = uuid.UUID(int=1)
    with eventckpt.open(path) as store:
        store.stream("t").save({"x": [1, 2], "when": "2024-01-01T00:00:00", "id": str(ident), "m": {"1": "a"}})
        store.stream("t").save({"x": (1, 2), "when": dt.datetime(2024, 1, 1), "id": ident, "m": {1: "a"}})
    code, out, err = run("diff", path, "t@1", "2")
    assert code == 0 and not err
    assert out.splitlines()[1:] == [
        "~ id  \"00000000-0000-0000-0000-000000000001\" -> UUID('00000000-0000-0000-0000-000000000001')",
        "~ m  {\"1\":\"a\"} -> {1: 'a'}",
        "~ when  \"2024-01-01T00:00:00\" -> datetime.datetime(2024, 1, 1, 0, 0)",
        "~ x  [1,2] -> (1, 2)",
    ]
    code, out, err = run("history", path, "t", "x")
    assert code == 0 and [line.split(None, 5)[5] for line in out.splitlines()] == ["(1, 2)", "[1,2]"]


def _older_store(path: Path, rung: int = 5) -> None:
    """A store as an earlier eventckpt left it: the schema ladder up to `rung`, in WAL mode."""
    from eventckpt.journal import APPLICATION_ID, schema_files

    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL").fetchall()
    for number, _, sql in schema_files():
        if number <= rung:
            conn.execute(sql)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {rung}")
    conn.close()


@pytest.mark.parametrize("command", [["streams"], ["stats"], ["verify"], ["sql", "SELECT count(*) FROM streams"],
                                     ["log", "demo"], ["show", "demo"]])
def test_read_commands_never_upgrade_an_older_store(tmp_path: Path, command: list[str]) -> None:
    """A command that only reads refuses a store from an earlier eventckpt with OlderSchemaError, naming
    `eventckpt upgrade`, and leaves its bytes as they were (a writable open would have upgraded it)."""
    path = tmp_path / "old.db"
    _older_store(path)
    before = path.read_bytes()
    code, out, err = run(command[0], path, *command[1:])
    assert code == 1 and out == ""
    assert err.startswith("Error: OlderSchemaError: ") and "schema version 5" in err and "eventckpt upgrade" in err
    assert err.count("\n") == 1
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.db"]


def test_upgrade_brings_an_older_store_to_the_current_schema(tmp_path: Path) -> None:
    """`upgrade` applies the schema ladder to a store from an earlier eventckpt; the read commands then read
    it, and running it again changes nothing."""
    from eventckpt.journal import SCHEMA_VERSION

    path = tmp_path / "old.db"
    _older_store(path)
    code, out, err = run("upgrade", path, "--json")
    assert code == 0, err
    assert orjson.loads(out) == {"store": str(path), "schema_version": SCHEMA_VERSION}
    assert run("streams", path)[0] == 0
    rows = journal_rows(path)
    code, out, _ = run("upgrade", path)
    assert code == 0 and out == f"{path}: schema version {SCHEMA_VERSION}, this eventckpt's\n"
    assert journal_rows(path) == rows


def test_read_commands_leave_a_rollback_journal_backup_as_it_is(demo: Path, tmp_path: Path) -> None:
    """Reading a backup made with `VACUUM INTO` (a rollback-journal file, not WAL) leaves its bytes alone:
    a writable open would have switched it to WAL mode."""
    backup = tmp_path / "backup.db"
    conn = apsw.Connection(str(demo))
    conn.execute(f"VACUUM INTO '{backup}'")
    conn.close()
    before = backup.read_bytes()
    for command in (["streams"], ["log", "demo"], ["show", "demo@3"], ["verify"], ["stats"], ["export", "demo"]):
        code, _, err = run(command[0], backup, *command[1:])
        assert code == 0, (command, err)
    assert backup.read_bytes() == before


def test_writing_commands_still_write(demo: Path) -> None:
    """fork and rollback open the store for writing (the read-only opens of the read commands are not theirs)."""
    assert run("fork", demo, "demo@3", "--name", "mine")[0] == 0
    assert run("rollback", demo, "demo", "2")[0] == 0
    with eventckpt.open(demo, readonly=True) as store:
        assert store.stream("mine").state() == store.stream("demo").state(3)
        assert store.stream("demo").state() == store.stream("demo").state(2)


def test_enums_and_objects_show_their_class(tmp_path: Path) -> None:
    """The CLI never has the program's classes, yet diff, history and log show a stored enum or object with its
    class name (1 -> an enum of value 1, a dict -> an object, is a change), and --json shows the stored form."""
    path = tmp_path / "o.db"
    with eventckpt.open(path) as store:
        store.stream("t").save({"c": 1, "p": {"x": 1}})
        store.stream("t").save({"c": 0, "p": 0}, metadata={"by": 0})
    color, pt = '{"$enum":["tests.gone.Color",1]}', '{"$object":["tests.gone.Pt",{"x":1}]}'
    conn = apsw.Connection(str(path))  # what a program with these classes stored
    conn.execute("UPDATE events SET value = ? WHERE version = 2 AND path = '$.c'", (color,))
    conn.execute("UPDATE events SET value = ? WHERE version = 2 AND path = '$.p'", (pt,))
    conn.execute("UPDATE versions SET metadata = ? WHERE version = 2", (f'{{"by":{color}}}',))
    conn.close()
    code, out, err = run("diff", path, "t@1", "2")
    assert code == 0 and out.splitlines()[1:] == ["~ c  1 -> tests.gone.Color(1)", '~ p  {"x":1} -> tests.gone.Pt(x=1)'], err
    changes = orjson.loads(run("diff", path, "t@1", "2", "--json")[1])["changes"]
    assert [c["new"] for c in changes] == [orjson.loads(color), orjson.loads(pt)]
    assert orjson.loads(run("show", path, "t@2", "--json")[1])["values"] == {"c": orjson.loads(color), "p": orjson.loads(pt)}
    code, out, _ = run("history", path, "t", "c")
    assert code == 0 and [line.split(None, 5)[5] for line in out.splitlines()] == ["tests.gone.Color(1)", "1"]
    code, out, _ = run("log", path, "t")
    assert code == 0 and out.splitlines()[0].endswith("by=tests.gone.Color(1)")


def test_rollback_writes_enums_and_objects_back_as_stored(tmp_path: Path) -> None:
    """rollback (in a process without the program's classes) to a version holding an enum or object writes its
    stored form back exactly, and rolling back from it to the plain value it replaced is not a no-op."""
    path = tmp_path / "o.db"
    with eventckpt.open(path) as store:
        store.stream("t").save({"c": 1})
        store.stream("t").save({"c": 0})
    color = '{"$enum":["tests.gone.Color",1]}'
    conn = apsw.Connection(str(path))  # what a program with the class stored
    conn.execute("UPDATE events SET value = ? WHERE version = 2", (color,))
    conn.close()
    assert run("rollback", path, "t", "1")[0] == 0 and run("rollback", path, "t", "2")[0] == 0
    conn = apsw.Connection(str(path))
    assert conn.execute("SELECT version, value FROM events WHERE version > 2 ORDER BY version").fetchall() == [
        (3, "1"), (4, color)]
    conn.close()


def test_a_string_that_is_not_utf8_is_reported_not_an_internal_error(tmp_path: Path) -> None:
    """A stored string that is not UTF-8 (a flipped bit) is reported by verify at its version, and the reading
    commands refuse it with CorruptStoreError, not 'internal error UnicodeDecodeError'."""
    path = tmp_path / "t.db"
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"messages": ["hello"]})
        with task.transaction() as tx:
            tx.append("messages", "un café")
        task.save({**task.state(), "step": 3})
    conn = apsw.Connection(str(path))
    conn.execute("UPDATE events SET value = CAST(X'22636166c32922' AS TEXT) WHERE value LIKE '%caf%'")
    conn.close()
    code, out, _ = run("verify", path, "--json")
    problems = orjson.loads(out)["problems"]
    assert code == 1 and [(p["kind"], p["stream"], p["version"]) for p in problems] == [("file", "t", 2)]
    for args in (("show", path, "t@2"), ("history", path, "t", "messages"), ("export", path, "t"),
                 ("sql", path, "SELECT value FROM events"), ("copy", path, tmp_path / "copy.db")):
        code, _, err = run(*args)
        assert code == 1 and err.startswith("Error: CorruptStoreError: ") and "not UTF-8" in err, (args, err)
    assert not (tmp_path / "copy.db").exists()


def test_export_of_a_damaged_store_fails_and_writes_nothing(demo: Path, tmp_path: Path) -> None:
    """export and copy of a store with an altered event fail with CorruptStoreError naming stream@version;
    export -o leaves the output as it was (absent, or an earlier backup), never a backup import refuses."""
    conn = apsw.Connection(str(demo))
    conn.execute("UPDATE events SET value = '\"forged\"' WHERE version = 5 AND op = 'append'")
    conn.close()
    backup, earlier = tmp_path / "backup.jsonl", tmp_path / "earlier.jsonl"
    earlier.write_bytes(b"an earlier backup\n")
    for output in (backup, earlier):
        code, _, err = run("export", demo, "demo", "-o", output)
        assert code == 1 and err.startswith("Error: CorruptStoreError: demo@5: the checksum does not match"), err
    assert not backup.exists() and earlier.read_bytes() == b"an earlier backup\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agent.db", "earlier.jsonl"]
    code, _, err = run("copy", demo, tmp_path / "copy.db")
    assert code == 1 and err.startswith("Error: CorruptStoreError: demo@5: "), err
    assert not (tmp_path / "copy.db").exists()


def test_export_to_a_file_replaces_it_whole(demo: Path, tmp_path: Path) -> None:
    """export -o writes the file whole, keeping an existing file's permissions, and writes into a path that
    is not a regular file (/dev/null) in place."""
    backup = tmp_path / "backup.jsonl"
    backup.write_bytes(b"old\n")
    backup.chmod(0o600)
    assert run("export", demo, "demo", "-o", backup)[0] == 0
    assert backup.read_bytes() == run("export", demo, "demo")[1].encode() and backup.stat().st_mode & 0o777 == 0o600
    assert run("export", demo, "demo", "-o", "/dev/null")[0] == 0


def test_sql_json_keeps_every_column_and_spells_non_finite_numbers(demo: Path) -> None:
    """sql --json keeps a repeated column name's values (a self-join's a.version, b.version become version and
    version:2), and a non-finite number is the string "Infinity" in JSON and in text alike (JSON gave null)."""
    query = ("SELECT a.version, b.version, 0 AS \"version:2\" FROM checkpoints a JOIN checkpoints b ON b.stream = a.stream"
             " AND b.version = a.version + 1 WHERE a.stream = 'demo' ORDER BY a.version LIMIT 2")
    rows = orjson.loads(run("sql", demo, query, "--json")[1])
    assert rows == [{"version": 1, "version:3": 2, "version:2": 0}, {"version": 2, "version:3": 3, "version:2": 0}]
    code, out, _ = run("sql", demo, "SELECT 1e999 AS big, -1e999 AS small, NULL AS empty", "--json")
    assert code == 0 and orjson.loads(out) == [{"big": "Infinity", "small": "-Infinity", "empty": None}]
    assert run("sql", demo, "SELECT 1e999 AS big, -1e999 AS small")[1].splitlines()[1].split() == ["Infinity", "-Infinity"]


@pytest.mark.parametrize("command", ["import", "copy"])
def test_import_and_copy_into_a_path_that_cannot_be_created_say_why(demo: Path, tmp_path: Path, command: str) -> None:
    """import and copy into a path whose store cannot be created report the store's StorageError, as demo
    does, not a FileNotFoundError from removing the file they never created."""
    exported = tmp_path / "demo.jsonl"
    assert run("export", demo, "demo", "-o", exported)[0] == 0
    target = tmp_path / "no-such-dir" / "copy.db"
    code, _, err = run(command, *((target, exported) if command == "import" else (demo, target)))
    assert code == 1 and err.startswith("Error: StorageError: ") and "cannot open the file" in err, err


def test_the_empty_name_is_shown_as_a_name(tmp_path: Path) -> None:
    """A checkpoint named "" shows as '' in log and show, not as an unnamed one."""
    path = tmp_path / "n.db"
    with eventckpt.open(path) as store:
        task = store.stream("n")
        task.save({"a": 1}, name="")
        task.save({"a": 2})
    lines = run("log", path, "n")[1].splitlines()
    assert lines[0].endswith("manual") and lines[1].endswith("manual  ''"), lines
    assert run("show", path, "n@1")[1].startswith("n v1 '' | manual")
    assert run("show", path, "n@2")[1].startswith("n v2 (unnamed) | manual")


def test_sql_refuses_an_empty_query_and_takes_a_leading_comment(demo: Path) -> None:
    """sql refuses an empty query (it printed nothing and exited 0), and a query starting with a -- comment is
    the query, not an unknown option."""
    for query in ("", "  \n"):
        code, out, err = run("sql", demo, query)
        assert code == 1 and out == "" and err.startswith("Error: InvalidArgumentError: ") and "empty" in err, err
    code, out, err = run("sql", demo, "-- the heads\nSELECT stream, head FROM stream_heads ORDER BY stream", "--json")
    assert code == 0 and [r["head"] for r in orjson.loads(out)] == [10, 4], err
    assert run("sql", demo, "--json", "--", "--x\nSELECT 1 AS one")[1].startswith("[\n  {\n    \"one\": 1")
