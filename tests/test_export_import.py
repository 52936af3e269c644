"""export/import: JSON Lines that restore identical states, times, names, metadata and usage at every
version, forks included; a bad import keeps nothing."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

import eventckpt
from eventckpt import SnapshotPolicy

from eventckpt.integrity import version_checksum

from .conftest import RawSQL, journal_rows, strict_equal


def history(store: eventckpt.Store) -> None:
    main = store.stream("main")
    main.save({"messages": [], "when": dt.datetime(2025, 5, 1, tzinfo=dt.timezone.utc), "tags": {"a", "b"}},
              name="start", metadata={"node": "input", "at": (1, 2)}, checkpoint_id="cp-start")
    for i in range(1, 41):
        with main.transaction(auto=i % 3 != 0, metadata={"node": "agent", "i": i}) as tx:
            tx.append("messages", {"n": i, "text": "x" * 30})
            tx.set(("cfg",) if i == 1 else ("cfg", "t"), {"t": i} if i == 1 else i)
            tx.incr("count", 2)
            if i % 10 == 0:
                tx.delete(("messages", 0))
                tx.truncate("messages", 25)
            tx.add_usage(input_tokens=100, output_tokens=7)
    fork = main.fork(at=20, task_id="fork")
    fork.save({**fork.state(), "branch": True}, {"input_tokens": 1})
    fork.fork(at=10, task_id="deep").save({"deep": [1.5, None]})
    main.rollback(5)


def same_streams(a: eventckpt.Store, b: eventckpt.Store, names: list[str]) -> None:
    for name in names:
        x, y = a.stream(name), b.stream(name)
        assert x.list_versions() == y.list_versions(), name
        for version in x.list_versions():
            cx, cy = x.get(version), y.get(version)
            assert strict_equal(cx.values, cy.values), (name, version)
            assert (cx.created_at, cx.name, cx.auto, cx.token_usage, cx.checkpoint_id) == (
                cy.created_at, cy.name, cy.auto, cy.token_usage, cy.checkpoint_id), (name, version)
            assert strict_equal(cx.metadata, cy.metadata), (name, version)


def test_round_trip_with_forks(named: dict[str, str]) -> None:
    """Export with forks, import into a new file: every version of every stream is identical, and the
    imported file verifies."""
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"], snapshots=SnapshotPolicy(min_tail_bytes=500)) as dst:
        history(src)
        lines = list(src.export("main", forks=True))
        assert orjson.loads(lines[0]) == {"eventckpt": "export", "format": 2}
        assert orjson.loads(lines[-1]) == {"eventckpt": "end", "streams": 3, "versions": len(lines) - 5,
                                           "events": sum(len(orjson.loads(line).get("events") or ()) for line in lines[:-1])}
        assert dst.import_lines(b"".join(lines).splitlines(keepends=True)) == ["main", "fork", "deep"]
        same_streams(src, dst, ["main", "fork", "deep"])
        assert dst.stream("deep").parent == eventckpt.ForkOrigin("fork", 10)
        assert dst.verify().ok


def test_a_fork_alone_carries_its_whole_lineage(named: dict[str, str]) -> None:
    """A fork exported without its parent becomes a stream with every version of its history."""
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        history(src)
        dst.import_lines(src.export("fork"))
        copy = dst.stream("fork")
        assert copy.parent is None and copy.list_versions() == list(range(1, 22))
        for version in (1, 20, 21):
            assert strict_equal(copy.state(version), src.stream("fork").state(version))


def test_progress_counts_every_byte(named: dict[str, str]) -> None:
    """progress(n) is called with the size of every line read."""
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        history(src)
        data = b"".join(src.export("main"))
        seen: list[int] = []
        dst.import_lines(data.splitlines(keepends=True), progress=seen.append)
        assert sum(seen) == len(data)


def bad_exports(good: list[bytes]) -> dict[str, list[bytes]]:
    version = orjson.loads(good[3])
    return {
        "not json": good[:5] + [b"{nope\n"],
        "no header": good[1:],
        "unknown op": good[:3] + [orjson.dumps({**version, "events": [["explode", "$.x", 1]]})],
        "bad path": good[:3] + [orjson.dumps({**version, "events": [["set", "nope", 1]]})],
        "incr of a string": good[:3] + [orjson.dumps({**version, "events": [["incr", "$.count", "x"]]})],
        "version out of order": good[:2] + [good[3]],
        "bad time": good[:3] + [orjson.dumps({**version, "created_at": "yesterday"})],
        "time out of range": good[:3] + [orjson.dumps({**version, "created_at": "0001-01-01T00:00:00+05:00"})],
        "fork of a stranger": good[:2] + [orjson.dumps({"stream": "x", "parent": "nobody", "fork_version": 1})],
        "late failure": good + [orjson.dumps({**version, "stream": "fork", "version": 99})],
    }


@pytest.mark.parametrize("case", ["not json", "no header", "unknown op", "bad path", "incr of a string",
                                  "version out of order", "bad time", "time out of range", "fork of a stranger",
                                  "late failure"])
def test_bad_imports_keep_nothing(named: dict[str, str], case: str) -> None:
    """A malformed export raises a typed error and leaves the target file as it was."""
    with eventckpt.open(named["a.db"]) as src:
        history(src)
        good = b"".join(src.export("main", forks=True)).splitlines(keepends=True)
    target = named["b.db"]
    with eventckpt.open(target) as dst:
        dst.stream("existing").save({"keep": 1})
    before = journal_rows(target)
    with eventckpt.open(target) as dst:
        with pytest.raises(eventckpt.EventCkptError):
            dst.import_lines(bad_exports(good)[case])
    assert journal_rows(target) == before


def test_an_exception_mid_import_leaves_nothing_in_the_same_store(named: dict[str, str]) -> None:
    """An exception from the lines after a fork was created leaves no stream behind, and the same Store
    (whose cached heads and lineages the failed import had filled) then imports the lines whole."""
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        history(src)
        good = b"".join(src.export("main", forks=True)).splitlines(keepends=True)
        dst.stream("existing").save({"keep": 1})
        fork_line = next(i for i, line in enumerate(good) if orjson.loads(line).get("stream") == "deep")

        def interrupted():
            yield from good[:fork_line + 2]  # every line: main, fork and deep are written, not yet committed
            raise RuntimeError("the connection dropped")

        with pytest.raises(RuntimeError, match="dropped"):
            dst.import_lines(interrupted())
        assert dst.streams() == ["existing"] and not dst.stream("deep").exists()
        assert dst.import_lines(good) == ["main", "fork", "deep"]
        same_streams(src, dst, ["main", "fork", "deep"])
        assert dst.verify().ok


def test_existing_stream_is_refused(named: dict[str, str]) -> None:
    """Importing a stream whose name is taken fails before writing anything."""
    with eventckpt.open(named["a.db"]) as src:
        history(src)
        with pytest.raises(eventckpt.StreamExistsError):
            src.import_lines(src.export("main"))
        assert src.stream("main").version == 42


def test_unknown_stream_export(named: dict[str, str]) -> None:
    """Exporting a stream that does not exist raises StreamNotFoundError."""
    with eventckpt.open(named["a.db"]) as src, pytest.raises(eventckpt.StreamNotFoundError):
        list(src.export("nobody"))


def test_a_pruned_stream_keeps_its_version_numbers(named: dict[str, str]) -> None:
    """An export of a stream that retention thinned out imports with the same versions and states."""
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        task = src.stream("t")
        for i in range(12):
            task.save({"n": i, "items": list(range(i)), "flag": i % 3 == 0}, metadata={"i": i}, auto=i % 2 == 1)
        task.prune(keep_last=6, auto_only=True)  # holes in the middle
        task.prune(keep_last=4)  # and a cut at the start
        dst.import_lines(src.export("t"))
        copy = dst.stream("t")
        assert copy.list_versions() == task.list_versions()
        for v in task.list_versions():
            assert strict_equal(copy.state(v), task.state(v)) and copy.get(v).metadata == task.get(v).metadata
        assert dst.verify().ok


KILLED_IMPORT = """
import os, signal, sys
import eventckpt
store = eventckpt.open(sys.argv[1])
seen = [0]
def hook(cursor, sql, bindings):
    if sql.startswith("INSERT INTO versions"):
        seen[0] += 1
        if seen[0] == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)
    return True
