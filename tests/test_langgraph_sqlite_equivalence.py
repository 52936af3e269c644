"""The same graph run on SqliteSaver and on EventCkptSaver gives equal states at every step."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import operator
import sqlite3
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

from eventckpt.langgraph import EventCkptSaver

from .conftest import RawSQL
from tests.langgraph_graphs import extend

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
    out["each"] = [snapshot(app.get_state(h.config)) for h in app.get_state_history(config)]  # one by one
    out["final"] = snapshot(app.get_state(config, subgraphs=True))
    out["pending"] = sorted(
        (w[1], repr([i.value for i in w[2]] if w[1] == "__interrupt__" else w[2]))
        for t in saver.list(config) for w in (t.pending_writes or [])
    )
    return out


def on_both(tmp_path: Path, target: str, scenario: Any) -> tuple[Any, Any]:
    """(what `scenario(saver)` gives on SqliteSaver, what it gives on EventCkptSaver on `target`), each on
    a new store."""
    conn = sqlite3.connect(tmp_path / "sqlite.db", check_same_thread=False)
    try:
        expected = scenario(SqliteSaver(conn))
    finally:
        conn.close()
    with EventCkptSaver(target) as saver:
        return expected, scenario(saver)


def test_equal_states_at_every_step(tmp_path: Path, store_target: str) -> None:
    """Streamed values, the whole history (after an interrupt, a resume, an edit of an old checkpoint and
    a subgraph) and every stored write are equal between SqliteSaver and EventCkptSaver."""
    expected, got = on_both(tmp_path, store_target, run)
    assert len(expected["streamed"]) >= 15 and len(expected["history"]) >= 15
    assert got["streamed"] == expected["streamed"]
    assert got["history"] == expected["history"]
    assert got["final"] == expected["final"]
    assert got["pending"] == expected["pending"]
    assert isinstance(got["history"][0]["values"]["stamp"], dt.datetime)
    assert isinstance(got["history"][0]["values"]["tags"], set)


# -- an agent loop over several invokes: add_messages (tool calls, replacement by id, RemoveMessage),
# -- an operator.add list, a plain overwrite channel, parallel writers and interrupts ------------------


class Agent(TypedDict):
    messages: Annotated[list, add_messages]
    log: Annotated[list, operator.add]
    status: str
    turns: Annotated[int, operator.add]


def agent_graph() -> StateGraph:
    def agent(state: Agent) -> dict[str, Any]:
        n = state["turns"] + 1
        out: list[Any] = [AIMessage(f"calling {n}", id=f"ai-{n}",
                                    tool_calls=[{"name": "lookup", "args": {"n": n}, "id": f"call-{n}"}])]
        if n % 4 == 0:  # replace an earlier message by its id
            out.append(AIMessage(f"revised {n - 1}", id=f"ai-{n - 1}"))
        if n % 5 == 0:  # and remove one
            out.append(RemoveMessage(id=f"tool-{n - 2}"))
        return {"messages": out, "log": [{"turn": n}], "status": f"agent {n}", "turns": 1}

    def tools(state: Agent) -> dict[str, Any]:
        call = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage) and m.tool_calls)
        return {"messages": [ToolMessage(f"result {c['args']['n']}", tool_call_id=c["id"], id=f"tool-{c['args']['n']}")
                             for c in call.tool_calls], "status": "tools"}

    def audit(state: Agent) -> dict[str, Any]:  # runs in the same step as tools: two writers of messages
        return {"messages": [AIMessage(f"audit {state['turns']}", id=f"audit-{state['turns']}")],
                "log": [{"audit": state["turns"]}]}

    def approve(state: Agent) -> dict[str, Any]:
        if state["turns"] % 2 == 0:
            return {"status": interrupt({"turn": state["turns"]})}
        return {}

    graph = StateGraph(Agent)
    for name, node in (("agent", agent), ("tools", tools), ("audit", audit), ("approve", approve)):
        graph.add_node(name, node)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("agent", "audit")
    graph.add_edge(["tools", "audit"], "approve")
    graph.add_conditional_edges("approve", lambda s: "agent" if s["turns"] % 3 else END)
    return graph


def run_agent(saver: BaseCheckpointSaver, reopen: Any = None) -> dict[str, Any]:
    """Six invokes on one thread, resuming every interrupt; `reopen()` gives a fresh saver half-way."""
    config = {"configurable": {"thread_id": "agent"}}
    streamed: list[Any] = []
    for i in range(6):
        if i == 3 and reopen is not None:
            saver = reopen()
        app = agent_graph().compile(checkpointer=saver)
        chunks = streamed_values(app, {"messages": [HumanMessage(f"question {i}", id=f"h{i}")], "turns": 0}, config)
        while app.get_state(config).interrupts:
            chunks += streamed_values(app, Command(resume=f"approved {i}"), config)
        streamed.append(chunks)
    app = agent_graph().compile(checkpointer=saver)
    history = list(app.get_state_history(config))
    return {"streamed": streamed, "history": [snapshot(h) for h in history],
            "each": [snapshot(app.get_state(h.config)) for h in history],  # one by one: the older-checkpoint path
            "pending": sorted((w[1], repr(w[2])) for t in saver.list(config) for w in (t.pending_writes or [])
                              if w[1] != "__interrupt__")}


def streamed_values(app: Any, payload: Any, config: dict[str, Any]) -> list[Any]:
    # durability="sync": with LangGraph's default ("async") a put runs while the next step already
    # updates channel objects the checkpoint shares (a join's set of finished nodes), so what SqliteSaver
    # stores for a channel the step did not write depends on timing; EventCkptSaver keeps its last value.
    return streamed(app.stream(payload, config, stream_mode="values", durability="sync"))


def test_an_agent_loop_with_real_messages_is_equal_at_every_step(tmp_path: Path, named: dict[str, str]) -> None:
    """Over six invokes with tool calls, parallel writers, replacement by id, RemoveMessage and interrupts,
    every streamed state, every checkpoint's state and every pending write equal SqliteSaver's, also
    after the saver is opened afresh half-way (as a new process would)."""
    conn = sqlite3.connect(tmp_path / "sqlite.db", check_same_thread=False)
    try:
        expected = run_agent(SqliteSaver(conn))
    finally:
        conn.close()
    savers: list[EventCkptSaver] = [EventCkptSaver(named["eventckpt.db"])]

    def reopen() -> EventCkptSaver:
        savers.append(EventCkptSaver(named["eventckpt.db"]))
        return savers[-1]

    try:
        got = run_agent(savers[0], reopen)
    finally:
        for s in savers:
            s.close()
    history = expected["history"]
    assert len(history) > 60 and any(h["interrupts"] for h in history)
    kinds = {type(m).__name__ for h in history for m in h["values"].get("messages", [])}
    assert kinds == {"HumanMessage", "AIMessage", "ToolMessage"}
    assert any(m.content.startswith("revised") for m in history[0]["values"]["messages"])
    assert got["streamed"] == expected["streamed"]
    assert got["history"] == history
    assert got["each"] == expected["each"]
    assert got["pending"] == expected["pending"]


def test_the_stored_messages_are_appends_and_each_is_stored_once(tmp_path: Path, named: dict[str, str]) -> None:
    """The agent loop's messages are append events (only a step that replaced or removed one edits the
    list), and a message a task wrote is stored once: its pending write refers to the append."""
    with EventCkptSaver(named["eventckpt.db"]) as saver:
        run_agent(saver)
        path = saver.store.path
    with RawSQL(path) as raw:
        ops = dict(raw.execute("SELECT op, count(*) FROM events WHERE path = '$.messages' GROUP BY op"))
        writes = [w for (text,) in raw.execute("SELECT writes FROM langgraph_writes") for w in json.loads(text)
                  if w[1] == "messages"]
        bodies = raw.one("SELECT count(*) FROM events WHERE value LIKE '%calling 7%'")
    assert ops["append"] + ops["extend"] > 30 and ops["set"] <= 5  # the first, and the 4 removals
    references = [w for w in writes if type(w[2]) is list and w[2][0] == "@"]
    assert len(references) > 20 and all(w[3] is None for w in references)
    assert bodies == 1  # "calling 7" is in the append event only


class Deltas(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=3)]
    n: int


def test_a_delta_channel_graph_is_equal_at_every_step(tmp_path: Path, store_target: str) -> None:
    """A graph whose list is a DeltaChannel (rebuilt from ancestors' writes via get_delta_channel_history)
    has SqliteSaver's states at every checkpoint, over invokes and after an edit of an old checkpoint."""
    def node(state: Deltas) -> dict[str, Any]:
        return {"items": [{"n": state["n"]}], "n": state["n"] + 1}

    def run_deltas(saver: BaseCheckpointSaver) -> list[Any]:
        graph = StateGraph(Deltas)
        graph.add_node("node", node)
        graph.add_edge(START, "node")
        graph.add_conditional_edges("node", lambda s: END if s["n"] % 7 == 0 else "node")
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "d"}}
        app.invoke({"items": [], "n": 0}, config, durability="sync")
        app.invoke({"n": 1}, config, durability="sync")
        old = [h for h in app.get_state_history(config) if h.values.get("n") == 4][0]
        edited = app.update_state(old.config, {"items": [{"edited": True}]})
        app.invoke(None, edited, durability="sync")
        return [snapshot(h) for h in app.get_state_history(config)]

    expected, got = on_both(tmp_path, store_target, run_deltas)
    assert len(expected) > 20 and max(len(h["values"].get("items", [])) for h in expected) >= 10
    assert got == expected


