"""Invariant 3: writers serialize on BEGIN IMMEDIATE; expected_version detects a moved head across
connections and processes; a stale in-process cache never produces a wrong version."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import eventckpt
from eventckpt.journal.sqlite import APPLICATION_ID


def run_child(code: str, *args: str) -> str:
    """Run a snippet in a separate Python process (a real second writer on the same file)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_conflict_between_two_connections(db_path: Path) -> None:
    """Two stores on one file: a save with a stale expected_version raises ConflictError."""
    with eventckpt.open(db_path) as a, eventckpt.open(db_path) as b:
        a.stream("t").save({"n": 1})
        seen = b.stream("t").version
        a.stream("t").save({"n": 2})
        with pytest.raises(eventckpt.ConflictError) as info:
            b.stream("t").save({"n": 99}, expected_version=seen)
        assert (info.value.expected, info.value.actual) == (1, 2)
        assert b.stream("t").state() == {"n": 2}


def test_stale_cache_diffs_against_the_real_head(db_path: Path) -> None:
    """A save through a connection whose cached head is stale is computed against the file's head."""
    with eventckpt.open(db_path) as a, eventckpt.open(db_path) as b:
        a.stream("t").save({"keep": 1, "x": 1})
        b.stream("t").save({"keep": 1, "x": 2})  # b caches version 2
        a.stream("t").save({"keep": 1, "x": 3, "y": 1})  # a's cache was at 1: it must build on 2
        assert a.stream("t").version == 3
        with b.stream("t").transaction() as tx:  # b's cache is at 2, the file at 3
            tx.incr("y")
        assert b.stream("t").state() == {"keep": 1, "x": 3, "y": 2}
        assert [a.stream("t").state(v)["x"] for v in (1, 2, 3, 4)] == [1, 2, 3, 3]


def test_transaction_fitting_only_the_real_head(db_path: Path) -> None:
    """An operation valid on the file's head but not on a stale cached head commits (it is redone)."""
    with eventckpt.open(db_path) as a, eventckpt.open(db_path) as b:
        with a.stream("t").transaction() as tx:
            tx.append("log", "one")
        with b.stream("t").transaction() as tx:  # b caches version 2
            tx.append("log", "two")
        with a.stream("t").transaction() as tx:  # the file is at 3; b's cache still at 2
            tx.append("log", "three")
        with b.stream("t").transaction() as tx:
            tx.set(("log", 2), "THREE")
        assert a.stream("t").state() == {"log": ["one", "two", "THREE"]}
        with pytest.raises(eventckpt.PathError):  # a path that fits neither head still fails
            with b.stream("t").transaction() as tx:
                tx.set(("log", 9), "x")
        assert b.stream("t").version == 4


def test_redone_transaction_starts_from_the_recorded_values(db_path: Path) -> None:
    """A transaction redone after a stale first try re-applies its values as recorded, not as the first
    try's later operations left them."""
    with eventckpt.open(db_path) as a, eventckpt.open(db_path) as b:
        b.stream("t").save({"x": 0})  # b caches version 1
        a.stream("t").save({"x": 1})  # the file moves to version 2
        with b.stream("t").transaction() as tx:  # the first try collides on version 2 and is redone
            tx.set("new", [[1]])
            tx.delete(("new", 0, 0))
        assert b.stream("t").state() == {"x": 1, "new": [[]]}
        b.stream("t").save({"x": 1, "new": [[]], "more": 1})  # diffs against b's (correct) cached head
        assert a.stream("t").state(4) == {"x": 1, "new": [[]], "more": 1}


def test_stream_deleted_and_recreated_by_another_connection(db_path: Path) -> None:
    """A cached head of a stream another connection deleted is not reused for the new stream."""
    with eventckpt.open(db_path) as a, eventckpt.open(db_path) as b:
        a.stream("t").save({"old": 1})
        b.delete_stream("t")
        b.stream("t").save({"fresh": 1})
        a.stream("t").save({"fresh": 1, "more": 2})
        assert a.stream("t").list_versions() == [1, 2]
        assert b.stream("t").state(1) == {"fresh": 1}


