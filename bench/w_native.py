"""Workload W on eventckpt's native API, side by side with a bare apsw commit of the same rows.

    python bench/w_native.py --steps 1000 100000

For each size it prints the per-step save time (median and p99 of the first and last thousand steps) of:
  tx     eventckpt transactions (append/set/usage: the O(change) path)
  save   eventckpt save(values) of the whole state (diffs against the head: O(state) comparison)
  bare   a bare apsw BEGIN IMMEDIATE / INSERT version row / INSERT event rows / COMMIT (the physical limit)
plus file bytes / payload bytes and the restore time of random versions. Ratios are to `bare`, measured
in the same run, because these machines are shared and noisy.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import apsw
import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eventckpt  # noqa: E402
from eventckpt.checkpoint import format_time, utc_now  # noqa: E402
from eventckpt.integrity import ROOT, version_checksum  # noqa: E402
from workload import initial_scratch, steps  # noqa: E402


def run_tx(path: str, n: int) -> list[float]:
    times = []
    with eventckpt.open(path) as store:
        stream = store.stream("w")
        stream.save({"messages": [], "step": 0, "scratch": initial_scratch()})
        for s in steps(n):
            t0 = time.perf_counter()
            with stream.transaction() as tx:
                tx.append("messages", s.message)
                tx.set("step", s.step)
                for k, v in s.scratch.items():
                    tx.set(("scratch", k), v)
                tx.usage(input_tokens=120, output_tokens=40)
            times.append(time.perf_counter() - t0)
    return times


def run_save(path: str, n: int) -> list[float]:
    times = []
    state: dict[str, Any] = {"messages": [], "step": 0, "scratch": initial_scratch()}
    with eventckpt.open(path) as store:
        stream = store.stream("w")
        stream.save(state)
        for s in steps(n):
            state["messages"].append(s.message)
            state["step"] = s.step
            state["scratch"].update(s.scratch)
            t0 = time.perf_counter()
            stream.save(state, {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens})
            times.append(time.perf_counter() - t0)
    return times


def run_bare(path: str, n: int) -> list[float]:
    """The same rows eventckpt writes for W, with nothing but apsw calls around them."""
    eventckpt.open(path).close()  # same schema and file settings
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode = WAL").fetchall()
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("INSERT INTO streams (name, created_at) VALUES ('w', ?)", (format_time(utc_now()),))
    times = []
    for s in steps(n):
        t0 = time.perf_counter()
        rows = [("append", "$.messages", orjson.dumps(s.message).decode()), ("set", "$.step", str(s.step))]
        rows += [("set", f"$.scratch.{k}", orjson.dumps(v).decode()) for k, v in s.scratch.items()]
        usage = orjson.dumps({"input_tokens": s.input_tokens, "output_tokens": s.output_tokens}).decode()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO versions VALUES (1, ?, ?, NULL, 0, NULL, ?, 4, ?, ?)",
            (s.step, format_time(utc_now()), usage, sum(len(r[2]) for r in rows), ROOT),
        )
        conn.executemany(
            "INSERT INTO events VALUES (1, ?, ?, ?, ?, ?)", [(s.step, i, op, p, v) for i, (op, p, v) in enumerate(rows)]
        )
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t0)
    conn.close()
    return times


def summary(times: list[float]) -> dict[str, float]:
    def stats(xs: list[float]) -> tuple[float, float]:
        xs = sorted(xs)
        return statistics.median(xs) * 1e6, xs[min(len(xs) - 1, int(len(xs) * 0.99))] * 1e6

    first, last = times[:1000], times[-1000:]
    (fm, fp), (lm, lp) = stats(first), stats(last)
    return {"first_median": fm, "first_p99": fp, "last_median": lm, "last_p99": lp}


def file_figures(path: str) -> tuple[int, int]:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    payload = conn.execute("SELECT sum(event_bytes) FROM versions").fetchall()[0][0] or 0
    conn.close()
    return os.path.getsize(path), payload


def restore_times(path: str, n: int, count: int) -> list[float]:
    rng = random.Random(1)
    out = []
    with eventckpt.open(path) as store:
        stream = store.stream("w")
        for v in rng.sample(range(1, n + 2), min(count, n + 1)):
            t0 = time.perf_counter()
            stream.state(v)
            out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--styles", nargs="+", default=["tx", "save", "bare"], choices=["tx", "save", "bare"])
    parser.add_argument("--restores", type=int, default=20)
    parser.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    args = parser.parse_args()
    runners = {"tx": run_tx, "save": run_save, "bare": run_bare}
    workdir = args.dir or tempfile.mkdtemp(prefix="eventckpt-bench-")
    for n in args.steps:
        print(f"\n== workload W, {n} steps ==")
        results = {}
        for style in args.styles:
            path = os.path.join(workdir, f"w-{style}-{n}.db")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            t0 = time.perf_counter()
            times = runners[style](path, n)
            total = time.perf_counter() - t0
            results[style] = summary(times)
            size, payload = file_figures(path)
            line = (f"{style:5} save us: first median {results[style]['first_median']:7.1f} p99 {results[style]['first_p99']:8.1f}"
                    f" | last median {results[style]['last_median']:7.1f} p99 {results[style]['last_p99']:8.1f}"
                    f" | file {size / 1e6:8.2f} MB = {size / payload:4.2f}x payload | run {total:6.1f}s")
            print(line, flush=True)
            if style != "bare" and args.restores:
                rt = sorted(restore_times(path, n, args.restores))
                print(f"      restore of {len(rt)} random versions: median {statistics.median(rt) * 1e3:.2f} ms,"
                      f" max {rt[-1] * 1e3:.2f} ms")
        if "bare" in results:
            for style in results:
                if style != "bare":
                    r, b = results[style], results["bare"]
                    print(f"ratio {style}/bare: first median {r['first_median'] / b['first_median']:.2f}"
                          f" | last median {r['last_median'] / b['last_median']:.2f}"
                          f" | last p99 {r['last_p99'] / b['last_p99']:.2f}")


if __name__ == "__main__":
    main()