# -- replacements `==` cannot tell from the old items, and dict key order ------------------------------


@dataclasses.dataclass
class Task:
    id: str
    status: str = dataclasses.field(compare=False)  # tasks are equal when their ids are


def upsert(old: list[Any], new: list[Any]) -> list[Any]:
    """Replace tasks by id, append new ones."""
    out = list(old)
    for task in new:
        at = next((i for i, o in enumerate(out) if o.id == task.id), None)
        if at is None:
            out.append(task)
        else:
            out[at] = task
    return out


class Lookalikes(TypedDict):
    tasks: Annotated[list, upsert]
    scores: list
    floats: Annotated[list, lambda old, new: old + [float(x) for x in new]]
    d: dict
    n: int


def lookalikes(saver: BaseCheckpointSaver, reopen: str | None = None) -> dict[str, Any]:
    """The graph's history and pending writes, read through a new EventCkptSaver on `reopen` when given."""
    def work(state: Lookalikes) -> dict[str, Any]:
        n = state["n"]
        return {"tasks": [Task(t.id, "done") for t in state["tasks"] if t.status == "open"] + [Task(f"t{n}", "open")],
                "scores": [float(x) for x in state["scores"]] + [n],  # equal items of another type, and one more
                "floats": [7], "d": {f"first{n}": n, **state["d"]}, "n": n + 1}  # a new key placed first

    graph = StateGraph(Lookalikes)
    graph.add_node("work", work)
    graph.add_edge(START, "work")
    graph.add_conditional_edges("work", lambda s: "work" if s["n"] < 3 else END)
    config = {"configurable": {"thread_id": "t"}}
    graph.compile(checkpointer=saver).invoke({"tasks": [], "scores": [1, 2], "floats": [], "d": {"b": 1}, "n": 0}, config)
    app = graph.compile(checkpointer=EventCkptSaver(reopen) if reopen else saver)

    def shown(values: dict[str, Any]) -> str:  # types, field values and key order, all of it
        return repr({**values, "tasks": [(t.id, t.status) for t in values.get("tasks", [])], "d": list(values.get("d", {}).items())})

    return {"history": [shown(s.values) for s in app.get_state_history(config)],
            "pending": sorted(repr(w[1:]) for t in saver.list(config) for w in (t.pending_writes or []))}


