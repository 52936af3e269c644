"""Workload W on a real LangGraph StateGraph: EventCkptSaver against SqliteSaver (plain and DeltaChannel).

    python bench/langgraph_bench.py --steps 1000 [--dir /tmp/lgbench] [--durability normal|full|both]

One graph, one node: each superstep appends one ~400-byte message (workload W, bench/workload.py),
adds 120/40 to the token counters, sets `step` and changes 2 of the 20 `scratch` keys, then loops until
`--steps` supersteps ran (one invoke, one checkpoint per step). SqliteSaver runs it plain and with
`messages` as a DeltaChannel; EventCkptSaver runs it plain (it stores deltas by itself). Figures:

- saver time per step: the put/put_writes calls LangGraph made during a run, recorded once and replayed
  into each saver, the savers taking turns call by call (so load on a shared machine hits all alike);
- end-to-end time per step: the invoke's wall time over the steps (LangGraph's own work included);
- file bytes after the run (WAL checkpointed);
- get_state of the middle checkpoint and of the newest one (median of 7, on a freshly opened saver);
- get_state_history of the whole thread, and the saver's own `list` of it (median of 3).

Durability is compared like for like: "normal" runs SqliteSaver with `PRAGMA synchronous=NORMAL`
against eventckpt's durability="normal" (both survive a killed process); "full" runs SqliteSaver's
default (synchronous=FULL) against durability="full" (both also survive power loss).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
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

from langgraph.channels import DeltaChannel  # noqa: E402
from langgraph.checkpoint.base import BaseCheckpointSaver  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from workload import initial_scratch, steps  # noqa: E402

from eventckpt.langgraph import EventCkptSaver  # noqa: E402


def merge(old: dict[str, str], new: dict[str, str]) -> dict[str, str]:
    return {**old, **new}


def extend(state: list[Any], writes: list[list[Any]]) -> list[Any]:
    """DeltaChannel's reducer: the state and a batch of writes."""
    out = list(state)
    for items in writes:
        out.extend(items)
    return out


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


def build(n: int, schema: type) -> Any:
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


def first_input() -> dict[str, Any]:
    return {"messages": [], "input_tokens": 0, "output_tokens": 0, "step": 0, "scratch": initial_scratch()}


@contextlib.contextmanager
def sqlite_saver(path: Path, durability: str) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=" + ("NORMAL" if durability == "normal" else "FULL"))
    try:
        yield SqliteSaver(conn)
    finally:
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()


@contextlib.contextmanager
def eventckpt_saver(path: Path, durability: str) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(path, durability=durability) as saver:
        yield saver


def median_time(fn: Callable[[], Any], repeat: int) -> float:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


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


def record(n: int, schema: type) -> list[tuple[str, tuple[Any, ...]]]:
    recorder = Recorder()
    build(n, schema).compile(checkpointer=recorder).invoke(
        first_input(), {"configurable": {"thread_id": "w"}, "recursion_limit": n + 10})
    return recorder.calls


def replay(savers: dict[str, tuple[Any, list[Any]]], n: int) -> dict[str, float]:
    """Microseconds per step each saver spends in put/put_writes, replaying the recorded calls in turns."""
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


def run(
    name: str, make: Callable[[Path, str], Any], schema: type, n: int, path: Path, durability: str
) -> dict[str, Any]:
    graph = build(n, schema)
    config = {"configurable": {"thread_id": "w"}}
    with make(path, durability) as saver:
        app = graph.compile(checkpointer=saver)
        t = time.perf_counter()
        app.invoke(first_input(), {**config, "recursion_limit": n + 10})
        elapsed = time.perf_counter() - t
    out: dict[str, Any] = {"name": name, "step_us": elapsed / n * 1e6, "bytes": file_bytes(path)}
    with make(path, durability) as saver:  # freshly opened: nothing cached from the run
        app = graph.compile(checkpointer=saver)
        history = list(app.get_state_history(config))
        out["checkpoints"] = len(history)
        middle = history[len(history) // 2].config
        out["get_state_ms"] = median_time(lambda: app.get_state(middle), 7) * 1e3
        out["latest_ms"] = median_time(lambda: app.get_state(config), 7) * 1e3
        out["history_ms"] = median_time(lambda: list(app.get_state_history(config)), 3) * 1e3
        out["list_ms"] = median_time(lambda: list(saver.list(config)), 3) * 1e3
        assert app.get_state(middle).values["step"] == history[len(history) // 2].values["step"]
    return out


VARIANTS = (
    ("SqliteSaver", sqlite_saver, PlainState),
    ("SqliteSaver+DeltaChannel", sqlite_saver, DeltaState),
    ("EventCkptSaver", eventckpt_saver, PlainState),
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--dir", default="/tmp/eventckpt-langgraph-bench")
    parser.add_argument("--durability", choices=("normal", "full", "both"), default="both")
    args = parser.parse_args()
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    modes = ("normal", "full") if args.durability == "both" else (args.durability,)
    recorded = {schema: record(args.steps, schema) for schema in (PlainState, DeltaState)}
    try:
        for durability in modes:
            rows = []
            for name, make, schema in VARIANTS:
                path = root / f"{name.replace('+', '_')}-{durability}.db"
                clear(root, path.name)
                rows.append(run(name, make, schema, args.steps, path, durability))
                clear(root, path.name)
            with contextlib.ExitStack() as stack:
                savers = {}
                for name, make, schema in VARIANTS:
                    path = root / f"replay-{name.replace('+', '_')}.db"
                    clear(root, path.name)
                    savers[name] = (stack.enter_context(make(path, durability)), recorded[schema])
                saver_us = replay(savers, args.steps)
            for row in rows:
                row["saver_us"] = saver_us[row["name"]]
            clear(root, "replay-")
            report(rows, args.steps, durability)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def clear(root: Path, prefix: str) -> None:
    for stale in root.glob(prefix + "*"):
        stale.unlink()


def report(rows: list[dict[str, Any]], n: int, durability: str) -> None:
    print(f"\nworkload W, {n} steps, durability {durability!r} (SqliteSaver synchronous="
          f"{'NORMAL' if durability == 'normal' else 'FULL'})")
    print(f"{'saver':26} {'ckpts':>6} {'saver us':>9} {'e2e us':>8} {'file bytes':>13} {'mid ms':>7} {'latest ms':>9}"
          f" {'history ms':>10} {'list ms':>8}")
    for r in rows:
        print(f"{r['name']:26} {r['checkpoints']:6d} {r['saver_us']:9.0f} {r['step_us']:8.0f} {r['bytes']:13,d}"
              f" {r['get_state_ms']:7.2f} {r['latest_ms']:9.2f} {r['history_ms']:10.1f} {r['list_ms']:8.1f}")
    ours = rows[-1]
    for base in rows[:-1]:
        print(f"EventCkptSaver / {base['name']}: saver time per step {ours['saver_us'] / base['saver_us']:.2f}x,"
              f" end-to-end {ours['step_us'] / base['step_us']:.2f}x, file 1/{base['bytes'] / ours['bytes']:.0f},"
              f" get_state middle {ours['get_state_ms'] / base['get_state_ms']:.2f}x,"
              f" newest {ours['latest_ms'] / base['latest_ms']:.2f}x,"
              f" get_state_history {base['history_ms'] / ours['history_ms']:.1f}x faster,"
              f" saver.list {base['list_ms'] / ours['list_ms']:.0f}x faster")


if __name__ == "__main__":
    main()