store.core.backend.journal.conn.exec_trace = hook
with open(sys.argv[2], "rb") as f:
    store.import_lines(f)
"""


@pytest.mark.parametrize("kill_at", [1, 15, 40])
def test_a_killed_import_leaves_nothing(tmp_path: Path, kill_at: int) -> None:
    """A process SIGKILLed in the middle of an import leaves the file as it was: the import is one transaction."""
    with eventckpt.open(tmp_path / "a.db") as src:
        history(src)
        (tmp_path / "export.jsonl").write_bytes(b"".join(src.export("main", forks=True)))
    target = tmp_path / "b.db"
    with eventckpt.open(target) as dst:
        dst.stream("existing").save({"keep": 1})
    before = journal_rows(target)
    done = subprocess.run([sys.executable, "-c", KILLED_IMPORT, str(target), str(tmp_path / "export.jsonl"), str(kill_at)],
                          capture_output=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()
    assert journal_rows(target) == before
    with eventckpt.open(target) as dst:
        assert dst.streams() == ["existing"] and dst.verify().ok
        dst.import_lines((tmp_path / "export.jsonl").read_bytes().splitlines())  # and it can be done again
        assert set(dst.streams()) == {"existing", "main", "fork", "deep"}


def test_tool_calls_travel_with_their_versions(named: dict[str, str]) -> None:
    """Tool calls (undo records included) are exported with their version and imported into it."""
    tools = eventckpt.ToolRegistry()
    tools.register("add", lambda n: n + 1, reverse=lambda args, result: None)
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        task = src.stream("t")
        task.save({"n": 1}, tool_calls=[tools.call("add", n=1), tools.call("add", n="x")])
        task.save({"n": 2})
        task.undo_tools(since_version=0, registry=tools)
        dst.import_lines(src.export("t"))
        assert dst.stream("t").tool_calls() == task.tool_calls() and len(task.tool_calls()) == 3


def cut_exports(good: list[bytes]) -> dict[str, list[bytes]]:
    end = orjson.loads(good[-1])
    return {
        "first 5 lines": good[:5],
        "header only": good[:1],
        "all but the end line": good[:-1],
        "a version line missing": good[:4] + good[5:],
        "a stream missing": [line for line in good if orjson.loads(line).get("stream") != "deep"],
        "end line with other counts": good[:-1] + [orjson.dumps({**end, "versions": end["versions"] + 1}) + b"\n"],
        "a line after the end": good + [good[3]],
        "nothing": [],
        "format 1": [orjson.dumps({"eventckpt": "export", "format": 1}) + b"\n"] + good[1:-1],
    }


@pytest.mark.parametrize("case", ["first 5 lines", "header only", "all but the end line", "a version line missing",
                                  "a stream missing", "end line with other counts", "a line after the end", "nothing",
                                  "format 1"])
def test_an_export_that_is_not_whole_is_refused(tmp_path: Path, case: str) -> None:
    """An export cut short (at a line boundary, so every line is valid JSON), missing lines, with an end
    line whose counts differ, with lines after the end, or in format 1 (which has no end line) raises
    InvalidArgumentError saying so, and nothing of it is kept."""
    with eventckpt.open(tmp_path / "a.db") as src:
        history(src)
        good = b"".join(src.export("main", forks=True)).splitlines(keepends=True)
    with eventckpt.open(tmp_path / "b.db") as dst:
        with pytest.raises(eventckpt.InvalidArgumentError) as info:
            dst.import_lines(cut_exports(good)[case])
        assert dst.streams() == []
    message = str(info.value)
    expected = {"format 1": "format 1 exports", "a line after the end": "after the export's end line",
                "end line with other counts": "the end line says", "a stream missing": "the end line says", "nothing": "nothing to import",
                "a version line missing": "does not match its checksum"}.get(case, "cut short")
    assert expected in message, message


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int


def typed_history(store: eventckpt.Store) -> None:
    """Versions holding enums, objects and NaN in values and metadata, for a store given types=[Color, Point]."""
    stream = store.stream("typed")
    stream.save({"where": Point(0), "color": Color.RED, "log": [], "keys": {Point(0).x: Color.RED}},
                metadata={"where": Point(0), "color": Color.RED, "score": float("nan"), "day": dt.date(2020, 1, 1)})
    for i in range(1, 6):
        with stream.transaction(metadata={"where": Point(i)}) as tx:
            tx.append("log", (i, Color.RED))
            tx.set("where", Point(i))
            tx.set(("keys", "n"), float("nan") if i == 3 else i)


def test_an_import_stores_exactly_what_was_exported(named: dict[str, str]) -> None:
    """A store not given the exported classes imports enums, objects and NaN (in values and metadata) as they
    were stored: its snapshots too, so a store that knows the classes restores them at every version."""
    with eventckpt.open(named["a.db"], types=[Color, Point], allow_nan=True) as src:
        typed_history(src)
        lines = list(src.export("typed"))
    with eventckpt.open(named["b.db"], snapshots=SnapshotPolicy.every_version(share_min_bytes=0)) as blind:
        assert blind.import_lines(lines) == ["typed"]
    with eventckpt.open(named["a.db"], types=[Color, Point], allow_nan=True) as src, \
            eventckpt.open(named["b.db"], types=[Color, Point], allow_nan=True) as dst:
        same_streams(src, dst, ["typed"])
        assert type(dst.stream("typed").state(4)["log"][0][1]) is Color and dst.verify().ok
        assert list(dst.export("typed")) == lines


def test_forks_keep_their_creation_time(named: dict[str, str]) -> None:
    """An imported fork's created_at is the exported one, not the time of the import."""
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        history(src)
        lines = list(src.export("main", forks=True))
        time.sleep(0.01)
        dst.import_lines(lines)
        assert [(s.task_id, s.created_at) for s in dst.tree("main")] == [(s.task_id, s.created_at) for s in src.tree("main")]


