"""Many processes as many hosts on one PostgreSQL store: optimistic concurrency by the versions primary key
alone (no table or advisory locks), caches that stay right when other processes write the same stream, and
a pooled Store whose threads never wait for each other in-process."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest

import eventckpt
from eventckpt.journal.postgres import tables

WRITER = """
import sys, eventckpt
url, stream, saves, expected = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "expected"
conflicts = 0
with eventckpt.open(url, timeout=60) as store:
    task = store.stream(stream)
    done = 0
    while done < saves:
        head = task.version
        try:
            if expected:
                task.save({"n": head + 1, "by": sys.argv[5]}, expected_version=head)
            else:
                with task.transaction() as tx:
                    tx.append("log", sys.argv[5])
                    tx.incr("n")
            done += 1
        except eventckpt.ConflictError:
            conflicts += 1
print(conflicts)
"""


def run_writers(url: str, streams: list[str], saves: int, mode: str) -> list[int]:
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, url, stream, str(saves), mode, f"w{i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i, stream in enumerate(streams)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [(p.returncode, err) for p, (_, err) in zip(procs, outs) if p.returncode] == []
    return [int(out) for out, _ in outs]


def test_eight_processes_on_one_stream_end_with_dense_versions(pg_target: str) -> None:
    """8 processes x 300 saves with expected_version on one stream: exactly 2400 versions, 1..2400, each
    the state its writer built on the version before (a ConflictError is retried by the writer)."""
    conflicts = run_writers(pg_target, ["shared"] * 8, 300, "expected")
    with eventckpt.open(pg_target) as store:
        task = store.stream("shared")
        assert task.version == 2400 and task.list_versions() == list(range(1, 2401))
        assert [cp.version for cp in task.log(5)] == [2400, 2399, 2398, 2397, 2396]
        assert all(task.state(v)["n"] == v for v in (1, 600, 1200, 2399, 2400))
        assert store.verify().ok
    assert sum(conflicts) > 0  # they really raced


def test_eight_processes_on_eight_streams_never_fail(pg_target: str) -> None:
    """8 processes, each on its own stream, 300 transactions each: no error, no conflict, every step kept."""
    conflicts = run_writers(pg_target, [f"s{i}" for i in range(8)], 300, "tx")
    assert conflicts == [0] * 8
    with eventckpt.open(pg_target) as store:
        for i in range(8):
            state = store.stream(f"s{i}").state()
            assert state["n"] == 300 and state["log"] == [f"w{i}"] * 300


def test_transactions_from_many_processes_on_one_stream_all_land(pg_target: str) -> None:
    """Without expected_version, concurrent transactions on one stream are redone on the new head until
    they land: 4 x 150 appends give a log of 600 items and n == 600."""
    run_writers(pg_target, ["hot"] * 4, 150, "tx")
    with eventckpt.open(pg_target) as store:
        state = store.stream("hot").state()
        assert state["n"] == 600 and sorted(state["log"]) == sorted([f"w{i}" for i in range(4)] * 150)
        assert store.stream("hot").list_versions() == list(range(1, 601)) and store.verify().ok


def test_a_pooled_store_never_serializes_its_threads(pg_target: str) -> None:
    """While one thread's session waits on the server (a query waiting for a lock another connection holds),
    another thread of the same Store commits and reads: each thread has its own pooled connection, no lock
    for the whole store."""
    with eventckpt.open(pg_target) as store, psycopg.connect(pg_target, autocommit=True) as holder:
        store.stream("t").save({"n": 0})
        holder.execute("SELECT pg_advisory_lock(7)")
        slow_done = threading.Event()

        def slow() -> None:
            with store.core.session() as journal:
                journal.query("SELECT pg_advisory_xact_lock_shared(7)::text")  # read-only SQL returns no void column
            slow_done.set()

        sleeper = threading.Thread(target=slow)
        sleeper.start()
        deadline = time.monotonic() + 60
        while not holder.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                 " AND wait_event = 'advisory' AND datname = current_database()").fetchone()[0]:
            assert sleeper.is_alive() and time.monotonic() < deadline, "the slow query never waited"
            time.sleep(0.01)
        for i in range(1, 21):
            store.stream("t").save({"n": i})
        assert store.stream("t").state() == {"n": 20}
        assert not slow_done.is_set()  # all of it happened while the other thread's session was busy
        holder.execute("SELECT pg_advisory_unlock(7)")
        sleeper.join(60)
        assert slow_done.is_set()  # and the slow query did run (an error in its thread would not show)


def test_a_cached_head_moved_by_another_process_is_caught(pg_target: str) -> None:
    """A store whose cached head another process moved commits on the new head (the primary key refuses
    the stale one), and a save with the stale expected_version is a ConflictError."""
    with eventckpt.open(pg_target) as store:
        task = store.stream("t")
        task.save({"log": ["a"]})
        run_writers(pg_target, ["t"], 5, "tx")  # another process: log += w0 five times
        with task.transaction() as tx:
            tx.append("log", "b")
        assert task.state()["log"] == ["a"] + ["w0"] * 5 + ["b"] and task.version == 7
        try:
            task.save({"log": []}, expected_version=1)
        except eventckpt.ConflictError as exc:
            assert (exc.expected, exc.actual) == (1, 7)
        else:
            raise AssertionError("a stale expected_version was accepted")



def other_host_meanwhile(url: str, work: Callable[[], Any]) -> Callable[[], Any]:
    """Start `work` (another host) in a thread and return once it has finished or waits on a lock (which
    this host's open transaction holds): a race made deterministic without sleeping for it. Returns a
    function that waits for the work and gives its result (or raises its error)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run)
    with psycopg.connect(url, autocommit=True) as watcher:
        thread.start()
        deadline = time.monotonic() + 30
        while thread.is_alive() and not watcher.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'").fetchone()[0]:
            assert time.monotonic() < deadline, "the other host neither finished nor waited"
            time.sleep(0.01)

    def result() -> Any:
        thread.join(30)
        assert not thread.is_alive()
        if "error" in out:
            raise out["error"]
        return out["result"]
    return result


