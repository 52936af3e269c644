"""Workload W on eventckpt's native API, side by side with a bare apsw commit of the same rows.

    python bench/w_native.py --steps 1000 100000

For each size it prints the per-step save time (median and p99 of the first and last thousand steps) of:
  tx     eventckpt transactions (append/set/usage: the O(change) path)
  save   eventckpt save(values) of the whole state (diffs against the head: O(state) comparison)
  bare   a bare apsw BEGIN IMMEDIATE / INSERT version row / INSERT event rows / COMMIT (the physical limit)
plus file bytes / payload bytes and the restore time of random versions. Ratios are to `bare`, measured
in the same run, because these machines are shared and noisy. (bench/compare.py runs the same systems
next to the peers.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import drive, windows  # noqa: E402
from report import progress  # noqa: E402
from systems import Bare, EventckptSave, EventckptTx  # noqa: E402

STYLES = {"tx": EventckptTx, "save": EventckptSave, "bare": Bare}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--styles", nargs="+", default=list(STYLES), choices=list(STYLES))
    parser.add_argument("--restores", type=int, default=20)
    parser.add_argument("--durability", choices=["normal", "full"], default="normal")
    parser.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    args = parser.parse_args()
    workdir = args.dir or tempfile.mkdtemp(prefix="eventckpt-bench-")
    for n in args.steps:
        print(f"\n== workload W, {n} steps ==")
        runs = {}
        for style in args.styles:
            system = STYLES[style](args.durability)
            runs[style] = drive(system, os.path.join(workdir, f"w-{style}-{n}.db"), n, bounds=None,
                                restores=args.restores, log_limit=3000, diff_span=min(10000, n // 2))
            print(progress(runs[style]), flush=True)
        if "bare" in runs:
            base = windows(runs["bare"].save)
            for style, run in runs.items():
                if style != "bare":
                    own = windows(run.save)
                    print(f"ratio {style}/bare: first median {own['first'][0] / base['first'][0]:.2f}"
                          f" | last median {own['last'][0] / base['last'][0]:.2f}"
                          f" | last p99 {own['last'][1] / base['last'][1]:.2f}")


if __name__ == "__main__":
    main()