def test_times_with_an_offset_are_stored_in_utc(named: dict[str, str]) -> None:
    """A hand-written line's created_at with another offset (or none: UTC) is stored as the same instant in
    the store's UTC form, so times compare rightly (expire, log)."""
    def line(version: int, created_at: str) -> dict[str, object]:
        return {"stream": "t", "version": version, "created_at": created_at, "name": None, "auto": False,
                "metadata": None, "usage": None, "checkpoint_id": None, "events": [["set", "$.a", version]]}

    lines = [{"eventckpt": "export", "format": 2},
             {"stream": "t", "parent": None, "fork_version": None, "created_at": "2024-01-01T05:00:00+05:00"},
             line(1, "2024-01-01T10:00:00+05:00"), line(2, "2024-01-01T06:00:00"), line(3, "2024-01-01T03:00:00-05:00"),
             {"eventckpt": "end", "streams": 1, "versions": 3, "events": 3}]
    with eventckpt.open(named["b.db"]) as dst:
        dst.import_lines([orjson.dumps(x) for x in lines])
        stream = dst.stream("t")
        assert dst.sql("SELECT created_at FROM versions ORDER BY version")[1] == [
            ("2024-01-01T05:00:00.000000Z",), ("2024-01-01T06:00:00.000000Z",), ("2024-01-01T08:00:00.000000Z",)]
        assert dst.summaries()[0].created_at == dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        assert stream.expire(dt.datetime(2024, 1, 1, 7, tzinfo=dt.timezone.utc)).removed == (1, 2)


