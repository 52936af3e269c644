"""The soak run of the crash tests (not run by pytest): many more kills and power cuts than CI.

    python -m tests.soak                      # 200 kills, then 50 power cuts per durability setting
    python -m tests.soak --kills 1000 --power-cuts 0 --seed 5 --dir /tmp/soak -v

Prints the totals of each part: kills survived by kind, versions acknowledged, restores compared with
the model, versions in the file (forks and imported copies), prunes and what they removed, and what
power cuts took. Exits non-zero at the first failed check.
"""

from __future__ import annotations

import argparse
import functools
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import killkit


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=200, help="SIGKILLed writer lives (default 200)")
    parser.add_argument("--power-cuts", type=int, default=50, help="power cuts per durability setting (default 50)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", default=",".join(killkit.DEFAULT_OPS),
                        help="operations the writers run, comma-separated: versions by tx, save, rollback; fork; "
                             "and now and then prune, import (default: all of them)")
    parser.add_argument("--dir", type=Path, default=None, help="keep the files here (default: a temporary directory)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print a line per life")
    args = parser.parse_args(argv)
    ops = tuple(args.ops.split(","))
    killkit.check_ops(ops)
    workdir = args.dir or Path(tempfile.mkdtemp(prefix="eventckpt-soak-"))
    workdir.mkdir(parents=True, exist_ok=True)
    log = print if args.verbose else None
    parts = []
    if args.kills:
        parts.append(("SIGKILL", args.kills, {}, None, killkit.KILL_KINDS))
    for durability in ("full", "normal") if args.power_cuts else ():
        judge = functools.partial(killkit.judge_power_cut, durability=durability)
        parts.append((f"power cut, durability={durability!r}", args.power_cuts,
                      {"vfs": "powerloss", "durability": durability}, judge, killkit.POWER_CUTS))
    for i, (title, n, options, judge, table) in enumerate(parts):
        part_dir = workdir / f"part-{i}"
        part_dir.mkdir(exist_ok=True)
        started = time.perf_counter()
        totals = killkit.run_kills(part_dir / "soak.db", part_dir, n, seed=args.seed + i, ops=ops, options=options,
                                   table=table, after_kill=judge, log=log)
        print(f"{title}: {totals.line()} [{time.perf_counter() - started:.0f} s]", flush=True)
    if args.dir is None:
        shutil.rmtree(workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
