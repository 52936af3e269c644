"""copy: a whole store moves between engines in either direction with its version numbers, times and
checksums (SQLite -> PostgreSQL -> SQLite gives identical states at every version), LangGraph threads
included; verify passes on every copy; a target that already holds a name gets nothing."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: F401 - the peer the saver mirrors

import eventckpt
from eventckpt.langgraph import EventCkptSaver

from .conftest import RawSQL
from .test_export_import import history, same_streams
from .test_langgraph_graph import loop_graph


def checksums(target: str | Path) -> list[tuple[str, int, str]]:
    """(stream, version, checksum hex) of every stored version, by name (ids differ between stores)."""
    with RawSQL(target) as raw:
        sid = "s.id" if raw.kind == "sqlite" else "s.stream_id"
        rows = raw.execute(f"SELECT s.name, v.version, v.checksum FROM versions AS v JOIN streams AS s ON {sid} = v.stream_id")
    return sorted((name, version, bytes(checksum).hex()) for name, version, checksum in rows)


def test_sqlite_to_postgresql_to_sqlite_is_identical(tmp_path: Path, pg_target: str) -> None:
    """A store with forks, retention holes, tool calls, ids, usage and rich values, copied to PostgreSQL
    and back to a file, has identical states, rows and checksums at every version; each copy verifies."""
    first, last = tmp_path / "first.db", tmp_path / "last.db"
    with eventckpt.open(first) as store:
        history(store)
        tools = eventckpt.ToolRegistry()
        tools.register("note", lambda text: text.upper())
        store.stream("main").save({**store.stream("main").state(), "noted": 1}, tool_calls=[tools.call("note", text="x")])
        store.stream("main").prune(keep_last=30, auto_only=True)  # holes in the version numbers
        names = store.streams()
    forward = eventckpt.copy(first, pg_target)
    back = eventckpt.copy(pg_target, last)
    assert set(forward.streams) == set(names) == set(back.streams) and forward.versions == back.versions > 20
    with eventckpt.open(first) as a, eventckpt.open(pg_target) as b, eventckpt.open(last) as c:
        same_streams(a, b, names)
        same_streams(a, c, names)
        assert a.stream("main").tool_calls() == b.stream("main").tool_calls() == c.stream("main").tool_calls()
        assert b.verify().ok and c.verify().ok
    assert checksums(first) == checksums(pg_target) == checksums(last)


def test_langgraph_threads_travel_and_carry_on(tmp_path: Path, pg_target: str) -> None:
    """A LangGraph thread run on a file, copied to PostgreSQL, has the same history there and goes on."""
    path = tmp_path / "graph.db"
    config = {"configurable": {"thread_id": "t"}}
    with EventCkptSaver(path) as saver:
        app = loop_graph(5).compile(checkpointer=saver)
        app.invoke({"messages": [], "step": 0, "total": 0}, config)
        before = [(h.values, h.config["configurable"]["checkpoint_id"]) for h in app.get_state_history(config)]
    eventckpt.copy(path, pg_target)
    with EventCkptSaver(pg_target) as saver:
        app = loop_graph(8).compile(checkpointer=saver)
        assert [(h.values, h.config["configurable"]["checkpoint_id"]) for h in app.get_state_history(config)] == before
        out = app.invoke(None, config)  # resumes from the copied checkpoint
        assert out["step"] == 5 or out["step"] == 8


def test_a_name_the_target_holds_is_refused_and_nothing_is_written(new_target: Callable[[], str], engine: str,
                                                                   tmp_path: Path) -> None:
    """Copying into a store that already has one of the source's stream names raises StreamExistsError
    before anything is written."""
    source, target = tmp_path / "src.db", new_target()
    with eventckpt.open(source) as store:
        store.stream("a").save({"x": 1})
        store.stream("b").save({"x": 2})
    with eventckpt.open(target) as store:
        store.stream("b").save({"mine": True})
    with pytest.raises(eventckpt.StreamExistsError):
        eventckpt.copy(source, target)
    with eventckpt.open(target) as store:
        assert store.streams() == ["b"] and store.stream("b").state() == {"mine": True}


def test_the_copy_command(tmp_path: Path, pg_target: str) -> None:
    """`eventckpt copy SRC DST` moves a file into PostgreSQL and the other commands read it there."""
    source = tmp_path / "agent.db"
    subprocess.run([sys.executable, "-m", "eventckpt", "demo", str(source)], check=True, capture_output=True)
    done = subprocess.run([sys.executable, "-m", "eventckpt", "copy", str(source), pg_target],
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("copied "), done.stderr
    shown = subprocess.run([sys.executable, "-m", "eventckpt", "log", pg_target, "demo", "-n", "2", "--json"],
                           capture_output=True, text=True)
    assert shown.returncode == 0 and '"version"' in shown.stdout, shown.stderr
    check = subprocess.run([sys.executable, "-m", "eventckpt", "verify", pg_target], capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.startswith("ok"), check.stdout


def test_progress_counts_up_to_the_total(tmp_path: Path, pg_target: str) -> None:
    """progress(done, total) climbs to its total, one step per line of the transfer."""
    source = tmp_path / "p.db"
    with eventckpt.open(source) as store:
        history(store)
    calls: list[Any] = []
    eventckpt.copy(source, pg_target, progress=lambda done, total: calls.append((done, total)))
    assert calls[-1][0] == calls[-1][1] and all(a[0] < b[0] for a, b in zip(calls, calls[1:]))


def test_moved_checkpoint_ids_travel(tmp_path: Path, pg_target: str) -> None:
    """A thread whose checkpoint ids were put again (the ids moved to new versions) lists the same ids,
    values, parents and writes after a copy to PostgreSQL and back."""
    from .test_langgraph_parity import checkpoint, config, seen

    first, last = tmp_path / "first.db", tmp_path / "last.db"
    with EventCkptSaver(first) as saver:
        saver.put(config(), checkpoint("c1", {"a": 1}), {"step": 1}, {"a": 1})
        saver.put(config("c1"), checkpoint("c2", {"a": 2}, {"a": 2}), {"step": 2}, {"a": 2})
        saver.put_writes(config("c2"), [("a", "w2")], "task")
        saver.put(config("c2"), checkpoint("c3", {"a": 3}, {"a": 3}), {"step": 3}, {"a": 3})
        saver.put(config("c1"), checkpoint("c2", {"a": 20}, {"a": 2}), {"step": 2, "again": True}, {"a": 2})
        before = seen(saver)
    eventckpt.copy(first, pg_target)
    eventckpt.copy(pg_target, last)
    for target in (pg_target, last):
        with EventCkptSaver(target) as saver:
            assert seen(saver) == before, target


def test_registered_types_and_nan_travel_as_stored(tmp_path: Path, new_target: Callable[[], str]) -> None:
    """copy into a store given neither the classes nor allow_nan keeps enums, objects and NaN in values and
    metadata as they were stored (snapshots it writes included): a store that knows the classes restores them."""
    from .test_export_import import Color, Point, typed_history

    source, target = tmp_path / "src.db", new_target()
    with eventckpt.open(source, types=[Color, Point], allow_nan=True) as store:
        typed_history(store)
    with eventckpt.open(target, snapshots=eventckpt.SnapshotPolicy.every_version(share_min_bytes=0)) as blind:
        assert eventckpt.copy(source, blind).streams == ("typed",)
    with eventckpt.open(source, types=[Color, Point], allow_nan=True) as a, \
            eventckpt.open(target, types=[Color, Point], allow_nan=True) as b:
        same_streams(a, b, ["typed"])
        assert type(b.stream("typed").get(1).metadata["color"]) is Color and b.verify().ok
    assert checksums(source) == checksums(target)


KILLED_COPY = """
import os, signal, sys
import eventckpt
source, target, prefix, n = sys.argv[1:]
store = eventckpt.open(target)
seen = [0]
def hook(cursor, sql, bindings):
    if sql.startswith(prefix):
        seen[0] += 1
        if seen[0] == int(n):
            os.kill(os.getpid(), signal.SIGKILL)
    return True