def _stream_id(raw: RawSQL, stream: str) -> int:
    return raw.one(f"SELECT {'id' if raw.kind == 'sqlite' else 'stream_id'} FROM streams WHERE name = ?", (stream,))


def _rechain(raw: RawSQL, stream: str, version: int) -> None:
    """Rewrite a version's checksum to fit its (tampered) rows, as a careful tamperer would."""
    sid = _stream_id(raw, stream)
    prev = raw.one("SELECT checksum FROM versions WHERE stream_id = ? AND version = ?", (sid, version - 1))
    created_at, name, auto, metadata, usage = raw.execute(
        "SELECT created_at, name, auto, metadata, usage FROM versions WHERE stream_id = ? AND version = ?", (sid, version))[0]
    events = raw.execute("SELECT op, path, value FROM events WHERE stream_id = ? AND version = ? ORDER BY seq", (sid, version))
    checksum = version_checksum(bytes(prev), version, created_at, name, int(auto), metadata, usage, events)
    raw.execute("UPDATE versions SET checksum = ? WHERE stream_id = ? AND version = ?", (checksum, sid, version))


@pytest.mark.parametrize("case", ["altered value", "damaged JSON", "fork's own version"])
def test_export_refuses_a_damaged_version(named: dict[str, str], case: str) -> None:
    """An export (and a copy) stops with CorruptStoreError naming the stream and version when a version's
    checksum does not chain or its stored JSON does not parse, instead of writing a backup import refuses."""
    with eventckpt.open(named["a.db"]) as src:
        history(src)
    stream, version = ("fork", 21) if case == "fork's own version" else ("main", 7)
    with RawSQL(named["a.db"]) as raw:
        sid = _stream_id(raw, stream)
        value = "1" if case != "damaged JSON" else '{"n": 7,'
        raw.execute("UPDATE events SET value = ? WHERE stream_id = ? AND version = ? AND seq = 0", (value, sid, version))
        if case == "damaged JSON":
            _rechain(raw, stream, version)
    with eventckpt.open(named["a.db"]) as src, eventckpt.open(named["b.db"]) as dst:
        with pytest.raises(eventckpt.CorruptStoreError, match=f"^{stream}@{version}: "):
            list(src.export("main", forks=True))
        with pytest.raises(eventckpt.CorruptStoreError, match=f"^{stream}@{version}: "):
            eventckpt.copy(src, dst)
        assert dst.streams() == []


