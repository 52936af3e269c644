"""Workload W as a LangGraph graph, run with LangGraph's SqliteSaver (plain, and with the messages in a
DeltaChannel) and with eventckpt's own saver when this build has `eventckpt.langgraph`.

The graph is an agent loop: one node, `agent`, loops on itself until W's last step, so each W step is one
superstep and one checkpoint (no per-step input checkpoints). It runs with `durability="sync"`, so a
step's checkpoint is in the file before the next step starts, as eventckpt's commits are. A step's save
time is the time spent inside the saver's `put` and `put_writes` for that step; its wall time is the
whole superstep (graph overhead included).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import inspect
import operator
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Annotated, Any, TypedDict

import eventckpt
from harness import Recorder, Unavailable
from systems import HISTORY_PATH, SYNCHRONOUS, count
from workload import initial_scratch, steps

try:
    from langgraph.graph import END, START, StateGraph

    LANGGRAPH_MISSING = ""
except ImportError as exc:
    LANGGRAPH_MISSING = f"langgraph is not installed ({exc})"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def delta_channel() -> tuple[Any, str]:
    """(DeltaChannel, "") when the installed langgraph has it, else (None, why not)."""
    try:
        from langgraph.channels import DeltaChannel
    except ImportError:
        try:
            from langgraph.channels.delta import DeltaChannel
        except ImportError:
            return None, f"langgraph {_version('langgraph')} has no DeltaChannel (langgraph.channels.DeltaChannel)"
    return DeltaChannel, ""


def eventckpt_saver() -> tuple[Any, str]:
    """(EventCkptSaver, "") when this eventckpt has its LangGraph saver, else (None, why not)."""
    try:
        module = importlib.import_module("eventckpt.langgraph")
    except ImportError as exc:
        if getattr(exc, "name", None) == "eventckpt.langgraph":
            return None, "eventckpt.langgraph is not in this build (issue 5 adds it)"
        return None, f"eventckpt.langgraph does not import: {exc!r}"
    saver = getattr(module, "EventCkptSaver", None)
    if saver is None:
        return None, "eventckpt.langgraph has no EventCkptSaver"
    return saver, ""


def merge(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return {**old, **new}


def extend(messages: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """DeltaChannel's reducer: a batch of writes, each a list of new messages."""
    return messages + [m for w in writes for m in w]


def state_schema(delta: bool) -> type:
    messages: Any = Annotated[list, operator.add]
    if delta:
        DeltaChannel, _ = delta_channel()
        messages = Annotated[list, DeltaChannel(extend)]
    return TypedDict("WState", {  # type: ignore[operator]
        "messages": messages,
        "step": int,
        "scratch": Annotated[dict, merge],
        "input_tokens": Annotated[int, operator.add],
        "output_tokens": Annotated[int, operator.add],
    })


def build_graph(delta: bool, node: Callable[[dict[str, Any]], dict[str, Any]],
                route: Callable[[dict[str, Any]], str], checkpointer: Any) -> Any:
    graph = StateGraph(state_schema(delta))
    graph.add_node("agent", node)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", route, ["agent", END])
    return graph.compile(checkpointer=checkpointer)


