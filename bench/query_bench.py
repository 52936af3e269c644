"""log, history and diff on workload W, each next to the naive way of answering the same question.

    python bench/query_bench.py --steps 100000            # builds W once (about a minute per 100k steps)
    python bench/query_bench.py --db /tmp/w.db --keep      # reuse a file built before

Measured, each as the median of --repeat runs after a warm-up, in one process on one file:
  log      log(3000): the newest 3000 checkpoints            vs  get(v) for each of them
  history  history(("scratch", "k05")) over every version    vs  a scan of the stream's events in order
           (and with limit=100: the newest changes only)
  diff     diff(v, v + 10000) (paths; values read lazily)    vs  state(v) and state(v + 10000), compared
  diff+    the same diff with every appended value read
Targets (DESIGN/issue 3): log <= 10 ms, history <= 50 ms, diff <= 20 ms. Ratios are to the naive way,
measured side by side, because these machines are shared and noisy. --overhead N also times N W saves
with and without schema 002's write-side index and triggers, interleaved, and prints the ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eventckpt  # noqa: E402
from eventckpt.diffing import MISSING, _compare  # noqa: E402
from harness import Recorder  # noqa: E402
from systems import EventckptTx  # noqa: E402

TARGETS_MS = {"log": 10.0, "history": 50.0, "diff": 20.0}


def timed(fn: Callable[[], Any], repeat: int) -> tuple[tuple[float, float], Any]:
    """(median, best) of `repeat` runs in ms after a warm-up, and the result (to report its size)."""
    result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return (statistics.median(times) * 1e3, min(times) * 1e3), result


def naive_history(store: eventckpt.Store, path_text: str) -> list[tuple[Any, ...]]:
    """What answering history costs without the path index: every event of the stream, in order."""
    journal = store.core.backend.journal
    row, head = journal.stream_and_head("w")
    return [r for r in journal.tail(store.core.segments(journal, row, head), 0) if r[3] == path_text]


def naive_diff(task: eventckpt.CheckpointStore, a: int, b: int) -> list[Any]:
    old, new, out = task.state(a), task.state(b), []
    for key in {**old, **new}:
        _compare((key,), old.get(key, MISSING), new.get(key, MISSING), out)
    return out


WRITE_SIDE = ("DROP INDEX events_reshaping", "DROP INDEX versions_by_name", "DROP TRIGGER metadata_index_insert",
              "DROP TRIGGER metadata_index_delete")


def write_overhead(steps: int, workdir: str) -> None:
    """W saves on stores with and without schema 002's write-side index and triggers, plain and with
    LangGraph-like metadata (three indexed values), interleaved in chunks so all see the same machine."""
    from workload import initial_scratch, steps as w_steps

    stores = {}
    for label in ("with", "without"):
        for meta in (False, True):
            path = os.path.join(workdir, f"overhead-{label}-{meta}.db")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            store = eventckpt.open(path)
            if label == "without":
                for sql in WRITE_SIDE:
                    store.core.backend.journal.conn.execute(sql)
            store.stream("w").save({"messages": [], "step": 0, "scratch": initial_scratch()})
            stores[(label, meta)] = store
    times: dict[tuple[str, bool], list[float]] = {key: [] for key in stores}
    work = list(w_steps(steps))
    for start in range(0, steps, 250):
        for (label, meta), store in stores.items():
            stream = store.stream("w")
            for s in work[start : start + 250]:
                t0 = time.perf_counter()
                with stream.transaction(metadata={"source": "loop", "step": s.step, "node": "agent"} if meta else None) as tx:
                    tx.append("messages", s.message)
                    tx.set("step", s.step)
                    for k, v in s.scratch.items():
                        tx.set(("scratch", k), v)
                    tx.add_usage(input_tokens=120, output_tokens=40)
                times[(label, meta)].append(time.perf_counter() - t0)
    for store in stores.values():
        store.close()
    print(f"\n== write cost of schema 002's index and triggers ({steps} W steps, interleaved) ==")
    for meta in (False, True):
        w, wo = (statistics.median(times[(label, meta)]) * 1e6 for label in ("with", "without"))
        print(f"{'with metadata (3 indexed values)' if meta else 'no metadata':34} median save {w:7.1f} us with, "
              f"{wo:7.1f} us without: ratio {w / wo:.3f}")


def build_w(path: str, n: int) -> None:
    """Workload W with transactions, as compare.py writes it (stream "w"; step v is version v + 1)."""
    system = EventckptTx()
    system.open(path)
    try:
        system.write(n, Recorder(path, n, None))
    finally:
        system.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--db", default=None, help="the W file (built when missing)")
    parser.add_argument("--keep", action="store_true", help="keep the file afterwards")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-naive", action="store_true", help="skip the naive baselines (slow at 100k)")
    parser.add_argument("--overhead", type=int, default=0, metavar="STEPS",
                        help="also measure what schema 002 costs saves, over this many W steps")
    args = parser.parse_args()
    if args.overhead:
        write_overhead(args.overhead, tempfile.mkdtemp(prefix="eventckpt-qbench-"))
    path = args.db or os.path.join(tempfile.mkdtemp(prefix="eventckpt-qbench-"), f"w-{args.steps}.db")
    if not os.path.exists(path):
        t0 = time.perf_counter()
        build_w(path, args.steps)
        print(f"built W with {args.steps} steps in {time.perf_counter() - t0:.0f} s: {path}", flush=True)
    with eventckpt.open(path) as store:
        task = store.stream("w")
        head = task.version
        span = min(10_000, head // 2)
        a = head // 2 - span // 2
        ours = {
            "log": (f"log(3000) of {head} versions", lambda: task.log(3000)),
            "history": (f"history(scratch.k05) over {head} versions", lambda: task.history(("scratch", "k05"))),
            "history100": ("history(scratch.k05, limit=100)", lambda: task.history(("scratch", "k05"), limit=100)),
            "diff": (f"diff({a}, {a + span}): paths", lambda: task.diff(a, a + span)),
            "diff+": (f"diff({a}, {a + span}) + every value", lambda: [c.new for c in task.diff(a, a + span)]),
        }
        naive = {
            "log": lambda: [task.get(v) for v in range(head, max(0, head - 3000), -1)],
            "history": lambda: naive_history(store, "$.scratch.k05"),
            "diff": lambda: naive_diff(task, a, a + span),
        }
        rows = []
        for kind, (label, fn) in ours.items():  # ours first, each after a collection: the naive runs churn memory
            gc.collect()
            times, result = timed(fn, args.repeat)
            rows.append((kind, label, times, len(result)))
        baseline = {} if args.no_naive else {kind: (gc.collect(), timed(fn, 1)[0][0])[1] for kind, fn in naive.items()}
        baseline["diff+"] = baseline.get("diff")

    print(f"\n== query bench on W: {head} versions, median (best) of {args.repeat} ==")
    for kind, label, (ms, best), size in rows:
        naive = baseline.get(kind)
        target = TARGETS_MS.get(kind)
        verdict = "" if target is None else f"target {target:g} ms: {'met' if ms <= target else 'MISSED'}"
        ratio = f"naive {naive:8.1f} ms = {naive / ms:5.1f}x" if naive else ""
        print(f"{label:40} {ms:7.2f} ms ({best:6.2f})  {size:6} rows  {ratio:28} {verdict}")
    if not args.keep and not args.db:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


if __name__ == "__main__":
    main()