def test_an_export_that_another_host_prunes_midway_stops(pg_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """On PostgreSQL, an export whose tree another store prunes between its batches stops with StoreBusyError
    (naming the rewrite), instead of mixing versions from before and after the prune into lines an import
    refuses."""
    monkeypatch.setattr(eventckpt.transfer, "_BATCH", 10)  # several batches of versions
    with eventckpt.open(pg_target) as store, eventckpt.open(pg_target) as other:
        task = store.stream("agent")
        for i in range(1, 31):
            task.save({"step": i, "log": list(range(i % 4))})
        lines = store.export("agent")
        for _ in range(5):
            next(lines)
        assert other.stream("agent").prune(keep_last=3).removed  # between the export's batches
        with pytest.raises(eventckpt.StoreBusyError, match="rewrote the history of 'agent' while it was exported"):
            list(lines)
        assert task.list_versions() == [28, 29, 30]


def test_an_sqlite_export_reads_one_moment_whatever_others_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On an SQLite file, an export reads the file as it was when it began, on a connection of its own: a
    prune and a deletion by another connection between its batches, and a prune of another stream, change
    nothing in its lines, which import into the versions as they were."""
    monkeypatch.setattr(eventckpt.transfer, "_BATCH", 10)  # several batches of versions
    path = tmp_path / "agent.db"
    with eventckpt.open(path) as store, eventckpt.open(path) as other:
        task = store.stream("agent")
        for i in range(1, 31):
            task.save({"step": i, "log": list(range(i % 4))})
            store.stream("side").save({"i": i})
        fork = task.fork(at=12, task_id="agent-fork")
        fork.save({"step": "forked"})
        before = {v: task.state(v) for v in range(1, 31)}
        lines = store.export("agent", forks=True)
        exported = [next(lines) for _ in range(5)]
        assert other.stream("side").prune(keep_last=2).removed
        assert other.stream("agent").prune(keep_last=3).removed
        assert other.delete_stream("agent", forks=True)
        exported += lines
    with eventckpt.open(":memory:") as copy:
        assert copy.import_lines(exported) == ["agent", "agent-fork"]
        assert {v: copy.stream("agent").state(v) for v in range(1, 31)} == before
        assert copy.stream("agent-fork").state() == {"step": "forked"}


def test_a_save_on_the_exporting_thread_is_kept(store_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A save made on the same thread while an export's lines are being read is committed and kept: the
    export holds no transaction between its batches for the save to join and be rolled back with."""
    monkeypatch.setattr(eventckpt.transfer, "_BATCH", 2)
    with eventckpt.open(store_target) as store:
        task = store.stream("agent")
        for i in range(1, 7):
            task.save({"step": i})
        lines = store.export("agent")
        first = [next(lines) for _ in range(3)]
        assert task.save({"step": 7}).version == 7
        exported = first + list(lines)
        assert orjson.loads(exported[-1])["versions"] == 6  # the export is of the head it started at
    with eventckpt.open(store_target, readonly=True) as store:
        assert store.stream("agent").version == 7 and store.stream("agent").state() == {"step": 7}


