"""Workload W (DESIGN.md) on eventckpt and on what agent builders would use instead, in one process run.

    pip install -e '.[bench]'
    python bench/compare.py --readme README.md      # the full report: 1k, 10k and 100k steps
    python bench/compare.py --quick                 # a small run that checks the script end to end

One system after another, at each size: eventckpt's native API (transactions: the reference every ratio
is taken against; a tracked state's save(); and whole-state save()), LangGraph's SqliteSaver on an agent-loop graph (plain, and with
the messages in a DeltaChannel), eventckpt's LangGraph saver on the same graph (when this build has
`eventckpt.langgraph`), the `eventsourcing` library on SQLite with snapshots, and a bare apsw commit of the
rows eventckpt writes (the physical limit). A system that passes the time or size bound at a size is
stopped there, reported as stopped with the figures of the steps it reached, and not run at larger sizes.

Writes report.md (tables with ratios to eventckpt), results.json, three plots and every per-step
measurement (runs.json.gz, for --from-runs) to --out.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apsw  # noqa: E402

import report  # noqa: E402
from graph_systems import Graph  # noqa: E402
from harness import Bounds, Recorder, Run, disk_bytes, drive, remove_files, timed  # noqa: E402
from systems import EVENTSOURCING_MISSING, Bare, EventckptSave, EventckptTracked, EventckptTx, EventSourcing  # noqa: E402

HERE = Path(__file__).resolve().parent
RUNS = "runs.json.gz"  # every per-step measurement, for --from-runs
# key -> (factory, bounded); the reference and the bare limit always run to the end
SYSTEMS: dict[str, tuple[Any, bool]] = {
    "eventckpt": (EventckptTx, False),
    "eventckpt-tracked": (EventckptTracked, True),
    "eventckpt-save": (EventckptSave, True),
    "sqlite": (lambda d: Graph("sqlite", False, d), True),
    "sqlite-delta": (lambda d: Graph("sqlite", True, d), True),
    "eventckpt-saver": (lambda d: Graph("eventckpt", False, d), True),
    "eventsourcing": (EventSourcing, True),
    "bare": (Bare, False),
}


def missing(system: Any) -> str:
    if isinstance(system, Graph):
        return system.missing()
    if isinstance(system, EventSourcing):
        return EVENTSOURCING_MISSING
    return ""


def parse() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000, 100000], help="the sizes")
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and counts, output to bench/results/quick (checks the script)")
    parser.add_argument("--time-bound", type=float, default=300.0,
                        help="seconds of writing (and again of reading) allowed per system and size")
    parser.add_argument("--size-bound", type=float, default=4.0, help="GB on disk allowed per system and size")
    parser.add_argument("--restores", type=int, default=20, help="random versions restored per system")
    parser.add_argument("--log-limit", type=int, default=3000, help="checkpoints listed by log")
    parser.add_argument("--diff-span", type=int, default=10000, help="versions between the two a diff compares")
    parser.add_argument("--durability", choices=["normal", "full"], default="normal",
                        help="normal: WAL, synchronous=NORMAL; full: every commit fsynced (for every system)")
    parser.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS),
                        help="systems to run (eventckpt, the reference, always runs)")
    parser.add_argument("--out", type=Path, default=None, help="where the report goes (default bench/results)")
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temporary directory)")
    parser.add_argument("--readme", type=Path, default=None,
                        help="also refresh the results block of this README.md")
    parser.add_argument("--from-runs", type=Path, default=None,
                        help=f"render the outputs again from a saved {RUNS} instead of running")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.restores, args.log_limit = [50, 200], 5, 50
        args.out = args.out or HERE / "results" / "quick"
    args.out = args.out or HERE / "results"
    if "eventckpt" not in args.systems:
        args.systems.insert(0, "eventckpt")
    return args


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "SQLite (apsw)": apsw.sqlite_lib_version()}
    for dist in ("eventckpt", "apsw", "langgraph", "langgraph-checkpoint-sqlite", "eventsourcing"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = "not installed"
    return out


class Reference:
    """eventckpt on the steps and versions a stopped peer reached, for like-for-like ratios."""

    def __init__(self, ref: Run, path: str, workdir: str, durability: str) -> None:
        self.ref, self.path, self.workdir, self.durability = ref, path, workdir, durability
        self._bytes: dict[int, int] = {ref.steps: ref.file_bytes}
        self._restores = dict(ref.restores)

    def fill(self, run: Run) -> None:
        run.ref_file_bytes = self.file_bytes(run.steps)
        wanted = [v for v, _ in run.restores if v not in self._restores]
        if wanted:
            system = EventckptTx(self.durability)
            system.open(self.path)
            try:
                for v in wanted:
                    self._restores[v] = timed(lambda: system.restore(v))[0]
            finally:
                system.close()
        run.ref_restores = [(v, self._restores[v]) for v, _ in run.restores]

    def file_bytes(self, k: int) -> int:
        if k not in self._bytes:
            path = os.path.join(self.workdir, f"ref-{k}.db")
            remove_files(path)
            system = EventckptTx(self.durability)
            system.open(path)
            try:
                system.write(k, Recorder(path, k, None))
            finally:
                system.close()
            self._bytes[k] = disk_bytes(path)
            remove_files(path)
        return self._bytes[k]


def main() -> None:
    args = parse()
    if args.from_runs:
        results, unavailable, meta = report.load_runs(args.from_runs)
    else:
        results, unavailable, meta = run_all(args)
        args.out.mkdir(parents=True, exist_ok=True)
        report.save_runs(args.out / RUNS, results, unavailable, meta)
    report.write(args.out, results, unavailable, meta)
    if args.readme:
        plots = os.path.relpath(args.out, args.readme.resolve().parent) + "/"
        report.update_readme(args.readme, results, unavailable, meta, plots)
    print(f"\nreport: {args.out / 'report.md'}")


def run_all(args: argparse.Namespace) -> tuple[dict[int, list[Run]], dict[str, str], dict[str, Any]]:
    bounds = Bounds(args.time_bound, int(args.size_bound * 1e9))
    workdir = args.dir or tempfile.mkdtemp(prefix="eventckpt-compare-")
    started = time.strftime("%Y-%m-%d %H:%M %Z")
    results: dict[int, list[Run]] = {}
    unavailable: dict[str, str] = {}
    stopped_at: dict[str, str] = {}  # label -> why it is not run at larger sizes
    for n in sorted(args.steps):
        print(f"\n== workload W, {n:,} steps ==", flush=True)
        runs: list[Run] = []
        ref_path = ""
        for key in args.systems:
            factory, bounded = SYSTEMS[key]
            system = factory(args.durability)
            why = missing(system)
            if why:
                unavailable[system.label] = why
                print(f"{system.label:34} not available: {why}", flush=True)
                continue
            if system.label in stopped_at:
                runs.append(Run(system.label, n, stopped=stopped_at[system.label]))
                print(f"{system.label:34} {stopped_at[system.label]}", flush=True)
                continue
            path = os.path.join(workdir, f"w-{key}-{n}.db")
            run = drive(system, path, n, bounds=bounds if bounded else None, restores=args.restores,
                        log_limit=args.log_limit, diff_span=min(args.diff_span, max(1, n // 2)))
            runs.append(run)
            if run.system == report.REFERENCE:
                ref_path = path  # kept until the size is done: stopped peers are compared on it
            else:
                remove_files(path)
            if run.stopped:
                stopped_at[run.system] = f"not run: {run.stopped} at step {run.steps:,} of the {n:,}-step run"
            print(report.progress(run), flush=True)
        reference = Reference(runs[0], ref_path, workdir, args.durability)
        for run in runs:
            if run.steps:
                reference.fill(run)
        results[n] = runs
        remove_files(ref_path)
    if not args.dir:
        shutil.rmtree(workdir, ignore_errors=True)
    meta = {
        "command": "python bench/compare.py " + " ".join(sys.argv[1:]),
        "started": started,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}",
        "durability": args.durability + (" (WAL, synchronous=NORMAL)" if args.durability == "normal" else " (fsync)"),
        "bounds": f"{args.time_bound:g} s of writing (and of reading) and {args.size_bound:g} GB per system and size",
        "versions": ", ".join(f"{k} {v}" for k, v in versions().items()),
    }
    return results, unavailable, meta


if __name__ == "__main__":
    main()
