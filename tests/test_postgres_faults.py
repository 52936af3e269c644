"""Faults on PostgreSQL, with real processes and a real server: a client SIGKILLed mid-commit, and the
server crashed (`pg_ctl stop -m immediate`) and restarted mid-workload. Every acknowledged version
restores exactly, nothing half-written is visible, and clients carry on without a restart of their own
process."""

from __future__ import annotations

import operator
import os
import re
import signal
import subprocess
import sys
import threading
import time
from typing import Annotated, Any

import psycopg
import pytest

import eventckpt
from eventckpt.journal.postgres import tables

from .engines import TARGETS

# A writer: step i appends i to `log`, sets `step` and adds 1 to `n`, with the checkpoint id "step-i" as
# its idempotency key; it prints "ack VERSION STEP" once a commit returned. When the connection drops and
# nobody can tell whether its last commit landed, the retry of the same step finds out (the id is taken).
WRITER = """
import sys, time, eventckpt
url, stream, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
with eventckpt.open(url, timeout=60) as store:
    task = store.stream(stream)
    start = task.version + 1
    for i in range(start, steps + 1):
        while True:
            try:
                with task.transaction(checkpoint_id=f"step-{i}") as tx:
                    tx.append("log", i)
                    tx.set("step", i)
                    tx.incr("n")
                version = tx.checkpoint.version
                break
            except eventckpt.DuplicateCheckpointIdError:  # an earlier try of this step did land
                version = task.find(f"step-{i}").version
                break
            except eventckpt.StoreUnavailableError:
                time.sleep(0.05)
        sys.stdout.write(f"ack {version} {i}\\n")  # one write: a kill never leaves half a line
        sys.stdout.flush()
"""


def expected(version: int) -> dict[str, Any]:
    return {"log": list(range(1, version + 1)), "step": version, "n": version} if version else {}


def check_store(url: str, stream: str, acked: dict[int, int]) -> int:
    """Every acknowledged version holds its step's state; the versions are dense; verify finds nothing."""
    with eventckpt.open(url) as store:
        task = store.stream(stream)
        head = task.version
        assert task.list_versions() == list(range(1, head + 1))  # nothing half-written, no hole
        for version, step in acked.items():
            assert version == step and task.state(version) == expected(version), version
        assert head in (max(acked, default=0), max(acked, default=0) + 1)  # at most the unacknowledged one more
        assert task.state() == expected(head) and head >= max(acked, default=0)
        assert store.verify().ok, store.verify().problems
        return head


def acks(out: str) -> dict[int, int]:
    """{version: step} of the whole "ack VERSION STEP" lines (a line cut short by the kill is no ack)."""
    return {int(m[1]): int(m[2]) for m in re.finditer(r"^ack (\d+) (\d+)\n", out, re.MULTILINE)}


def test_clients_sigkilled_mid_commit_leave_only_whole_versions(pg_target: str) -> None:
    """Writers killed at random moments, and one killed while its commit statement is in flight (held
    behind a tree lock), leave whole versions only; a new writer carries on from the last one."""
    acked: dict[int, int] = {}
    for round_ in range(6):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, pg_target, "w", "100000"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        lines = [proc.stdout.readline()]  # it is running: the first commit of this round returned
        if round_ == 5:  # mid-commit: its statement waits on the tree's row lock when it is killed
            with eventckpt.open(pg_target) as holder, holder.core.session() as journal, journal.write(), \
                    psycopg.connect(pg_target, autocommit=True) as watcher:
                journal.lock_tree(journal.stream("w").tree_id)
                deadline = time.monotonic() + 60
                while not watcher.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                          " AND datname = current_database()").fetchone()[0]:
                    assert proc.poll() is None and time.monotonic() < deadline, "the writer never waited on the lock"
                    time.sleep(0.01)
                proc.send_signal(signal.SIGKILL)
                proc.wait(30)
        else:
            time.sleep(0.1 + 0.15 * round_)
            proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        # Read through the same buffered file readline() used (communicate() would read the pipe under it
        # and lose what readline() had buffered past the first line); the writer is dead, so this ends.
        out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
        assert proc.returncode == -signal.SIGKILL, (proc.returncode, err)
        new = acks("".join(lines) + out)
        assert new, (round_, lines, err)  # this round committed something before it was killed
        check_store(pg_target, "w", {v: new[v] for v in sorted(new)[-50:]})  # this round's last acks
        acked.update(new)
    assert len(acked) > 20


STEPS = 1500  # enough that both writers are still going when the server goes down


def test_a_server_crash_mid_workload(pg_target: str) -> None:
    """Two writers keep going while the server is stopped with `pg_ctl stop -m immediate` and restarted:
    they reconnect by themselves, every acknowledged version is there exactly, and nothing half-written
    is visible."""
    server = TARGETS.server()
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, pg_target, f"w{i}", str(STEPS)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    lines: list[list[str]] = [[], []]

    def read(i: int) -> None:
        for line in procs[i].stdout:  # type: ignore[union-attr]
            lines[i].append(line)
        procs[i].wait(600)

    readers = [threading.Thread(target=read, args=(i,)) for i in range(2)]
    for t in readers:
        t.start()
    deadline = time.monotonic() + 120
    while min(len(x) for x in lines) < 20:  # both are well under way
        assert all(p.poll() is None for p in procs) and time.monotonic() < deadline, [len(x) for x in lines]
        time.sleep(0.05)
    server.stop("immediate")
    at_crash = [len(x) for x in lines]
    time.sleep(1.0)
    server.restart()
    for t in readers:
        t.join(600)
    assert all(n < STEPS for n in at_crash), at_crash  # the crash came mid-workload
    outputs = ["".join(x) for x in lines]
    assert [p.returncode for p in procs] == [0, 0], [p.stderr.read() for p in procs]  # type: ignore[union-attr]
    for i in range(2):
        acked = acks(outputs[i])
        assert sorted(acked) == list(range(1, STEPS + 1))  # every step acknowledged once, in order
        sample = {v: acked[v] for v in range(1, STEPS + 1, 37)} | {STEPS: STEPS}
        assert check_store(pg_target, f"w{i}", sample) == STEPS


