"""Several processes on one file: graphs running at once, and two runs racing on one thread."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from eventckpt.langgraph import EventCkptSaver

CHILD = """
import operator, sys, time
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from eventckpt.langgraph import EventCkptSaver

path, thread, steps, start_at, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]

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
while time.time() < start_at:  # start together
    time.sleep(0.001)
with EventCkptSaver(path, timeout=60) as saver:
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": steps + 10}
    if len(sys.argv) > 6:  # go on from the given checkpoint with one more input
        config["configurable"]["checkpoint_id"] = sys.argv[6]
        out = app.invoke({"messages": []}, config)
    else:
        out = app.invoke({"messages": [], "step": 0}, config)
print(out["step"], len(out["messages"]))
"""


def start(path: Path, thread: str, steps: int, at: float, tag: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(path), thread, str(steps), str(at), tag, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


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
    at = time.time() + 2.0
    outs = finish([start(path, f"thread-{i}", 40, at, f"p{i}") for i in range(4)])
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
    finish([start(path, "t", 5, 0, "base")])
    with EventCkptSaver(path) as saver:
        base = saver.get_tuple({"configurable": {"thread_id": "t"}})
    base_id = base.config["configurable"]["checkpoint_id"]
    at = time.time() + 2.0
    outs = finish([start(path, "t", 30, at, tag, base_id) for tag in ("left", "right")])
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