def test_replacements_equal_to_the_old_items_and_key_order_are_kept(tmp_path: Path, store_target: str) -> None:
    """Items replaced by equal ones (a field __eq__ leaves out, 1 -> 1.0) in a list that also grows, a
    dict channel's new key placed first, and a write the reducer turns into other types: the history
    read back (also by a new saver on the file) and the pending writes are SqliteSaver's."""
    expected, got = on_both(tmp_path, store_target, lambda saver: lookalikes(
        saver, reopen=store_target if isinstance(saver, EventCkptSaver) else None))
    assert "('t0', 'done')" in expected["history"][0] and "1.0, 2.0" in expected["history"][0]
    assert got == expected


# -- reducers and edits the append path must not take for appends ----------------------------------


def newest_first(old: list[Any], new: list[Any]) -> list[Any]:
    return list(new) + list(old)


class Newest(TypedDict):
    statuses: Annotated[list, newest_first]
    i: int


def prepended(saver: BaseCheckpointSaver, reopen: str | None = None) -> dict[str, Any]:
    """Two invokes of a graph whose reducer puts new items first, each item equal to the list's last."""
    seq = ["idle", "busy", "idle", "idle", "busy", "idle"]

    def step(state: Newest) -> dict[str, Any]:
        return {"statuses": [seq[state["i"] % len(seq)]], "i": state["i"] + 1}

    graph = StateGraph(Newest)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", lambda s: END if s["i"] % 3 == 0 else "step")
    config = {"configurable": {"thread_id": "t"}}
    app = graph.compile(checkpointer=saver)
    app.invoke({"statuses": [], "i": 0}, config, durability="sync")
    app.invoke({"statuses": ["busy"]}, config, durability="sync")
    app = graph.compile(checkpointer=EventCkptSaver(reopen) if reopen else saver)
    return {"history": [s.values for s in app.get_state_history(config)]}