store.core.backend.journal.conn.exec_trace = hook
eventckpt.copy(source, store)
"""


@pytest.mark.parametrize("kill_at", [("INSERT INTO versions", 5), ("INSERT INTO versions", 40),
                                     ("INSERT INTO langgraph_threads", 1)])
def test_a_killed_copy_leaves_the_target_as_it_was_and_runs_again(tmp_path: Path, kill_at: tuple[str, int]) -> None:
    """A copy SIGKILLed midway (among the streams, or writing the LangGraph threads after them) leaves
    nothing in the target, so no thread is left that the saver cannot find; run again, it copies everything."""
    source, target = tmp_path / "src.db", tmp_path / "dst.db"
    config = {"configurable": {"thread_id": "t"}}
    with EventCkptSaver(source) as saver:
        app = loop_graph(3).compile(checkpointer=saver)
        app.invoke({"messages": [], "step": 0, "total": 0}, config)
        before = [(h.values, h.config["configurable"]["checkpoint_id"]) for h in app.get_state_history(config)]
    with eventckpt.open(source) as store:
        history(store)
        names = store.streams()
    with eventckpt.open(target) as store:
        store.stream("mine").save({"x": 1})
    done = subprocess.run([sys.executable, "-c", KILLED_COPY, str(source), str(target), *map(str, kill_at)],
                          capture_output=True, timeout=120)
    assert done.returncode == -9, done.stderr.decode()
    with eventckpt.open(target) as store:
        assert store.streams() == ["mine"] and store.verify().ok
    assert set(eventckpt.copy(source, target).streams) == set(names)
    with EventCkptSaver(target) as saver:
        app = loop_graph(3).compile(checkpointer=saver)
        assert [(h.values, h.config["configurable"]["checkpoint_id"]) for h in app.get_state_history(config)] == before
    with eventckpt.open(source) as a, eventckpt.open(target) as b:
        same_streams(a, b, names)
        assert b.streams() == ["mine", *names] and b.verify().ok


def test_the_copy_command_copies_what_was_stored_or_nothing(tmp_path: Path) -> None:
    """`eventckpt copy` copies NaN a program stored (allow_nan=True); a copy that fails midway (a damaged
    source version) leaves no file where it created the target, and nothing in an existing one."""
    source, target, again = tmp_path / "src.db", tmp_path / "dst.db", tmp_path / "new.db"
    with eventckpt.open(source, allow_nan=True) as store:
        store.stream("a").save({"v": 1})
        store.stream("b").save({"v": float("nan")}, metadata={"score": float("nan")})
        store.stream("c").save({"v": 3})

    def run(dst: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "eventckpt", "copy", str(source), str(dst)],
                              capture_output=True, text=True, timeout=120)

    done = run(target)
    assert done.returncode == 0 and done.stdout.startswith("copied 3 streams"), done.stderr
    with eventckpt.open(source, allow_nan=True) as a, eventckpt.open(target, allow_nan=True) as b:
        same_streams(a, b, ["a", "b", "c"])
    with RawSQL(source) as raw:  # "b" no longer matches its checksum: the copy fails after "a"
        raw.execute("UPDATE events SET value = '2' WHERE stream_id = (SELECT id FROM streams WHERE name = 'b')")
    failed = run(again)
    assert failed.returncode == 1 and "checksum" in failed.stderr and not again.exists(), failed.stderr
    with eventckpt.open(again) as store:
        store.stream("mine").save({"x": 1})
    assert run(again).returncode == 1
    with eventckpt.open(again) as store:
        assert store.streams() == ["mine"]


def test_streams_keep_their_creation_times_and_order(tmp_path: Path, new_target: Callable[[], str]) -> None:
    """After a copy, forks keep their creation time (not the copy's), and streams() (oldest first),
    summaries() and summaries(before=...) list the streams as the source does, across stream trees."""
    source, target = tmp_path / "src.db", new_target()
    with eventckpt.open(source) as store:
        store.stream("A").save({"x": 1})
        store.stream("B").save({"x": 2})
        store.stream("A").fork(at=1, task_id="A2").save({"y": 1})
        store.stream("A2").fork(at=1, task_id="A3")
    time.sleep(0.01)  # a fork made again at the copy would carry a later time
    eventckpt.copy(source, target)

    def listed(path: str | Path) -> Any:
        with eventckpt.open(path) as store:
            return (store.streams(), [(s.task_id, s.created_at, s.updated_at) for s in store.summaries()],
                    [s.task_id for s in store.summaries(before="B")], [s.created_at for s in store.tree("A")])

    assert listed(target) == listed(source)


def test_a_copy_taken_while_another_host_prunes_is_one_snapshot(store_target: str, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A copy whose source another store prunes mid-way copies the versions from before the prune."""
    monkeypatch.setattr(eventckpt.transfer, "_BATCH", 10)
    with eventckpt.open(store_target) as store, eventckpt.open(store_target) as other:
        for i in range(1, 31):
            store.stream("agent").save({"step": i})

        def progress(done: int, total: int) -> None:
            if done == 5:
                assert other.stream("agent").prune(keep_last=3).removed

        with eventckpt.open(tmp_path / "copy.db") as target:
            eventckpt.copy(store, target, progress=progress)
            assert target.stream("agent").list_versions() == list(range(1, 31)) and target.verify().ok