def test_a_store_in_this_process_survives_a_server_restart(pg_target: str) -> None:
    """An open Store keeps working after the server restarted under it: the next calls reconnect."""
    server = TARGETS.server()
    with eventckpt.open(pg_target, timeout=60) as store:
        task = store.stream("t")
        task.save({"n": 1})
        server.stop("immediate")
        server.restart()
        assert task.state() == {"n": 1}
        task.save({"n": 2})
        assert task.version == 2 and os.getpid() == os.getpid()


def test_a_save_with_the_server_down_is_unavailable_within_the_timeout(pg_target: str) -> None:
    """save() to a stream with no cached head, with the server down, raises StoreUnavailableError after
    about `timeout` (not 100 waits of it, then StoreBusyError)."""
    server = TARGETS.server()
    with eventckpt.open(pg_target, timeout=0.3) as store:
        store.stream("other").save({"x": 1})
        server.stop("immediate")
        try:
            started = time.monotonic()
            with pytest.raises(eventckpt.StoreUnavailableError) as caught:
                store.stream("task").save({"x": 2})
            assert time.monotonic() - started < 3.0 and caught.value.committed is False
        finally:
            server.restart()
        store.stream("task").save({"x": 2})  # and it carries on once the server is back
        assert store.stream("task").state() == {"x": 2}


def _drop_in_batch(admin: psycopg.Connection[Any]) -> Any:
    """A hook for Tables.append that terminates the connection of the first commit made inside a batch."""
    original = tables.Tables.append
    dropped: list[int] = []

    def append(self: Any, commit: Any) -> None:
        if self.batching and not dropped:
            dropped.append(self.conn.info.backend_pid)
            admin.execute("SELECT pg_terminate_backend(%s)", (self.conn.info.backend_pid,))
        return original(self, commit)

    return append, original, dropped


def test_a_connection_lost_inside_a_batch_ends_the_batch_as_unavailable(pg_target: str) -> None:
    """A commit inside core.batch() whose connection drops raises StoreUnavailableError(committed=False) at
    once (the server rolled the batch back), instead of redoing on the dead connection until StoreBusyError."""
    with psycopg.connect(pg_target, autocommit=True) as admin, eventckpt.open(pg_target) as store:
        store.stream("t").save({"n": 0})
        append, original, dropped = _drop_in_batch(admin)
        tables.Tables.append = append  # type: ignore[method-assign]
        try:
            with pytest.raises(eventckpt.StoreUnavailableError) as caught:
                with store.core.batch():
                    store.stream("t").save({"n": 1})
        finally:
            tables.Tables.append = original  # type: ignore[method-assign]
        assert dropped and caught.value.committed is False
        assert store.stream("t").state() == {"n": 0}
        store.stream("t").save({"n": 2})
        assert store.stream("t").list_versions() == [1, 2]


def test_a_langgraph_put_whose_batch_loses_its_connection_is_redone(pg_target: str) -> None:
    """The saver's put made in a batch (writes turned into references) is redone on a new connection when
    the batch's connection drops, and the invoke succeeds."""
    from langgraph.graph import END, START, StateGraph
    from typing_extensions import TypedDict

    from eventckpt.langgraph import EventCkptSaver

    class S(TypedDict):
        messages: Annotated[list[str], operator.add]

    graph = StateGraph(S)
    graph.add_node("agent", lambda s: {"messages": [f"reply {len(s['messages'])}"]})
    graph.add_edge(START, "agent")
    graph.add_edge("agent", END)
    with psycopg.connect(pg_target, autocommit=True) as admin, EventCkptSaver(pg_target) as saver:
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t1"}}
        app.invoke({"messages": ["hi"]}, config)
        append, original, dropped = _drop_in_batch(admin)
        tables.Tables.append = append  # type: ignore[method-assign]
        try:
            out = app.invoke({"messages": ["again"]}, config)
        finally:
            tables.Tables.append = original  # type: ignore[method-assign]
        assert dropped
        assert out["messages"] == ["hi", "reply 1", "again", "reply 3"]
        assert app.get_state(config).values == out



def test_sql_after_a_dropped_connection_reconnects(pg_target: str) -> None:
    """store.sql() after the store's connection dropped runs on a new connection, as every other read does."""
    with psycopg.connect(pg_target, autocommit=True) as admin, eventckpt.open(pg_target) as store:
        store.stream("a").save({"x": 1})
        query = "SELECT stream, head FROM stream_heads"
        assert store.sql(query)[1] == [("a", 1)]
        for _ in range(2):
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert store.sql(query)[1] == [("a", 1)]
        with store.core.session() as journal:  # the journal's own form, with arguments bound
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                          " WHERE datname = current_database() AND pid <> pg_backend_pid()")
            assert journal.query(query + " WHERE stream = %s", ["a"])[1] == [("a", 1)]
