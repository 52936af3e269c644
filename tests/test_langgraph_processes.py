"""Several processes on one store: graphs running at once, two runs racing on one thread, and (on
PostgreSQL) four processes putting children of one checkpoint at the same moment, copies and prunes
racing a running thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from eventckpt.errors import ConflictError
from eventckpt.journal.postgres import PostgresJournal
from eventckpt.langgraph import EventCkptSaver

from .together import go, popen

CHILD = """
import operator, sys
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from eventckpt.errors import ConflictError
from eventckpt.journal.postgres import PostgresJournal
from eventckpt.langgraph import EventCkptSaver

path, thread, steps, together, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "together", sys.argv[5]

class Loop(TypedDict):
    messages: Annotated[list, operator.add]
    step: int

def agent(state):
    n = state["step"] + 1
    return {"messages": [{"by": tag, "n": n, "text": "x" * 300}], "step": n}

graph = StateGraph(Loop)
graph.add_node("agent", agent)
graph.add_edge(START, "agent")
graph.add_conditional_edges("agent", lambda s: "agent" if s["step"] < steps else END)
with EventCkptSaver(path, timeout=60) as saver:
    app = graph.compile(checkpointer=saver)
    if together:  # tests/together.py
        print("ready", flush=True)
        sys.stdin.readline()
    config = {"configurable": {"thread_id": thread}, "recursion_limit": steps + 10}
    if len(sys.argv) > 6:  # go on from the given checkpoint with one more input
        config["configurable"]["checkpoint_id"] = sys.argv[6]
        out = app.invoke({"messages": []}, config)
    else:
        out = app.invoke({"messages": [], "step": 0}, config)
print(out["step"], len(out["messages"]))
"""


def start(path: Path | str, thread: str, steps: int, tag: str, *extra: str, together: bool = False) -> subprocess.Popen[str]:
    """A process running the graph on `thread` (if `together`, once told to go: tests/together.py)."""
    return popen([sys.executable, "-c", textwrap.dedent(CHILD), str(path), thread, str(steps),
                  "together" if together else "now", tag, *extra])


def finish(procs: list[subprocess.Popen[str]]) -> list[str]:
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        outs.append(out.strip())
    return outs


def test_four_processes_run_graphs_on_one_file(tmp_path: Path) -> None:
    """Four processes each run a 40-step graph on their own thread at once: no busy error, nothing lost."""
    path = tmp_path / "shared.db"
    EventCkptSaver(path).close()  # create the file (and its schema) once
    outs = finish(go([start(path, f"thread-{i}", 40, f"p{i}", together=True) for i in range(4)]))
    assert outs == ["40 40"] * 4
    with EventCkptSaver(path) as saver:
        for i in range(4):
            history = list(saver.list({"configurable": {"thread_id": f"thread-{i}"}}))
            assert len(history) == 42
            assert [m["by"] for m in history[0].checkpoint["channel_values"]["messages"]] == [f"p{i}"] * 40


def test_two_processes_racing_on_one_thread_fork_instead_of_clobbering(tmp_path: Path) -> None:
    """Two processes continue the same checkpoint of one thread at once: both runs are kept whole, the
    later one on a fork; no checkpoint is overwritten."""
    path = tmp_path / "race.db"
    finish([start(path, "t", 5, "base")])
    with EventCkptSaver(path) as saver:
        base = saver.get_tuple({"configurable": {"thread_id": "t"}})
    base_id = base.config["configurable"]["checkpoint_id"]
    outs = finish(go([start(path, "t", 30, tag, base_id, together=True) for tag in ("left", "right")]))
    assert outs == ["30 30", "30 30"]
    with EventCkptSaver(path) as saver:
        history = list(saver.list({"configurable": {"thread_id": "t"}}))
        ends = [t for t in history if t.checkpoint["channel_values"].get("step") == 30]
        assert len(ends) == 2 and len(history) == 7 + 2 * 27  # each run: input, start, 25 steps
        for end in ends:  # walk each run back to the shared base: a whole chain of its own messages
            chain, cursor = [], end
            while cursor.config["configurable"]["checkpoint_id"] != base_id:
                chain.append(cursor)
                cursor = saver.get_tuple(cursor.parent_config)
            tags = {m["by"] for m in end.checkpoint["channel_values"]["messages"][5:]}
            assert len(chain) == 27 and len(tags) == 1
        streams = saver.store.streams()
        assert len(streams) == 2  # the thread and one fork


# Puts, round after round, a child of the thread's first checkpoint (once told to go, tests/together.py;
# then each round starts at the same moment in every process), as LangGraph does when several runs
# continue one checkpoint.
PUTTER = """
import copy, sys, time
from langgraph.checkpoint.base.id import uuid6
from eventckpt.errors import ConflictError
from eventckpt.journal.postgres import PostgresJournal
from eventckpt.langgraph import EventCkptSaver

