"""LangGraph savers side by side: EventCkptSaver against SqliteSaver (plain, and with a DeltaChannel).

    python bench/langgraph_bench.py --steps 1000 --long 24000 --invokes 500

Every comparison is measured in one run with the savers taking turns, so load on a shared machine hits
them alike, and printed as a ratio next to its target:

1. Workload W as a graph (`--steps`): one node appends W's ~400-byte message, adds the token counters,
   sets `step`, changes 2 of the 20 `scratch` keys, and runs again: one checkpoint per step, with
   durability="sync" (a step's checkpoint is in the file before the next step starts). The graphs run
   a step each in turn: graph step time (the whole superstep) and file bytes. Saver time per step: the
   put and put_writes calls LangGraph made during a run, recorded once, put in the order LangGraph
   means them (a step's writes before the next checkpoint; its background threads may deliver them
   later) and replayed into each saver, the savers taking turns call by call. A fourth graph takes its
   turns too, on a saver that keeps the newest checkpoint as the very objects it is handed: LangGraph's
   own loop, the floor no saver's graph step can go below. Then, on freshly opened
   savers taking turns, get_state of the newest and of the middle checkpoint, `list` of every
   checkpoint and get_state_history (medians).
2. W for `--long` steps on EventCkptSaver: its saver time per step over the last 1000 steps against the
   first 1000 of a fresh run on another file (a put must cost what changed, not the conversation). The
   two windows run in turns, a step each, so a machine whose speed drifts weighs on both alike.
3. An agent graph with real LangChain messages (`--invokes`): each invoke adds a HumanMessage, an
   AIMessage with a tool call and a ToolMessage (`add_messages`), SqliteSaver and EventCkptSaver invoking
   in turns (with the floor saver too): time per invoke over the last tenth of the invokes, get_state of the
   newest and of the middle checkpoint, get_state_history, file bytes.

Durability is like for like: "normal" runs SqliteSaver with `PRAGMA synchronous=NORMAL` against
eventckpt's durability="normal" (both survive a killed process); "full" runs synchronous=FULL against
durability="full" (both also survive power loss).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import functools
import gc
import operator
import shutil
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langgraph.channels import DeltaChannel  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.graph.message import add_messages  # noqa: E402
from workload import WORDS, initial_scratch, steps  # noqa: E402

from eventckpt.langgraph import EventCkptSaver  # noqa: E402

CONFIG = {"configurable": {"thread_id": "w"}}


def merge(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    return {**old, **new}


def extend(state: list[Any], writes: list[list[Any]]) -> list[Any]:
    """DeltaChannel's reducer: the state and a batch of writes."""
    return state + [item for batch in writes for item in batch]


class PlainState(TypedDict):
    messages: Annotated[list, operator.add]
    input_tokens: Annotated[int, operator.add]
    output_tokens: Annotated[int, operator.add]
    step: int
    scratch: Annotated[dict, merge]


class DeltaState(TypedDict):
    messages: Annotated[list, DeltaChannel(extend)]
    input_tokens: Annotated[int, operator.add]
    output_tokens: Annotated[int, operator.add]
    step: int
    scratch: Annotated[dict, merge]


def w_graph(n: int, schema: type) -> Any:
    work = list(steps(n))

    def agent(state: dict[str, Any]) -> dict[str, Any]:
        s = work[state["step"]]
        return {"messages": [s.message], "input_tokens": 120, "output_tokens": 40, "step": s.step,
                "scratch": s.scratch}

    graph = StateGraph(schema)
    graph.add_node("agent", agent)
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", lambda s: "agent" if s["step"] < n else END)
    return graph


def w_input() -> dict[str, Any]:
    return {"messages": [], "input_tokens": 0, "output_tokens": 0, "step": 0, "scratch": initial_scratch()}


class AgentState(TypedDict):
    messages: Annotated[list, add_messages]


def words(n: int, count: int) -> str:
    return " ".join(WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(count))


