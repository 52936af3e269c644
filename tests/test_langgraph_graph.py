"""Real LangGraph StateGraphs on EventCkptSaver: long runs, history, forks, replay, interrupts, subgraphs."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import apsw
import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from eventckpt.langgraph import EventCkptSaver
from tests.conftest import RawSQL
from tests.langgraph_graphs import chain, extend, looping


class Loop(TypedDict):
    messages: Annotated[list, operator.add]
    step: int
    total: Annotated[int, operator.add]


def loop_graph(steps: int) -> StateGraph:
    def agent(state: Loop) -> dict[str, Any]:
        n = state["step"] + 1
        return {"messages": [{"role": "assistant", "content": f"reply {n}"}], "step": n, "total": n}

    return looping(Loop, agent, lambda s: s["step"] >= steps)


@pytest.fixture
def saver(store_target: str) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(store_target) as s:
        yield s


def rows(path: Path | str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    with RawSQL(path) as raw:
        return raw.execute(sql, args)


def test_many_steps_and_the_whole_history(saver: EventCkptSaver) -> None:
    """A 120-step run keeps every checkpoint: history is newest first and each state is the right one."""
    app = loop_graph(120).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "long"}}
    final = app.invoke({"messages": [], "step": 0, "total": 0}, {**config, "recursion_limit": 200})
    assert final["step"] == 120 and len(final["messages"]) == 120 and final["total"] == 120 * 121 // 2
    history = list(app.get_state_history(config))
    assert len(history) == 122  # the input checkpoint, the start, one per step
    steps = [h.values.get("step") for h in history]
    assert steps[:-1] == list(range(120, -1, -1))
    for h in history[:-1]:
        assert [m["content"] for m in h.values["messages"]] == [f"reply {i}" for i in range(1, h.values["step"] + 1)]
    for child, parent in zip(history, history[1:], strict=False):
        assert child.parent_config["configurable"]["checkpoint_id"] == parent.config["configurable"]["checkpoint_id"]
    assert [h.metadata["step"] for h in history] == list(range(120, -2, -1))
    assert len(list(app.get_state_history(config, limit=5))) == 5


def test_update_state_on_an_old_checkpoint_is_a_fork(saver: EventCkptSaver) -> None:
    """update_state on an old checkpoint writes one version on a fork that shares the history before it."""
    app = loop_graph(10).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"messages": [], "step": 0, "total": 0}, config)
    old = next(h for h in app.get_state_history(config) if h.values.get("step") == 4)
    events_before = rows(saver.store.path, "SELECT count(*) FROM events")[0][0]
    forked = app.update_state(old.config, {"messages": [{"role": "user", "content": "edited"}]})
    streams = rows(saver.store.path, "SELECT name, parent_id, fork_version FROM streams ORDER BY 2 NULLS FIRST, 1")
    assert len(streams) == 2 and streams[1][1] is not None  # a fork of the thread's stream
    assert rows(saver.store.path, "SELECT count(*) FROM events")[0][0] - events_before == 1  # one append
    state = app.get_state(forked)
    assert state.values["step"] == 4 and state.values["messages"][-1]["content"] == "edited"
    assert state.parent_config["configurable"]["checkpoint_id"] == old.config["configurable"]["checkpoint_id"]
    assert app.get_state(config).values == state.values  # the newest checkpoint of the thread
    assert app.get_state(old.config).values["messages"][-1]["content"] == "reply 4"  # history untouched
    result = app.invoke(None, forked)  # the fork runs on
    assert result["step"] == 10 and [m["content"] for m in result["messages"]][4:6] == ["edited", "reply 5"]
    mainline = [h for h in app.get_state_history(config) if h.values.get("step") == 10]
    assert len(mainline) == 2  # the original end and the fork's end


def test_replay_from_a_checkpoint_id(saver: EventCkptSaver) -> None:
    """Invoking from an old checkpoint id re-runs from there on a fork; the original lineage stays."""
    calls: list[int] = []
    def counting(state: Loop) -> dict[str, Any]:
        calls.append(state["step"])
        n = state["step"] + 1
        return {"messages": [{"role": "assistant", "content": f"again {n}"}], "step": n, "total": n}

    app = looping(Loop, counting, lambda s: s["step"] >= 6).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "r"}}
    app.invoke({"messages": [], "step": 0, "total": 0}, config)
    assert calls == [0, 1, 2, 3, 4, 5]
    before = list(app.get_state_history(config))
    at_three = next(h for h in before if h.values.get("step") == 3)
    calls.clear()
    out = app.invoke(None, at_three.config)
    assert calls == [3, 4, 5] and out["step"] == 6 and len(out["messages"]) == 6
    after = list(app.get_state_history(config))
    assert len(after) == len(before) + 4  # LangGraph copies the checkpoint ("fork"), then three steps
    assert [(h.metadata["source"], h.values["step"]) for h in after[:4]] == [
        ("loop", 6), ("loop", 5), ("loop", 4), ("fork", 3)]
    assert after[3].parent_config["configurable"]["checkpoint_id"] == at_three.config["configurable"]["checkpoint_id"]
    assert {h.config["configurable"]["checkpoint_id"] for h in before} <= {
        h.config["configurable"]["checkpoint_id"] for h in after
    }


class Chat(TypedDict):
    messages: Annotated[list, add_messages]
    approved: str


def test_interrupt_and_resume(saver: EventCkptSaver) -> None:
    """A node that interrupts stops the run; the pending interrupt is stored and resume continues it."""

    def ask(state: Chat) -> dict[str, Any]:
        answer = interrupt({"question": "send it?", "draft": state["messages"][-1].content})
        return {"approved": answer}

    def send(state: Chat) -> dict[str, Any]:
        return {"messages": [AIMessage(f"sent after {state['approved']}", id="sent")]}

    graph = chain(Chat, ("ask", ask), ("send", send))
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "i"}}
    app.invoke({"messages": [HumanMessage("draft text", id="h")], "approved": ""}, config)
    paused = app.get_state(config)
    assert paused.next == ("ask",)
    assert paused.interrupts[0].value == {"question": "send it?", "draft": "draft text"}
    with EventCkptSaver(saver.store.path) as other:  # a fresh saver sees the same pending interrupt
        assert graph.compile(checkpointer=other).get_state(config).interrupts[0].value["question"] == "send it?"
    final = app.invoke(Command(resume="yes"), config)
    assert final["approved"] == "yes" and final["messages"][-1] == AIMessage("sent after yes", id="sent")
    assert app.get_state(config).next == ()


class Outer(TypedDict):
    messages: Annotated[list, add_messages]
    done: bool


def test_subgraph_checkpoints_live_in_their_namespaces(saver: EventCkptSaver) -> None:
    """A subgraph's checkpoints go to its own namespace; an interrupt inside it resumes from there."""

    def inner_step(state: Outer) -> dict[str, Any]:
        answer = interrupt("inner question")
        return {"messages": [AIMessage(f"inner got {answer}", id="inner")]}

    def finish(state: Outer) -> dict[str, Any]:
        return {"done": True}

    inner = chain(Outer, ("inner_step", inner_step)).compile()
    app = chain(Outer, ("child", inner), ("finish", finish)).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "s"}}
    app.invoke({"messages": [HumanMessage("go", id="go")], "done": False}, config)
    namespaces = [r[0] for r in rows(saver.store.path, "SELECT checkpoint_ns FROM langgraph_threads ORDER BY 1")]
    assert namespaces[0] == "" and len(namespaces) == 2 and namespaces[1].startswith("child:")
    state = app.get_state(config, subgraphs=True)
    sub = state.tasks[0].state
    assert sub.config["configurable"]["checkpoint_ns"] == namespaces[1]
    assert sub.next == ("inner_step",) and sub.interrupts[0].value == "inner question"
    own = list(saver.list({"configurable": {"thread_id": "s", "checkpoint_ns": namespaces[1]}}))
    assert [t.metadata["source"] for t in own] == ["loop", "input"]  # the subgraph's own checkpoints
    final = app.invoke(Command(resume="ok"), config)
    assert final["done"] is True and final["messages"][-1].content == "inner got ok"