url, rounds, tag, parent = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
with EventCkptSaver(url, timeout=60) as saver:
    first = saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": parent}})
    print("ready", flush=True)
    sys.stdin.readline()
    start_at = time.monotonic()
    for r in range(rounds):
        while time.monotonic() < start_at + r * 0.3:
            time.sleep(0.0005)
        cp = copy.deepcopy(first.checkpoint)
        cp["id"] = str(uuid6())
        cp["channel_values"] = {**cp["channel_values"], "msgs": [*cp["channel_values"]["msgs"], f"{tag}-{r}"]}
        version = saver.get_next_version(cp["channel_versions"]["msgs"], None)
        cp["channel_versions"] = {**cp["channel_versions"], "msgs": version}
        saver.put(first.config, cp, {"source": "loop", "step": 1}, {"msgs": version})
"""


def test_four_processes_continuing_one_checkpoint_on_postgresql_all_land(pg_target: str) -> None:
    """4 processes x 8 rounds put a child of the same checkpoint at the same moment: every put returns (no
    StreamExistsError from the automatic fork names), and each child is kept, on a branch of its own, with
    the root as its parent and its own message."""
    with EventCkptSaver(pg_target) as saver:
        root = empty_checkpoint()
        root["channel_values"], root["channel_versions"] = {"msgs": ["root"]}, {"msgs": saver.get_next_version(None, None)}
        saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, root, {"source": "input", "step": 0},
                  root["channel_versions"])
    finish(go([popen([sys.executable, "-c", PUTTER, pg_target, "8", f"p{i}", root["id"]]) for i in range(4)]))
    with EventCkptSaver(pg_target) as saver:
        children = [t for t in saver.list({"configurable": {"thread_id": "t"}}) if t.checkpoint["id"] != root["id"]]
        assert sorted(t.checkpoint["channel_values"]["msgs"][-1] for t in children) == sorted(
            f"p{i}-{r}" for i in range(4) for r in range(8))
        assert {t.parent_config["configurable"]["checkpoint_id"] for t in children} == {root["id"]}
        assert all(t.checkpoint["channel_values"]["msgs"][:-1] == ["root"] for t in children)


def test_copy_thread_while_another_process_runs_it_copies_whole_checkpoints(pg_target: str) -> None:
    """copy_thread of a thread another process is putting checkpoints into (PostgreSQL, many hosts) copies
    a consistent cut: every copied checkpoint has the state, parent and writes the source has for it."""
    EventCkptSaver(pg_target).close()
    runner = start(pg_target, "src", 120, "run")
    copies = []
    with EventCkptSaver(pg_target) as saver:
        while runner.poll() is None:
            if saver.get_tuple({"configurable": {"thread_id": "src"}}) is not None:
                copies.append(f"copy-{len(copies)}")
                saver.copy_thread("src", copies[-1])
        finish([runner])
        source = {t.checkpoint["id"]: t for t in saver.list({"configurable": {"thread_id": "src"}})}
        assert len(copies) > 3 and len(source) == 122
        for name in copies:
            copied = list(saver.list({"configurable": {"thread_id": name}}))
            assert copied, name
            for t in copied:
                s = source[t.checkpoint["id"]]
                assert (t.checkpoint, t.metadata, t.parent_config["configurable"]["checkpoint_id"] if t.parent_config
                        else None) == (s.checkpoint, s.metadata, s.parent_config["configurable"]["checkpoint_id"]
                                       if s.parent_config else None), name
        assert saver.store.verify().ok


COPIER = """
import sys, time
from eventckpt.errors import InvalidArgumentError
from eventckpt.errors import ConflictError
from eventckpt.journal.postgres import PostgresJournal
from eventckpt.langgraph import EventCkptSaver

url, rounds = sys.argv[1], int(sys.argv[2])
with EventCkptSaver(url, timeout=60) as saver:
    print("ready", flush=True)  # tests/together.py
    sys.stdin.readline()
    start_at = time.monotonic()
    for r in range(rounds):
        while time.monotonic() < start_at + r * 0.3:
            time.sleep(0.0005)
        try:
            saver.copy_thread("src", f"dst-{r}")
            print("copied", flush=True)
        except InvalidArgumentError:
            print("refused", flush=True)