def test_conflict_between_two_processes(db_path: Path) -> None:
    """A second process moves the head; this process's save with the old expected_version conflicts."""
    with eventckpt.open(db_path) as store:
        task = store.stream("t")
        task.save({"owner": "parent"})
        run_child(
            """
            import sys, eventckpt
            with eventckpt.open(sys.argv[1]) as store:
                store.stream("t").save({"owner": "child"}, expected_version=1)
            """,
            str(db_path),
        )
        with pytest.raises(eventckpt.ConflictError) as info:
            task.save({"owner": "parent again"}, expected_version=1)
        assert info.value.actual == 2
        assert task.state() == {"owner": "child"}


def test_two_processes_incrementing_end_dense(db_path: Path) -> None:
    """Two processes and this one incrementing one stream end with dense versions and no lost update."""
    with eventckpt.open(db_path) as store:
        store.stream("t").save({"n": 0})
    code = """
        import sys, eventckpt
        with eventckpt.open(sys.argv[1]) as store:
            task = store.stream("t")
            for _ in range(int(sys.argv[2])):
                with task.transaction() as tx:
                    tx.incr("n")
        """
    procs = [
        subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(db_path), "60"], stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    with eventckpt.open(db_path) as store:
        for _ in range(60):
            with store.stream("t").transaction() as tx:
                tx.incr("n")
    for proc in procs:
        assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    with eventckpt.open(db_path) as store:
        task = store.stream("t")
        assert task.state() == {"n": 180}
        assert task.list_versions() == list(range(1, 182))


def test_open_waits_for_a_writer_holding_a_store_not_yet_in_wal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening waits (up to the timeout) for another process that holds the write lock of a store still in
    rollback mode, as a second opener of a new store does: SQLite refuses the switch to WAL at once then,
    without waiting, and the open failed with StoreBusyError when a few processes created one store."""
    import eventckpt.journal.sqlite as sqlite_journal

    path = tmp_path / "new.db"
    code = """
        import sys, apsw
        conn = apsw.Connection(sys.argv[1])
        conn.execute(f"PRAGMA application_id = {int(sys.argv[2])}")  # what an opener writes first
        conn.execute("BEGIN IMMEDIATE")
        print("holding", flush=True)
        sys.stdin.readline()
        conn.execute("COMMIT")
        print("released", flush=True)
        """
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), str(path), str(APPLICATION_ID)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdin is not None and holder.stdout is not None and holder.stdout.readline() == "holding\n"
    released: list[bool] = []

    def release_then_sleep(seconds: float) -> None:  # the open was refused and waits: the holder lets go now
        if not released:
            holder.stdin.write("go\n")
            holder.stdin.flush()
            released.append(holder.stdout.readline() == "released\n")
        time.sleep(seconds)

    monkeypatch.setattr(sqlite_journal, "time", SimpleNamespace(monotonic=time.monotonic, sleep=release_then_sleep))
    try:
        with eventckpt.open(path, timeout=30) as store:
            store.stream("t").save({"n": 1})
    finally:
        monkeypatch.undo()
        if not released:
            holder.stdin.write("go\n")
            holder.stdin.flush()
    assert released == [True]  # it was refused while the lock was held, and waited
    assert holder.wait(timeout=60) == 0
    with eventckpt.open(path) as store:
        assert store.stream("t").state() == {"n": 1}
        assert store.sql("PRAGMA journal_mode")[1] == [("wal",)]


def test_threads_share_one_store(db_path: Path) -> None:
    """Threads sharing one Store are serialized: every transaction lands, versions stay dense."""
    with eventckpt.open(db_path) as store:
        store.stream("t").save({"n": 0})

        def work() -> None:
            for _ in range(50):
                with store.stream("t").transaction() as tx:
                    tx.incr("n")

        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert store.stream("t").state() == {"n": 200}
        assert store.stream("t").version == 201


def test_cached_head_catches_up_instead_of_restoring(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Connections taking turns on one stream (reading before saving, or with expected_version) replay each
    other's new versions onto their cached heads (O(change)) instead of restoring the whole state, and
    every version still restores exactly."""
    import eventckpt.core as store_module

    restores: list[int] = []
    real = store_module.materialize
    monkeypatch.setattr(store_module, "materialize", lambda *a, **k: restores.append(a[3]) or real(*a, **k))
    policy = eventckpt.SnapshotPolicy(min_tail_bytes=300)
    with eventckpt.open(db_path, snapshots=policy) as a, eventckpt.open(db_path, snapshots=policy) as b:
        a.stream("t").save({"log": [], "n": 0})
        expected = [{"log": [], "n": 0}]
        for i in range(60):
            for store in (b, a):
                task = store.stream("t")
                if i % 2:
                    state = task.state()
                    state["log"].append(f"{i}-{id(store)}")
                    state["n"] += 1
                    task.save(state, expected_version=task.version)
                else:
                    with task.transaction(expected_version=task.version) as tx:
                        tx.append("log", f"{i}-{id(store)}")
                        tx.incr("n")
                    with pytest.raises(eventckpt.ConflictError):  # a conflict keeps the cached head too
                        task.save({}, expected_version=task.version - 1)
                expected.append(task.state())
        assert restores == [1], "only b's first sight of the stream is a restore"
    with eventckpt.open(db_path) as fresh:
        assert [fresh.stream("t").state(v) for v in range(1, 122)] == expected