class Graph:
    """W on a LangGraph graph with one saver: `sqlite` (SqliteSaver) or `eventckpt` (EventCkptSaver)."""

    THREAD = {"thread_id": "w", "checkpoint_ns": ""}

    def __init__(self, saver: str, delta: bool = False, durability: str = "normal") -> None:
        self.saver_kind, self.delta, self.durability = saver, delta, durability
        self.driver = "sqlite3" if saver == "sqlite" else "apsw"
        self.label = {"sqlite": "LangGraph SqliteSaver", "eventckpt": "LangGraph EventCkptSaver"}[saver]
        if delta:
            self.label += " + DeltaChannel"
        self.ids: dict[int, str] = {}  # W step -> checkpoint id
        self._closers: list[Callable[[], None]] = []

    def missing(self) -> str:
        """Why this system cannot run here ("" when it can)."""
        if LANGGRAPH_MISSING:
            return LANGGRAPH_MISSING
        if self.delta and delta_channel()[1]:
            return delta_channel()[1]
        if self.saver_kind == "eventckpt" and eventckpt_saver()[1]:
            return eventckpt_saver()[1]
        return ""

    def open(self, path: str) -> None:
        if self.saver_kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            conn = sqlite3.connect(path, check_same_thread=False)
            self.saver = SqliteSaver(conn)
            self.saver.setup()  # WAL, as SqliteSaver sets it; then the same durability as every system
            conn.execute(f"PRAGMA synchronous = {SYNCHRONOUS[self.durability]}")
            self._closers.append(conn.close)
        else:
            EventCkptSaver, _ = eventckpt_saver()
            store = eventckpt.open(path, durability=self.durability)
            try:
                self.saver = EventCkptSaver(store)
                self._closers.append(store.close)
            except TypeError:  # a saver built from a path only (then with its own durability)
                store.close()
                self.saver = EventCkptSaver(path)
            if hasattr(self.saver, "close"):
                self._closers.insert(0, self.saver.close)
        self.graph = build_graph(self.delta, lambda state: {}, lambda state: END, self.saver)

    def close(self) -> None:
        while self._closers:
            self._closers.pop(0)()

    def write(self, n: int, rec: Recorder) -> None:
        saver, work = self.saver, steps(n)
        box = {"in_saver": 0.0, "entered": None}  # saver time since the last node entry; that entry

        def timed(method: Callable[..., Any], keep_id: bool) -> Callable[..., Any]:
            signature = inspect.signature(method)

            @functools.wraps(method)  # LangGraph reads the signature (whether put_writes takes task_path)
            def call(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                out = method(*args, **kwargs)
                box["in_saver"] += time.perf_counter() - t0
                if keep_id:  # the config put returns names the new checkpoint
                    step = signature.bind(*args, **kwargs).arguments["metadata"]["step"]
                    self.ids[step] = out["configurable"]["checkpoint_id"]
                return out
            return call

        saver.put = timed(saver.put, True)
        saver.put_writes = timed(saver.put_writes, False)

        def agent(state: dict[str, Any]) -> dict[str, Any]:
            now = time.perf_counter()
            if box["entered"] is not None:  # the previous step's checkpoint is saved: record it
                rec.record(box["in_saver"], now - box["entered"])
            box["in_saver"], box["entered"] = 0.0, now
            s = next(work)
            return {"messages": [s.message], "step": s.step, "scratch": s.scratch,
                    "input_tokens": 120, "output_tokens": 40}

        def route(state: dict[str, Any]) -> str:
            return END if state["step"] >= n or rec.should_stop() else "agent"

        graph = build_graph(self.delta, agent, route, saver)
        start = {"messages": [], "step": 0, "scratch": initial_scratch(), "input_tokens": 0, "output_tokens": 0}
        graph.invoke(start, {"configurable": dict(self.THREAD), "recursion_limit": n + 10}, durability="sync")
        rec.record(box["in_saver"], time.perf_counter() - box["entered"])
        del saver.put, saver.put_writes

    def _config(self, version: int | None = None) -> dict[str, Any]:
        configurable = dict(self.THREAD)
        if version is not None:
            configurable["checkpoint_id"] = self.ids[version]
        return {"configurable": configurable}

    def restore(self, version: int) -> dict[str, Any]:
        return self.graph.get_state(self._config(version)).values

    def log(self, limit: int, deadline: float) -> int:
        """get_state_history: what LangGraph users list a thread's checkpoints with (each one decoded)."""
        rows = 0
        for _ in self.graph.get_state_history(self._config(), limit=limit):
            rows += 1
            if time.perf_counter() > deadline:
                break
        return rows

    def history(self, deadline: float) -> int:
        """EventCkptSaver's thread is a stream: its history of a channel is the native history."""
        return count(self._thread().history(HISTORY_PATH))

    def diff(self, a: int, b: int) -> int:
        thread = self._thread()
        found = [thread.find(self.ids[step]) for step in (a, b)]
        assert found[0] is not None and found[1] is not None
        return count(thread.diff(found[0].version, found[1].version))

    def _thread(self) -> Any:
        """The thread's stream on EventCkptSaver's store (LangGraph's own savers store each checkpoint as one
        serialized blob: no per-path history, no diff)."""
        if self.saver_kind != "eventckpt":
            raise Unavailable("no per-path history or diff (each checkpoint is one serialized blob)")
        return self.saver.store.stream("langgraph:" + self.THREAD["thread_id"])