def test_a_reducer_that_puts_new_items_first_is_not_stored_as_an_append(tmp_path: Path, store_target: str) -> None:
    """A list that grew by the written items with a tail equal to them but new items first is stored as it is."""
    expected, got = on_both(tmp_path, store_target, lambda saver: prepended(
        saver, reopen=store_target if isinstance(saver, EventCkptSaver) else None))
    assert expected["history"][0]["statuses"][:2] == ["idle", "busy"]
    assert got == expected


class Chat(TypedDict):
    messages: Annotated[list, add_messages]


def edited_through_the_saver(saver: BaseCheckpointSaver, reopen: str | None = None) -> list[Any]:
    """A run, then what update_state does with a list its caller edited in place: get_tuple, edit the
    first message of the list handed out, put the list plus a note as an "update"."""
    graph = StateGraph(Chat)
    graph.add_node("bot", lambda s: {"messages": [AIMessage("answer", id="a1")]})
    graph.add_edge(START, "bot")
    graph.add_edge("bot", END)
    config = {"configurable": {"thread_id": "t"}}
    graph.compile(checkpointer=saver).invoke({"messages": [HumanMessage("my ssn is 1", id="h0")]}, config)
    got = saver.get_tuple(config)
    assert got is not None
    messages = got.checkpoint["channel_values"]["messages"]
    messages[0].content = "[redacted]"
    versions = dict(got.checkpoint["channel_versions"])
    versions["messages"] = saver.get_next_version(versions["messages"], None)
    checkpoint = {**got.checkpoint, "id": str(uuid6(clock_seq=-2)), "channel_versions": versions,
                  "channel_values": {**got.checkpoint["channel_values"],
                                     "messages": messages + [HumanMessage("note", id="n1")]}}
    saver.put(got.config, checkpoint, {"source": "update", "step": 9, "parents": {}},
              {"messages": versions["messages"]})
    reader = EventCkptSaver(reopen) if reopen else saver
    return [m.content for m in reader.get_tuple(config).checkpoint["channel_values"]["messages"]]