def test_cached_head_far_behind_is_restored(db_path: Path) -> None:
    """A cached head more versions behind than catching up is worth is restored from the file instead."""
    from eventckpt.core import CATCH_UP

    with eventckpt.open(db_path) as a, eventckpt.open(db_path) as b:
        a.stream("t").save({"n": 0})
        b.stream("t").save({"n": 1})
        for n in range(CATCH_UP + 5):
            with a.stream("t").transaction() as tx:
                tx.incr("n")
        with b.stream("t").transaction() as tx:
            tx.incr("n")
        assert b.stream("t").state() == {"n": CATCH_UP + 7}
        assert a.stream("t").state() == {"n": CATCH_UP + 7}


@pytest.mark.parametrize("read", ["state", "checkout"])
def test_a_catch_up_never_replays_a_rewrite_committed_after_its_generation_check(store_target: str, read: str,
                                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A cached head caught up while another connection removes a version it holds reads one snapshot: the
    rewrite committed right after the generation check is not half seen (no version's items twice)."""
    with eventckpt.open(store_target) as a, eventckpt.open(store_target) as b:
        mine, theirs = a.stream("r"), b.stream("r")
        mine.save({"log": [f"x{i}" + "p" * 1000 for i in range(30)], "n": 30})  # big: the fold keeps appends
        with mine.transaction() as tx:
            tx.append("log", "x30")
            tx.incr("n")
        cached = mine.checkout().version  # this connection caches the head at version 2
        for i in (31, 32):
            with theirs.transaction() as tx:
                tx.append("log", f"x{i}")
                tx.incr("n")
        with a.core.session() as journal:
            engine = type(journal)
        tail = engine.tail
        fired = []

        def remove_first(self: Any, *args: Any) -> Any:
            if not fired:  # the other connection folds version 2 into 3 after the check, before the tail
                fired.append(True)
                theirs.remove(cached)
            return tail(self, *args)

        monkeypatch.setattr(engine, "tail", remove_first)
        got = mine.state() if read == "state" else mine.checkout().plain()
        monkeypatch.undo()
        assert fired
        assert got["log"][30:] == ["x30", "x31", "x32"] and got["n"] == 33
        assert mine.state()["log"][30:] == ["x30", "x31", "x32"]
