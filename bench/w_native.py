"""Workload W on eventckpt's native API, side by side with a bare apsw commit of the same rows.

    python bench/w_native.py --steps 1000 10000 100000

The systems take W's steps together, in turn (the order rotating every step), so on a shared, noisy machine
they meet the same load. For each size it prints the per-step save time (median and p99 of the first and
last thousand steps) of:
  tx       eventckpt transactions (append/set/usage: the O(change) path, the reference)
  tracked  a tracked state (stream.checkout()) edited in place and saved: the edits are recorded as they
           happen (and timed with the save), nothing is compared
  save     eventckpt save(values) of the whole plain state (compared with the head: O(state) at C speed)
  bare     a bare apsw BEGIN IMMEDIATE / INSERT version row / INSERT event rows / COMMIT (the physical limit)
plus file bytes / payload bytes and the restore time of random versions; then the ratios: each system to
`bare` and to `tx`, and how flat each stays (median of the last thousand steps / the first thousand).
(bench/compare.py runs the same systems next to the peers, one after another.)
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import drive_together, windows  # noqa: E402
from report import progress  # noqa: E402
from systems import Bare, EventckptSave, EventckptTracked, EventckptTx  # noqa: E402

STYLES = {"tx": EventckptTx, "tracked": EventckptTracked, "save": EventckptSave, "bare": Bare}


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
        print(f"\n== workload W, {n} steps ({', '.join(args.styles)} in turn) ==", flush=True)
        systems = [STYLES[style](args.durability) for style in args.styles]
        paths = [os.path.join(workdir, f"w-{style}-{n}.db") for style in args.styles]
        runs = dict(zip(args.styles, drive_together(systems, paths, n, restores=args.restores, log_limit=3000,
                                                    diff_span=min(10000, n // 2))))
        for run in runs.values():
            print(progress(run), flush=True)
        figures = {style: windows(run.save) for style, run in runs.items()}
        for base in ("bare", "tx"):
            if base not in runs:
                continue
            ref = figures[base]
            for style, own in figures.items():
                if style not in (base, "bare"):
                    print(f"ratio {style}/{base}: first median {own['first'][0] / ref['first'][0]:.2f}"
                          f" | last median {own['last'][0] / ref['last'][0]:.2f}"
                          f" | last p99 {own['last'][1] / ref['last'][1]:.2f}")
        for style, own in figures.items():
            print(f"flat {style}: last 1k median / first 1k median {own['last'][0] / own['first'][0]:.2f}"
                  f" | last 1k median {own['last'][0] * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