def test_a_message_edited_in_place_after_get_tuple_is_stored_by_an_update(tmp_path: Path, store_target: str) -> None:
    """A list get_tuple handed out, edited in place and put back outside a run ("update"), is stored edited."""
    expected, got = on_both(tmp_path, store_target, lambda saver: edited_through_the_saver(
        saver, reopen=store_target if isinstance(saver, EventCkptSaver) else None))
    assert expected == ["[redacted]", "answer", "note"]
    assert got == expected


class Board(TypedDict):
    d: Annotated[dict, lambda a, b: {**a, **b}]


def edited_dict(saver: BaseCheckpointSaver, reopen: str | None, nested: bool = False) -> dict[str, Any]:
    """A node sets a key of a merged dict channel in place (or, `nested`, a key of one of its values):
    the newest state read through the same saver, and through a new one on the file."""
    def one(state: Board) -> dict[str, Any]:
        return {"d": {"status": "new", "n": 1, "inner": {"k": "old"}}}

    def two(state: Board) -> dict[str, Any]:
        if nested:
            state["d"]["inner"]["k"] = "edited"
        else:
            state["d"]["status"] = "done"
        return {"d": {"m": 2}}

    graph = StateGraph(Board)
    graph.add_node("one", one)
    graph.add_node("two", two)
    graph.add_edge(START, "one")
    graph.add_edge("one", "two")
    graph.add_edge("two", END)
    config = {"configurable": {"thread_id": "t"}}
    graph.compile(checkpointer=saver).invoke({"d": {}}, config, durability="sync")
    same = saver.get_tuple(config).checkpoint["channel_values"]["d"]
    if reopen is None:
        return {"same saver": same, "reopened": same}
    with EventCkptSaver(reopen) as fresh:
        return {"same saver": same, "reopened": fresh.get_tuple(config).checkpoint["channel_values"]["d"]}


def test_a_dict_key_set_in_place_by_a_node_is_stored(tmp_path: Path, store_target: str) -> None:
    """A merged dict channel whose key a node set in place is stored with it, as SqliteSaver stores it."""
    expected, got = on_both(tmp_path, store_target, lambda saver: edited_dict(
        saver, store_target if isinstance(saver, EventCkptSaver) else None))
    assert expected["same saver"]["status"] == "done"
    assert got == expected


def test_the_head_cache_holds_what_the_file_holds_after_a_nested_in_place_edit(store_target: str) -> None:
    """A value edited in place inside a merged dict (not stored, as documented) is not in the head cache either."""
    with EventCkptSaver(store_target) as saver:
        got = edited_dict(saver, store_target, nested=True)
    assert got["same saver"] == got["reopened"]


