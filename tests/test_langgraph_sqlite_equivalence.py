"""The same graph run on SqliteSaver and on EventCkptSaver gives equal states at every step."""

from __future__ import annotations

import datetime as dt
import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from eventckpt.langgraph import EventCkptSaver

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {**old, **new}


class State(TypedDict):
    messages: Annotated[list, add_messages]
    count: Annotated[int, operator.add]
    notes: Annotated[dict, merge]
    stamp: dt.datetime
    tags: set
    pair: tuple
    approved: str


class Inner(TypedDict):
    messages: Annotated[list, add_messages]
    count: Annotated[int, operator.add]


def build() -> StateGraph:
    def agent(state: State) -> dict[str, Any]:
        n = state["count"] + 1
        calls = [{"name": "lookup", "args": {"n": n}, "id": f"call-{n}"}]
        return {
            "messages": [AIMessage(f"thinking {n}", id=f"ai-{n}", tool_calls=calls),
                         ToolMessage(f"result {n}", tool_call_id=f"call-{n}", id=f"tool-{n}")],
            "count": 1,
            "notes": {f"k{n % 3}": f"v{n}", "last": n},
            "stamp": EPOCH + dt.timedelta(minutes=n),
            "tags": {f"t{n % 4}", "agent"},
            "pair": (n, f"p{n}"),
        }

    def ask(state: State) -> dict[str, Any]:
        return {"approved": interrupt({"count": state["count"], "at": state["stamp"]})}

    def inner_step(state: Inner) -> dict[str, Any]:
        return {"messages": [AIMessage(f"inner saw {len(state['messages'])}", id=f"inner-{state['count']}")],
                "count": 10}

    inner = StateGraph(Inner)
    inner.add_node("inner_step", inner_step)
    inner.add_edge(START, "inner_step")
    inner.add_edge("inner_step", END)

    graph = StateGraph(State)
    graph.add_node("agent", agent)
    graph.add_node("ask", ask)
    graph.add_node("child", inner.compile())
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: "agent" if s["count"] % 8 else "ask")
    graph.add_edge("ask", "child")
    graph.add_edge("child", END)
    return graph


def snapshot(state: Any) -> dict[str, Any]:
    """What must be equal across savers (checkpoint and task ids are time-based and differ)."""
    results = sorted((t.name, repr(t.result)) for t in state.tasks)
    return {
        "values": state.values,
        "next": state.next,
        "source": state.metadata.get("source"),
        "step": state.metadata.get("step"),
        "has_parent": state.parent_config is not None,
        "interrupts": [i.value for i in state.interrupts],
        "task_results": results,
    }


def streamed(chunks: Any) -> list[dict[str, Any]]:
    """Streamed states, with interrupts as their values (their ids hash the time-based checkpoint ids)."""
    return [{k: [i.value for i in v] if k == "__interrupt__" else v for k, v in chunk.items()} for chunk in chunks]


def run(saver: BaseCheckpointSaver) -> dict[str, Any]:
    app = build().compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "eq"}}
    start = {"messages": [HumanMessage("hello", id="h0")], "count": 0, "notes": {}, "stamp": EPOCH,
             "tags": set(), "pair": (0, "p0"), "approved": ""}
    out: dict[str, Any] = {"streamed": streamed(app.stream(start, config, stream_mode="values"))}
    out["streamed"] += streamed(app.stream(Command(resume="yes"), config, stream_mode="values"))
    history = list(app.get_state_history(config))
    old = next(h for h in history if h.values.get("count") == 3)
    forked = app.update_state(old.config, {"notes": {"edited": True}, "messages": [HumanMessage("edit", id="e")]})
    out["streamed"] += streamed(app.stream(None, forked, stream_mode="values"))
    out["streamed"] += streamed(app.stream(Command(resume="again"), config, stream_mode="values"))
    out["history"] = [snapshot(h) for h in app.get_state_history(config)]
    out["final"] = snapshot(app.get_state(config, subgraphs=True))
    out["pending"] = sorted(
        (w[1], repr([i.value for i in w[2]] if w[1] == "__interrupt__" else w[2]))
        for t in saver.list(config) for w in (t.pending_writes or [])
    )
    return out


def test_equal_states_at_every_step(tmp_path: Path) -> None:
    """Streamed values, the whole history (after an interrupt, a resume, an edit of an old checkpoint and
    a subgraph) and every stored write are equal between SqliteSaver and EventCkptSaver."""
    conn = sqlite3.connect(tmp_path / "sqlite.db", check_same_thread=False)
    try:
        expected = run(SqliteSaver(conn))
    finally:
        conn.close()
    with EventCkptSaver(tmp_path / "eventckpt.db") as saver:
        got = run(saver)
    assert len(expected["streamed"]) >= 15 and len(expected["history"]) >= 15
    assert got["streamed"] == expected["streamed"]
    assert got["history"] == expected["history"]
    assert got["final"] == expected["final"]
    assert got["pending"] == expected["pending"]
    assert isinstance(got["history"][0]["values"]["stamp"], dt.datetime)
    assert isinstance(got["history"][0]["values"]["tags"], set)