def test_async_graph_uses_the_async_methods(saver: EventCkptSaver) -> None:
    """ainvoke / aget_state / aget_state_history work through the saver's async methods."""
    app = loop_graph(15).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "a"}}

    async def run() -> tuple[Any, list[Any]]:
        await app.ainvoke({"messages": [], "step": 0, "total": 0}, config)
        return await app.aget_state(config), [h async for h in app.aget_state_history(config)]

    state, history = asyncio.run(run())
    assert state.values["step"] == 15 and len(history) == 17
    assert app.get_state(config).values == state.values  # the sync side reads the same checkpoints


class Delta(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=4)]
    step: int


def test_delta_channel_graph_restores_every_step(saver: EventCkptSaver) -> None:
    """A graph using LangGraph's DeltaChannel rebuilds its value at every checkpoint from stored writes."""

    def node(state: Delta) -> dict[str, Any]:
        return {"items": [state["step"]], "step": state["step"] + 1}

    app = looping(Delta, node, lambda s: s["step"] >= 11).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "d"}}
    assert app.invoke({"items": [], "step": 0}, config)["items"] == list(range(11))
    checked = 0
    for h in app.get_state_history(config):
        if "step" in h.values:
            assert h.values["items"] == list(range(h.values["step"]))
            checked += 1
    assert checked == 12


def test_readme_switch_from_sqlite_saver_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two lines README.md shows for switching from SqliteSaver compile and run a graph."""
    import re

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = re.search(r"## LangGraph\n.*?```python\n(.*?)```", readme, re.S)
    assert block and len(block.group(1).strip().splitlines()) == 2
    monkeypatch.chdir(tmp_path)
    scope: dict[str, Any] = {"builder": loop_graph(3)}
    exec(compile(block.group(1), "README LangGraph switch", "exec"), scope)
    out = scope["graph"].invoke({"messages": [], "step": 0, "total": 0}, {"configurable": {"thread_id": "readme"}})
    assert out["step"] == 3 and (tmp_path / "agent.db").exists()
    scope["graph"].checkpointer.close()