"""


def test_two_processes_copying_to_one_new_thread_one_wins(pg_target: str) -> None:
    """Two processes copy a thread to the same new thread at the same moment, round after round: one copy
    lands, the other is refused (the target already has checkpoints), and no stream of the loser is left."""
    finish([start(pg_target, "src", 20, "run")])
    outs = finish(go([popen([sys.executable, "-c", COPIER, pg_target, "6"]) for _ in range(2)]))
    results = list(zip(*(out.split() for out in outs)))
    assert sorted(map(sorted, results)) == [["copied", "refused"]] * 6
    with EventCkptSaver(pg_target) as saver:
        source = [(t.checkpoint, t.metadata, t.pending_writes) for t in saver.list({"configurable": {"thread_id": "src"}})]
        for r in range(6):
            assert [(t.checkpoint, t.metadata, t.pending_writes)
                    for t in saver.list({"configurable": {"thread_id": f"dst-{r}"}})] == source
        assert len(saver.store.streams()) == 7


def test_prune_while_another_process_runs_the_thread_loses_no_checkpoint(pg_target: str) -> None:
    """prune("keep_latest") over and over while another process runs the thread (PostgreSQL): each prune
    either lands or is refused (ConflictError), and no checkpoint the run put after a prune is lost."""
    EventCkptSaver(pg_target).close()
    runner = start(pg_target, "t", 120, "run")
    pruned = 0
    with EventCkptSaver(pg_target) as saver:
        while runner.poll() is None:
            if saver.get_tuple({"configurable": {"thread_id": "t"}}) is not None:
                try:
                    saver.prune(["t"], strategy="keep_latest")
                    pruned += 1
                except ConflictError:
                    pass
        assert finish([runner]) == ["120 120"]
        newest = saver.get_tuple({"configurable": {"thread_id": "t"}})
        assert newest.checkpoint["channel_values"]["step"] == 120
        assert [m["n"] for m in newest.checkpoint["channel_values"]["messages"]] == list(range(1, 121))
        for t in saver.list({"configurable": {"thread_id": "t"}}):  # a lost checkpoint leaves a child without it
            assert t.parent_config is None or saver.get_tuple(t.parent_config) is not None
        assert pruned > 3 and saver.store.verify().ok


# Waits for a line on stdin, then puts one child of the thread's newest checkpoint and says what happened.
LATE_PUTTER = """
import copy, sys
from langgraph.checkpoint.base.id import uuid6
from eventckpt.journal.postgres import PostgresJournal
from eventckpt.langgraph import EventCkptSaver

with EventCkptSaver(sys.argv[1], timeout=60) as saver:
    newest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    print("ready", flush=True)
    sys.stdin.readline()
    cp = copy.deepcopy(newest.checkpoint)
    cp["id"] = str(uuid6())
    cp["channel_values"] = {**cp["channel_values"], "step": 99}
    try:
        stored = saver.put(newest.config, cp, {"source": "loop", "step": 99}, {})
        print("put", stored["configurable"]["checkpoint_id"], flush=True)
    except Exception as exc:
        print("refused", type(exc).__name__, flush=True)
"""


def test_a_put_committing_while_prune_swaps_is_not_lost(pg_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A put another process commits just after prune("keep_latest") checked that the thread did not
    change (PostgreSQL) is not lost with the old tree: either prune sees it, or the put waits and lands
    after the prune, or it is refused; a put that returned a config can be read back."""
    finish([start(pg_target, "t", 5, "run")])
    putter = subprocess.Popen([sys.executable, "-c", LATE_PUTTER, pg_target], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert putter.stdout is not None and putter.stdin is not None
    assert putter.stdout.readline() == "ready\n"
    fingerprint = PostgresJournal.tree_fingerprint

    def then_put(journal: PostgresJournal, tree_id: int) -> tuple[int, str | None]:
        seen = fingerprint(journal, tree_id)
        monkeypatch.undo()  # once
        putter.stdin.write("go\n")  # the put goes now, between the check and the swap
        putter.stdin.flush()
        time.sleep(1.0)  # time for it to commit, unless it waits for a lock this transaction holds
        return seen

    monkeypatch.setattr(PostgresJournal, "tree_fingerprint", then_put)
    with EventCkptSaver(pg_target) as saver:
        try:
            saver.prune(["t"], strategy="keep_latest")
        except ConflictError:
            pass
        said, err = putter.communicate(timeout=120)
        assert putter.returncode == 0, err
        if said.startswith("put "):
            put_id = said.split()[1]
            assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_id": put_id}}) is not None
        assert saver.store.verify().ok
