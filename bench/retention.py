"""Retention on workload W: what prune costs and what it gives back, side by side in one run.

    python bench/retention.py --steps 10000

Runs W with transactions (every 10th step a manual checkpoint, the rest automatic) into two identical
files, then on one of them:
  cut   prune(keep_last=100)                 (a cut at the start of history)
  holes prune(keep_last=100, auto_only=True) (keeps the manual checkpoints: 1 in 10 older versions)
and prints, for each: the time of the prune, file bytes before/after (after a WAL checkpoint) as a ratio,
the restore time of the kept versions against the same versions in the unpruned file, and the per-step
save time of 1000 more steps against the unpruned file. Ratios, because the machines are shared.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eventckpt  # noqa: E402
from workload import initial_scratch, steps  # noqa: E402


def run_w(path: str, n: int, first: int = 1) -> list[float]:
    times = []
    with eventckpt.open(path) as store:
        stream = store.stream("w")
        if stream.version == 0:
            stream.save({"messages": [], "step": 0, "scratch": initial_scratch()})
        for s in steps(first + n - 1):
            if s.step < first:
                continue
            changes = [("append", "messages", s.message), ("set", "step", s.step)]
            changes += [("set", ("scratch", k), v) for k, v in s.scratch.items()]
            t0 = time.perf_counter()
            with stream.transaction(auto=s.step % 10 != 0) as tx:  # 1 in 10 steps is a manual checkpoint
                for op, path, value in changes:
                    getattr(tx, op)(path, value)
                tx.add_usage(input_tokens=120, output_tokens=40)
            times.append(time.perf_counter() - t0)
    return times


def file_bytes(path: str) -> int:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return os.path.getsize(path)


def restore_median(path: str, versions: list[int]) -> float:
    with eventckpt.open(path) as store:
        stream = store.stream("w")
        times = []
        for v in versions:
            t0 = time.perf_counter()
            stream.state(v)
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=10000)
    parser.add_argument("--restores", type=int, default=20)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="eventckpt-retention-")
    base = os.path.join(workdir, "base.db")
    run_w(base, args.steps)
    size = file_bytes(base)
    print(f"== workload W, {args.steps} steps (1 in 10 manual), file {size / 1e6:.2f} MB ==")
    for mode in ("cut", "holes"):
        pruned, control = os.path.join(workdir, f"{mode}.db"), os.path.join(workdir, f"{mode}-control.db")
        shutil.copy(base, pruned)
        shutil.copy(base, control)
        with eventckpt.open(pruned) as store:
            t0 = time.perf_counter()
            result = store.stream("w").prune(keep_last=100, auto_only=mode == "holes")
            took = time.perf_counter() - t0
            kept = store.stream("w").list_versions()
        after = file_bytes(pruned)
        sample = random.Random(1).sample(kept, min(args.restores, len(kept)))
        r_pruned, r_control = restore_median(pruned, sample), restore_median(control, sample)
        s_pruned = statistics.median(run_w(pruned, 1000, args.steps + 1))
        s_control = statistics.median(run_w(control, 1000, args.steps + 1))
        print(f"{mode:5} prune {took:6.2f}s removed {len(result.removed):6d} kept {len(kept):5d}"
              f" | file {after / 1e6:7.2f} MB = {after / size:.2f}x before"
              f" | restore {r_pruned * 1e3:6.2f} ms = {r_pruned / r_control:.2f}x unpruned"
              f" | save {s_pruned * 1e6:6.1f} us = {s_pruned / s_control:.2f}x unpruned", flush=True)
    shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