def agent_graph() -> Any:
    """A tool-calling agent: the model asks for a search, the tool answers (3 messages per invoke)."""
    def agent(state: AgentState) -> dict[str, Any]:
        n = len(state["messages"])
        call = {"name": "search", "args": {"query": words(n, 6), "page": n % 5}, "id": f"call-{n}"}
        return {"messages": [AIMessage(words(n, 30), id=f"ai-{n}", tool_calls=[call],
                                       usage_metadata={"input_tokens": 120 + n, "output_tokens": 40,
                                                       "total_tokens": 160 + n})]}

    def tools(state: AgentState) -> dict[str, Any]:
        call = state["messages"][-1].tool_calls[0]
        n = len(state["messages"])
        return {"messages": [ToolMessage(words(n, 60), tool_call_id=call["id"], name="search", id=f"tool-{n}")]}

    graph = StateGraph(AgentState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", END)
    return graph


# -- savers ---------------------------------------------------------------------------------------


@contextlib.contextmanager
def sqlite_saver(path: Path, durability: str) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()  # WAL, as SqliteSaver sets it; then the durability asked for
    conn.execute("PRAGMA synchronous=" + ("NORMAL" if durability == "normal" else "FULL"))
    try:
        yield saver
    finally:
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()


@contextlib.contextmanager
def eventckpt_saver(path: Path, durability: str) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(path, durability=durability) as saver:
        yield saver


class Keeping(BaseCheckpointSaver):
    """The floor under every saver: keeps each thread's newest checkpoint as the very objects LangGraph
    handed it (no copy, no serialization, no history). A graph on it costs what LangGraph's own loop
    costs, so a saver's graph step or invoke can get no closer to zero than this."""

    def __init__(self) -> None:
        super().__init__()
        self.newest: dict[tuple[str, str], CheckpointTuple] = {}

    def get_tuple(self, config: Any) -> CheckpointTuple | None:
        conf = config["configurable"]
        return self.newest.get((conf["thread_id"], conf.get("checkpoint_ns", "")))

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        conf = config["configurable"]
        saved = {"configurable": {"thread_id": conf["thread_id"], "checkpoint_ns": conf.get("checkpoint_ns", ""),
                                  "checkpoint_id": checkpoint["id"]}}
        self.newest[(conf["thread_id"], conf.get("checkpoint_ns", ""))] = CheckpointTuple(
            saved, checkpoint, metadata, config if conf.get("checkpoint_id") else None, [])
        return saved

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        pass


@contextlib.contextmanager
def keeping_saver(path: Path, durability: str) -> Iterator[Keeping]:
    yield Keeping()


FLOOR = "no saver (floor)"


class Timed:
    """Wraps a saver's put and put_writes to add up the time spent in them."""

    def __init__(self, saver: Any) -> None:
        self.saver, self.spent = saver, 0.0
        for name in ("put", "put_writes"):
            setattr(saver, name, self._timed(getattr(saver, name)))

    def _timed(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)  # LangGraph reads the signature (whether put_writes takes task_path)
        def call(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - t
        return call

    def take(self) -> float:
        spent, self.spent = self.spent, 0.0
        return spent


def file_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


class Recorder(InMemorySaver):
    """Records the put/put_writes calls of a run (with LangGraph's default integer channel versions)."""

    get_next_version = BaseCheckpointSaver.get_next_version

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        self.calls.append(("put", (config, copy.copy(checkpoint), dict(metadata), dict(new_versions))))
        return super().put(config, checkpoint, metadata, new_versions)

    def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> None:
        self.calls.append(("put_writes", (config, list(writes), task_id, task_path)))
        super().put_writes(config, writes, task_id, task_path)


def recorded(n: int, schema: type) -> list[tuple[str, tuple[Any, ...]]]:
    """A run's saver calls, each put after every write to its parent checkpoint."""
    recorder = Recorder()
    w_graph(n, schema).compile(checkpointer=recorder).invoke(
        w_input(), {**CONFIG, "recursion_limit": n + 10}, durability="sync")
    writes: dict[str, list[Any]] = {}
    for call in recorder.calls:
        if call[0] == "put_writes":
            writes.setdefault(call[1][0]["configurable"]["checkpoint_id"], []).append(call)
    out = []
    for call in recorder.calls:
        if call[0] == "put":
            out.extend(writes.pop(call[1][0]["configurable"].get("checkpoint_id"), []))
            out.append(call)
    out.extend(c for cs in writes.values() for c in cs)
    return out


def replay(savers: dict[str, tuple[Any, list[Any]]], n: int) -> dict[str, float]:
    """Microseconds per step each saver spends in put/put_writes, replaying the calls in turns."""
    spent = dict.fromkeys(savers, 0.0)
    gc.collect()
    gc.freeze()  # the recorded calls hold many objects: keep collections from billing them to a saver
    try:
        for i in range(max(len(calls) for _, calls in savers.values())):
            for name, (saver, calls) in savers.items():
                if i < len(calls):
                    method, args = calls[i]
                    t = time.perf_counter()
                    getattr(saver, method)(*args)
                    spent[name] += time.perf_counter() - t
    finally:
        gc.unfreeze()
    return {name: total / n * 1e6 for name, total in spent.items()}


def in_turns(calls: dict[str, Callable[[], Any]], rounds: int) -> dict[str, float]:
    """Median seconds of each call, the calls taking turns round after round."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            t = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - t)
    return {name: statistics.median(ts) for name, ts in times.items()}


# -- 1. W as a graph ----------------------------------------------------------------------------------

W_SAVERS = (
    ("SqliteSaver", sqlite_saver, PlainState),
    ("SqliteSaver+DeltaChannel", sqlite_saver, DeltaState),
    ("EventCkptSaver", eventckpt_saver, PlainState),
)


def run_w(n: int, root: Path, durability: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {name: {} for name, _, _ in W_SAVERS}
    paths = {name: root / f"w-{i}.db" for i, (name, _, _) in enumerate(W_SAVERS)}
    calls = {schema: recorded(n, schema) for schema in (PlainState, DeltaState)}
    with contextlib.ExitStack() as stack:
        savers = {name: (stack.enter_context(make(root / f"replay-{i}.db", durability)), calls[schema])
                  for i, (name, make, schema) in enumerate(W_SAVERS)}
        for name, us in replay(savers, n).items():
            out[name]["saver_us"] = us
    del calls
    with contextlib.ExitStack() as stack:
        runs = {}
        for name, make, schema in (*W_SAVERS, (FLOOR, keeping_saver, PlainState)):
            saver = stack.enter_context(make(paths.get(name, root / "floor"), durability))
            app = w_graph(n, schema).compile(checkpointer=saver)
            runs[name] = (app.stream(w_input(), {**CONFIG, "recursion_limit": n + 10}, stream_mode="updates",
                                     durability="sync"), [])
        live = dict(runs)
        gc.collect()
        while live:  # one superstep of each graph in turn
            for name in list(live):
                chunks, wall = live[name]
                t = time.perf_counter()
                if next(chunks, None) is None:
                    del live[name]
                    continue
                wall.append(time.perf_counter() - t)
        for name, (_, wall) in runs.items():
            out.setdefault(name, {})["step_us"] = statistics.median(wall) * 1e6
    for name in paths:
        out[name]["bytes"] = file_bytes(paths[name])
    with contextlib.ExitStack() as stack:  # freshly opened: nothing cached from the run
        apps, middles, savers = {}, {}, {}
        for name, make, schema in W_SAVERS:
            savers[name] = stack.enter_context(make(paths[name], durability))
            apps[name] = w_graph(n, schema).compile(checkpointer=savers[name])
            history = [h.config for h in apps[name].get_state_history(CONFIG)]
            out[name]["checkpoints"] = len(history)
            middles[name] = history[len(history) // 2]
        for kind, call in (("latest_ms", lambda a, s, m: a.get_state(CONFIG)),
                           ("middle_ms", lambda a, s, m: a.get_state(m)),
                           ("list_ms", lambda a, s, m: list(s.list(CONFIG))),
                           ("history_ms", lambda a, s, m: list(a.get_state_history(CONFIG)))):
            rounds = 15 if kind in ("latest_ms", "middle_ms") else 3
            times = in_turns({name: functools.partial(call, apps[name], savers[name], middles[name])
                              for name in apps}, rounds)
            for name, seconds in times.items():
                out[name][kind] = seconds * 1e3
        expected = apps["SqliteSaver"].get_state(middles["SqliteSaver"]).values["step"]
        assert apps["EventCkptSaver"].get_state(middles["EventCkptSaver"]).values["step"] == expected
    return out


# -- 2. W on EventCkptSaver for many steps ----------------------------------------------------------------


def run_long(n: int, root: Path, durability: str) -> dict[str, float]:
    """The saver time of W's last `window` steps of an n-step run against the first `window` steps of a
    fresh run, the two runs taking turns step by step (so that a machine whose speed drifts during the
    long run weighs on both windows alike), each on its own file."""
    window = min(1000, max(1, n // 4))
    per_step: dict[str, list[float]] = {"first": [], "last": []}
    with eventckpt_saver(root / "long.db", durability) as long_saver, \
            eventckpt_saver(root / "first.db", durability) as fresh_saver:
        runs = {}
        for name, saver, steps in (("last", long_saver, n), ("first", fresh_saver, window)):
            timed = Timed(saver)
            app = w_graph(steps, PlainState).compile(checkpointer=timed.saver)
            runs[name] = (timed, app.stream(w_input(), {**CONFIG, "recursion_limit": steps + 10},
                                            stream_mode="updates", durability="sync"))
        timed, run = runs["last"]
        for _ in range(n - window):  # the long run up to its last window, alone
            next(run)
        timed.take()
        for _ in range(window):
            for name, (timed, run) in runs.items():
                next(run)
                per_step[name].append(timed.take())
        for _, run in runs.values():
            for _ in run:  # the graphs' last updates
                pass
    return {"steps": n, "window": window, "first_us": statistics.median(per_step["first"]) * 1e6,
            "last_us": statistics.median(per_step["last"]) * 1e6}


# -- 3. an agent graph with real messages ----------------------------------------------------------------

AGENT_SAVERS = (("SqliteSaver", sqlite_saver), ("EventCkptSaver", eventckpt_saver))


def run_agent(invokes: int, root: Path, durability: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {name: {} for name, _ in AGENT_SAVERS}
    paths = {name: root / f"agent-{i}.db" for i, (name, _) in enumerate(AGENT_SAVERS)}
    with contextlib.ExitStack() as stack:
        apps = {name: agent_graph().compile(checkpointer=stack.enter_context(make(paths.get(name, root), durability)))
                for name, make in (*AGENT_SAVERS, (FLOOR, keeping_saver))}
        times: dict[str, list[float]] = {name: [] for name in apps}
        for i in range(invokes):
            for name, app in apps.items():
                t = time.perf_counter()
                app.invoke({"messages": [HumanMessage(words(i, 15), id=f"human-{i}")]}, CONFIG)
                times[name].append(time.perf_counter() - t)
        tail = max(1, invokes // 10)
        for name in apps:
            out.setdefault(name, {})["invoke_ms"] = statistics.median(times[name][-tail:]) * 1e3
            out[name]["messages"] = len(apps[name].get_state(CONFIG).values["messages"])
        assert out[FLOOR]["messages"] == out["EventCkptSaver"]["messages"]  # the floor did the same work
    for name in paths:
        out[name]["bytes"] = file_bytes(paths[name])
    with contextlib.ExitStack() as stack:
        apps = {name: agent_graph().compile(checkpointer=stack.enter_context(make(paths[name], durability)))
                for name, make in AGENT_SAVERS}
        for name, seconds in in_turns({name: functools.partial(app.get_state, CONFIG)
                                       for name, app in apps.items()}, 15).items():
            out[name]["latest_ms"] = seconds * 1e3
        for name, seconds in in_turns({name: functools.partial(lambda a: list(a.get_state_history(CONFIG)), app)
                                       for name, app in apps.items()}, 1).items():
            out[name]["history_ms"] = seconds * 1e3
        middles = {}
        for name, app in apps.items():
            history = [h.config for h in app.get_state_history(CONFIG)]
            middles[name] = history[len(history) // 2]
        for name, seconds in in_turns({name: functools.partial(app.get_state, middles[name])
                                       for name, app in apps.items()}, 15).items():
            out[name]["middle_ms"] = seconds * 1e3
        assert (apps["EventCkptSaver"].get_state(middles["EventCkptSaver"]).values
                == apps["SqliteSaver"].get_state(middles["SqliteSaver"]).values)
        assert apps["EventCkptSaver"].get_state(CONFIG).values == apps["SqliteSaver"].get_state(CONFIG).values
    return out


# -- report -----------------------------------------------------------------------------------------------

FIGURES: list[tuple[str, float, str, bool]] = []  # (what, value, target, met)


def figure(what: str, value: float, target: str, met: bool) -> None:
    FIGURES.append((what, value, target, met))


def report_w(out: dict[str, dict[str, float]], n: int) -> None:
    print(f"\nworkload W as a graph, {n} steps")
    print(f"{'saver':26} {'ckpts':>6} {'step us':>8} {'saver us':>9} {'file bytes':>13} {'newest ms':>9} {'middle ms':>9}"
          f" {'list ms':>9} {'history ms':>10}")
    floor = out.pop(FLOOR)["step_us"]
    for name, r in out.items():
        print(f"{name:26} {r['checkpoints']:6.0f} {r['step_us']:8.0f} {r['saver_us']:9.0f} {r['bytes']:13,.0f}"
              f" {r['latest_ms']:9.2f} {r['middle_ms']:9.2f} {r['list_ms']:9.1f} {r['history_ms']:10.1f}")
    print(f"{FLOOR:26} {'':6} {floor:8.0f}   (LangGraph's own loop: the checkpoint kept as the objects handed over)")
    ours, sq, delta = out["EventCkptSaver"], out["SqliteSaver"], out["SqliteSaver+DeltaChannel"]
    for base_name, base in (("SqliteSaver", sq), ("SqliteSaver+DeltaChannel", delta)):
        print(f"EventCkptSaver / {base_name}: graph step {ours['step_us'] / base['step_us']:.2f}x,"
              f" saver time {ours['saver_us'] / base['saver_us']:.2f}x, file 1/{base['bytes'] / ours['bytes']:.0f},"
              f" get_state newest {ours['latest_ms'] / base['latest_ms']:.2f}x,"
              f" middle {ours['middle_ms'] / base['middle_ms']:.2f}x,"
              f" list {base['list_ms'] / ours['list_ms']:.0f}x faster")
    figure(f"W {n}: graph step / SqliteSaver's", ours["step_us"] / sq["step_us"], "<= 0.5", ours["step_us"] <= 0.5 * sq["step_us"])
    print(f"floor / SqliteSaver's graph step: {floor / sq['step_us']:.2f}x (no saver can go below it);"
          f" EventCkptSaver's step above the floor: {ours['step_us'] - floor:.0f} us")
    figure(f"W {n}: saver time / DeltaChannel's", ours["saver_us"] / delta["saver_us"], "<= 1.0",
           ours["saver_us"] <= delta["saver_us"])
    figure(f"W {n}: file / SqliteSaver's", ours["bytes"] / sq["bytes"], "<= 1/150 (0.00667)",
           ours["bytes"] * 150 <= sq["bytes"])
    figure(f"W {n}: get_state newest / SqliteSaver's", ours["latest_ms"] / sq["latest_ms"], "<= 1.0",
           ours["latest_ms"] <= sq["latest_ms"])
    figure(f"W {n}: get_state middle / SqliteSaver's", ours["middle_ms"] / sq["middle_ms"], "<= 1.0",
           ours["middle_ms"] <= sq["middle_ms"])
    figure(f"W {n}: list of {ours['checkpoints']:.0f} checkpoints, SqliteSaver's / ours", sq["list_ms"] / ours["list_ms"],
           ">= 50", sq["list_ms"] >= 50 * ours["list_ms"])


def report_long(out: dict[str, float], n: int) -> None:
    print(f"\nworkload W on EventCkptSaver, {out['steps']:.0f} steps: saver time per step (median of"
          f" {out['window']:.0f}, the windows taking turns): first {out['first_us']:.0f} us (a fresh run),"
          f" last {out['last_us']:.0f} us")
    figure(f"W {n}: saver time, last {out['window']:.0f} steps / first {out['window']:.0f}",
           out["last_us"] / out["first_us"], "<= 1.2", out["last_us"] <= 1.2 * out["first_us"])


def report_agent(out: dict[str, dict[str, float]], invokes: int) -> None:
    print(f"\nagent graph with LangChain messages, {invokes} invokes")
    print(f"{'saver':16} {'messages':>8} {'invoke ms':>9} {'file bytes':>13} {'newest ms':>9} {'middle ms':>9}"
          f" {'history ms':>10}")
    floor = out.pop(FLOOR)["invoke_ms"]
    for name, r in out.items():
        print(f"{name:16} {r['messages']:8.0f} {r['invoke_ms']:9.2f} {r['bytes']:13,.0f} {r['latest_ms']:9.2f}"
              f" {r['middle_ms']:9.2f} {r['history_ms']:10.1f}")
    print(f"{FLOOR:16} {'':8} {floor:9.2f}   (LangGraph's own loop)")
    ours, sq = out["EventCkptSaver"], out["SqliteSaver"]
    fresh = floor + min(ours["latest_ms"], sq["latest_ms"])
    print(f"floor / SqliteSaver's invoke: {floor / sq['invoke_ms']:.2f}x (no saver can go below it);"
          f" EventCkptSaver's invoke above the floor: {ours['invoke_ms'] - floor:.2f} ms")
    print(f"a saver that hands out fresh objects also builds the state once an invoke (its get_tuple at the"
          f" loop's start): floor + the faster get_state = {fresh:.2f} ms, {fresh / sq['invoke_ms']:.2f}x SqliteSaver's invoke")
    print(f"EventCkptSaver / SqliteSaver: invoke {ours['invoke_ms'] / sq['invoke_ms']:.2f}x,"
          f" get_state {ours['latest_ms'] / sq['latest_ms']:.2f}x (middle {ours['middle_ms'] / sq['middle_ms']:.2f}x),"
          f" get_state_history"
          f" {ours['history_ms'] / sq['history_ms']:.3f}x, file 1/{sq['bytes'] / ours['bytes']:.0f}")
    at = f"agent {ours['messages']:.0f} messages"
    figure(f"{at}: invoke / SqliteSaver's", ours["invoke_ms"] / sq["invoke_ms"], "<= 0.3",
           ours["invoke_ms"] <= 0.3 * sq["invoke_ms"])
    figure(f"{at}: get_state / SqliteSaver's", ours["latest_ms"] / sq["latest_ms"], "<= 1.0",
           ours["latest_ms"] <= sq["latest_ms"])
    figure(f"{at}: get_state_history / SqliteSaver's", ours["history_ms"] / sq["history_ms"], "<= 0.1",
           ours["history_ms"] <= 0.1 * sq["history_ms"])
    figure(f"{at}: file / SqliteSaver's", ours["bytes"] / sq["bytes"], "<= 1/100 (0.01)", ours["bytes"] * 100 <= sq["bytes"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000, help="steps of W on the three savers (0: skip)")
    parser.add_argument("--long", type=int, default=24000, help="steps of W on EventCkptSaver alone (0: skip)")
    parser.add_argument("--invokes", type=int, default=500, help="invokes of the agent graph (0: skip)")
    parser.add_argument("--dir", default="/tmp/eventckpt-langgraph-bench")
    parser.add_argument("--durability", choices=("normal", "full"), default="normal")
    args = parser.parse_args()
    root = Path(args.dir)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    print(f"durability {args.durability!r} (SqliteSaver synchronous={'NORMAL' if args.durability == 'normal' else 'FULL'})")
    try:
        if args.steps:
            report_w(run_w(args.steps, root, args.durability), args.steps)
        if args.long:
            report_long(run_long(args.long, root, args.durability), args.long)
        if args.invokes:
            report_agent(run_agent(args.invokes, root, args.durability), args.invokes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print("\nfigure | value | target | met")
    for what, value, target, met in FIGURES:
        print(f"{what} | {value:.4g} | {target} | {'yes' if met else 'NO'}")


if __name__ == "__main__":
    main()