class Chat(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    profile: dict
    todo: list
    board: list
    settings: dict
    n: int


def edits_passed_back(saver: BaseCheckpointSaver, reopen: str | None) -> dict[str, Any]:
    """Values edited in place after a put (in what invoke returned, in the caller's own list, or in a slot of
    the list a node was given) and then put again: the newest values through the same saver and a new one."""
    def bot(state: Chat) -> dict[str, Any]:
        todo = state.get("todo") or []
        if todo and state.get("n"):
            todo[0] = "DONE " + todo[0]  # a slot of the list the node was given, then a new list built on it
        board, settings = state.get("board") or [], state.get("settings") or {"model": {"name": "m0"}}
        if board:
            board[0]["done"] = True  # an old item edited in place, in a channel without a reducer
            settings["model"]["name"] = "m1"
        return {"messages": [AIMessage("the password is hunter2", id=f"ai-{state.get('n', 0)}")],
                "profile": {"name": "ann", "address": {"city": "Paris"}},
                "todo": todo + [f"task {state.get('n', 0)}"],
                "board": board + [{"card": state.get("n", 0), "done": False}], "settings": settings}

    graph = StateGraph(Chat)
    graph.add_node("bot", bot)
    graph.add_edge(START, "bot")
    graph.add_edge("bot", END)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    for n in range(2):  # the second run's node edits a slot of the todo list it was given
        result = app.invoke({"messages": [HumanMessage("hi", id=f"h{n}")], "n": n}, config, durability="sync")
    after_runs = {k: v for k, v in saver.get_tuple(config).checkpoint["channel_values"].items()
                  if k in ("todo", "board", "settings")}
    result["messages"][-1].content = "[redacted]"  # what invoke returned, edited in place and passed back
    result["profile"]["address"]["city"] = "Lyon"
    app.update_state(config, {"messages": result["messages"] + [HumanMessage("thanks", id="h9")],
                              "profile": result["profile"]})
    mine = [{"task": "buy milk"}, {"task": "call bob"}]  # the caller's own list, put, edited, put again
    app.update_state(config, {"todo": mine})
    mine[0] = {"task": "buy oat milk"}
    app.update_state(config, {"todo": mine + [{"task": "email ann"}]})

    def newest(s: BaseCheckpointSaver) -> dict[str, Any]:
        values = s.get_tuple(config).checkpoint["channel_values"]
        return {"messages": [m.content for m in values["messages"]], "profile": values["profile"],
                "todo": values["todo"], "after runs": after_runs}

    if reopen is None:
        return {"same saver": newest(saver), "reopened": newest(saver)}
    with EventCkptSaver(reopen) as fresh:
        return {"same saver": newest(saver), "reopened": newest(fresh)}


def test_values_edited_in_place_and_put_again_are_stored_edited(tmp_path: Path, store_target: str) -> None:
    """What invoke returned or what the caller put before, edited in place and passed to update_state, is
    stored edited (outside a run every changed channel is compared with the stored value), and so is what
    a node returns for a channel without a reducer, built on the old value after assigning to one of its
    slots or editing an old item in place: as SqliteSaver stores them."""
    expected, got = on_both(tmp_path, store_target, lambda saver: edits_passed_back(
        saver, store_target if isinstance(saver, EventCkptSaver) else None))
    newest = expected["same saver"]
    assert newest["messages"] == ["hi", "the password is hunter2", "hi", "[redacted]", "thanks"]
    assert newest["profile"]["address"]["city"] == "Lyon"
    assert newest["todo"][0] == {"task": "buy oat milk"} and len(newest["todo"]) == 3
    assert newest["after runs"] == {"todo": ["DONE task 0", "task 1"], "settings": {"model": {"name": "m1"}},
                                    "board": [{"card": 0, "done": True}, {"card": 1, "done": False}]}
    assert got == expected


class Items(TypedDict, total=False):
    items: Annotated[list, operator.add]


def with_an_empty_checkpoint_id(saver: BaseCheckpointSaver) -> dict[str, Any]:
    """get_state, an invoke, list and put with checkpoint_id "" (an empty form field)."""
    graph = StateGraph(Items)
    graph.add_node("work", lambda s: {})
    graph.add_edge(START, "work")
    graph.add_edge("work", END)
    app = graph.compile(checkpointer=saver)
    app.invoke({"items": ["first"]}, {"configurable": {"thread_id": "t"}})
    empty = {"configurable": {"thread_id": "t", "checkpoint_id": ""}}
    seen = app.get_state(empty).values
    app.invoke({"items": ["second"]}, empty)
    listed = [t.checkpoint["channel_values"].get("items") for t in saver.list(empty)]
    newest = app.get_state({"configurable": {"thread_id": "t"}})
    return {"seen": seen, "after": newest.values, "listed": listed, "has parent": newest.parent_config is not None}


def test_an_empty_checkpoint_id_names_the_newest_checkpoint(tmp_path: Path, store_target: str) -> None:
    """checkpoint_id "" names the thread's newest checkpoint, as for LangGraph's own savers: get_state reads
    it and an invoke continues it (it did start the thread over from nothing)."""
    expected, got = on_both(tmp_path, store_target, with_an_empty_checkpoint_id)
    assert expected["after"] == {"items": ["first", "second"]}
    assert got == expected