@contextmanager
def hooked(cls: Any, method: str, hook: Callable[..., Any]) -> Iterator[list[Any]]:
    """Run `hook(*args)` once before the first call of cls.method (args as the method gets them) that it
    accepts (returns something other than None); what it returned is collected in the list yielded."""
    original = getattr(cls, method)
    seen: list[Any] = []

    def wrapper(self: Any, *args: Any) -> Any:
        if not seen:
            got = hook(*args)
            if got is not None:
                seen.append(got)
        return original(self, *args)

    setattr(cls, method, wrapper)
    try:
        yield seen
    finally:
        setattr(cls, method, original)


def test_a_prune_on_another_host_keeps_the_version_a_fork_in_flight_branches_from(pg_target: str) -> None:
    """A prune racing fork(at=v) waits for the fork and keeps v for it (kept_for_forks), never removing it."""
    with eventckpt.open(pg_target) as host_a, eventckpt.open(pg_target) as host_b:
        task = host_a.stream("task")
        for i in range(1, 11):
            task.save({"step": i})
        prune = lambda: host_b.stream("task").prune(keep_last=5)  # noqa: E731

        def before_insert(name: str, created_at: str, parent: Any = None, fork_version: Any = None) -> Any:
            return other_host_meanwhile(pg_target, prune) if parent is not None else None

        with hooked(tables.Tables, "create_stream", before_insert) as seen:
            retry = task.fork(at=3, task_id="task-retry")
        pruned = seen[0]()
        assert 3 in pruned.kept_for_forks and 3 in task.list_versions()
        assert retry.state() == {"step": 3}
        assert host_a.verify().ok, host_a.verify().problems


def test_a_fork_of_a_stream_another_host_is_deleting_is_stream_not_found(pg_target: str) -> None:
    """fork() of a stream whose delete_stream() on another host is under way waits for it and raises
    StreamNotFoundError, never a foreign key error."""
    with eventckpt.open(pg_target) as host_a, eventckpt.open(pg_target) as host_b:
        host_a.stream("task").save({"x": 1})
        host_a.stream("task").version  # A has read the stream before B deletes it

        def fork() -> Any:
            return host_a.stream("task").fork(task_id="task-retry")

        with hooked(tables.Tables, "delete_stream", lambda stream: other_host_meanwhile(pg_target, fork)) as seen:
            assert host_b.delete_stream("task")
        with pytest.raises(eventckpt.StreamNotFoundError):
            seen[0]()
        assert host_a.streams() == []
