"""Drive one system through workload W and measure it exactly as every other system is measured.

A system writes the steps and reports each step's save time to a `Recorder`, which samples the bytes on
disk and tells it when to stop (a time or size bound: a peer too slow for a size is stopped and reported,
never dropped). Then the file is reopened and read: restores of random versions (each checked to hold
exactly the steps it should), and log / history / diff where the system has them.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import apsw
import click

from workload import Step, payload_bytes, steps


class Unavailable(Exception):
    """The system has no such operation (the message says why)."""


@dataclass(frozen=True, slots=True)
class Bounds:
    seconds: float  # writing time allowed for one system at one size (and again for its reads)
    file_bytes: int  # bytes on disk allowed


@dataclass(slots=True)
class Op:
    """One read operation: its time, how many rows it gave, or why it could not run."""

    seconds: float | None
    rows: int | None = None
    note: str = ""


@dataclass(slots=True)
class Run:
    """Everything measured for one system at one size."""

    system: str
    n: int  # steps asked for
    save: list[float] = field(default_factory=list)  # seconds per step; save[i] is step i+1
    wall: list[float] = field(default_factory=list)  # whole graph step, for systems that run a graph
    sizes: list[tuple[int, int]] = field(default_factory=list)  # (step, bytes on disk)
    stopped: str | None = None  # why it stopped before n
    write_seconds: float = 0.0
    file_bytes: int = 0  # the closed file
    payload_bytes: int = 0  # JSON payload of the steps it reached
    restores: list[tuple[int, float]] = field(default_factory=list)  # (version, seconds)
    restore_note: str = ""
    ops: dict[str, Op] = field(default_factory=dict)
    # eventckpt (the reference) on exactly the same steps and versions, for the ratios
    ref_file_bytes: int = 0
    ref_restores: list[tuple[int, float]] = field(default_factory=list)

    @property
    def steps(self) -> int:
        return len(self.save)


class System(Protocol):
    label: str
    driver: str  # the SQLite binding it uses: "apsw" or "sqlite3" (the standard library's)

    def open(self, path: str) -> None: ...
    def write(self, n: int, rec: Recorder) -> None: ...
    def close(self) -> None: ...
    def restore(self, version: int) -> dict[str, Any]: ...
    def log(self, limit: int, deadline: float) -> int: ...
    def history(self, deadline: float) -> int: ...
    def diff(self, a: int, b: int) -> int: ...


def disk_bytes(path: str, *, settle: str = "") -> int:
    """Bytes of the database file and its WAL. With `settle` ("apsw" or "sqlite3"), the WAL is first copied
    into the file and truncated, so the figure does not count WAL slack. The checkpoint must go through the
    SQLite library the system itself uses: two SQLite copies in one process do not see each other's locks,
    and closing one's connection would drop the other's locks and delete its WAL."""
    if settle and os.path.exists(path):
        conn: Any = apsw.Connection(path) if settle == "apsw" else sqlite3.connect(path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            conn.close()
    return sum(os.path.getsize(path + s) for s in ("", "-wal") if os.path.exists(path + s))


def remove_files(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(path + suffix):
            os.remove(path + suffix)


def size_grid(n: int) -> list[int]:
    """Steps at which the file is measured: 1, 2, 5 x 10^k up to n, and n."""
    grid = {n}
    scale = 1
    while scale <= n:
        grid.update(m * scale for m in (1, 2, 5) if m * scale <= n)
        scale *= 10
    return sorted(grid)


class Recorder:
    """Collects one system's per-step save times and file sizes; says when a bound is reached."""

    def __init__(self, path: str, n: int, bounds: Bounds | None, driver: str = "apsw") -> None:
        self.path, self.n, self.bounds, self.driver = path, n, bounds, driver
        self.save: list[float] = []
        self.wall: list[float] = []
        self.sizes: list[tuple[int, int]] = []
        self.stopped: str | None = None
        self._grid = set(size_grid(n))
        self._start = time.perf_counter()

    def record(self, seconds: float, wall: float | None = None) -> None:
        """Step len(save)+1 is saved and took `seconds` in the store (`wall` for a whole graph step)."""
        self.save.append(seconds)
        if wall is not None:
            self.wall.append(wall)
        if len(self.save) in self._grid:
            self.sizes.append((len(self.save), disk_bytes(self.path, settle=self.driver)))

    def should_stop(self) -> bool:
        """True once the time or size bound is passed (never for an unbounded system)."""
        if self.bounds is None or self.stopped is not None:
            return self.stopped is not None
        if time.perf_counter() - self._start > self.bounds.seconds:
            self.stopped = f"stopped by the time bound ({self.bounds.seconds:g} s of writing)"
        elif len(self.save) % 50 == 0 and disk_bytes(self.path) > self.bounds.file_bytes:
            self.stopped = f"stopped by the size bound ({self.bounds.file_bytes / 1e9:g} GB on disk)"
        return self.stopped is not None


def restore_versions(reached: int, count: int, seed: int = 1) -> list[int]:
    """The random versions (W steps) to restore: the same for every system that reached as far."""
    return sorted(random.Random(seed).sample(range(1, reached + 1), min(count, reached)))


def check_restored(label: str, state: dict[str, Any], version: int) -> None:
    """A restore must give the state after exactly `version` steps; a system that does less is not measured."""
    if state.get("step") != version or len(state.get("messages", ())) != version:
        raise AssertionError(f"{label}: restore of version {version} gave step {state.get('step')!r} "
                             f"with {len(state.get('messages', ()))} messages")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def drive(system: System, path: str, n: int, *, bounds: Bounds | None, restores: int, log_limit: int,
          diff_span: int) -> Run:
    """Write W to `n` steps (or a bound), close, reopen, and measure the reads."""
    remove_files(path)
    rec = Recorder(path, n, bounds, system.driver)
    t0 = time.perf_counter()
    system.open(path)
    try:
        system.write(n, rec)
    finally:
        system.close()
    stopped = rec.stopped if len(rec.save) < n else None  # a bound passed on the last step stopped nothing
    run = Run(system.label, n, rec.save, rec.wall, rec.sizes, stopped, time.perf_counter() - t0)
    run.file_bytes = disk_bytes(path)
    run.payload_bytes = sum(payload_bytes(s) for s in steps(run.steps))
    if run.steps:
        system.open(path)
        try:
            read(system, run, bounds, restores, log_limit, diff_span)
        finally:
            system.close()
    return run


class Stepwise(System, Protocol):
    """A system whose steps can be driven one at a time (eventckpt's native API and the bare commit)."""

    def begin(self) -> None: ...
    def step(self, s: Step) -> None: ...


def drive_together(systems: list[Stepwise], paths: list[str], n: int, *, restores: int, log_limit: int,
                   diff_span: int) -> list[Run]:
    """Write W to `n` steps on every system at once: each step is taken by every system in turn, the order
    rotating from step to step, so all of them meet the same load on a shared, noisy machine and their
    ratios compare like with like. Then each file is closed, reopened and read as drive() does.
    `write_seconds` is the sum of a system's own step times."""
    recorders = []
    for system, path in zip(systems, paths):
        remove_files(path)
        recorders.append(Recorder(path, n, None, system.driver))
        system.open(path)
    order = list(range(len(systems)))
    try:
        for system in systems:
            system.begin()
        with click.progressbar(length=n, label=f"W to {n:,} steps", file=sys.stderr) as bar:
            for s in steps(n):
                for i in order:
                    t0 = time.perf_counter()
                    systems[i].step(s)
                    recorders[i].record(time.perf_counter() - t0)
                order.append(order.pop(0))
                if s.step % 500 == 0 or s.step == n:
                    bar.update(s.step - bar.pos)
    finally:
        for system in systems:
            system.close()
    runs = []
    for system, path, rec in zip(systems, paths, recorders):
        run = Run(system.label, n, rec.save, rec.wall, rec.sizes, None, sum(rec.save))
        run.file_bytes = disk_bytes(path)
        run.payload_bytes = sum(payload_bytes(s) for s in steps(run.steps))
        system.open(path)
        try:
            read(system, run, None, restores, log_limit, diff_span)
        finally:
            system.close()
        runs.append(run)
    return runs


def read(system: System, run: Run, bounds: Bounds | None, restores: int, log_limit: int, diff_span: int) -> None:
    budget = bounds.seconds if bounds else float("inf")
    k = run.steps
    try:
        check_restored(system.label, system.restore(1), 1)  # warms the connection; not timed
        start = time.perf_counter()
        for v in restore_versions(k, restores):
            if time.perf_counter() - start > budget:
                run.restore_note = f"stopped after {len(run.restores)} restores (time bound)"
                break
            seconds, state = timed(lambda: system.restore(v))
            check_restored(system.label, state, v)
            run.restores.append((v, seconds))
    except Unavailable as exc:
        run.restore_note = str(exc)
    limit = min(log_limit, k)
    a, b = max(1, k - diff_span), k
    calls: dict[str, tuple[Callable[[float], int], str]] = {
        "log": (lambda deadline: system.log(limit, deadline), f"newest {limit:,}"),
        "history": (lambda deadline: system.history(deadline), "one path, every version"),
        "diff": (lambda deadline: system.diff(a, b), f"versions {a:,} and {b:,}"),
    }
    for name, (call, what) in calls.items():
        deadline = time.perf_counter() + budget
        try:
            seconds, rows = timed(lambda: call(deadline))
        except Unavailable as exc:
            run.ops[name] = Op(None, note=str(exc))
            continue
        if name == "log" and rows < limit and time.perf_counter() > deadline:
            what += f", stopped after {rows:,} (time bound)"
        run.ops[name] = Op(seconds, rows, what)


# -- figures --------------------------------------------------------------------------------------


def window(times: list[float], lo: int, hi: int) -> tuple[float, float] | None:
    """Median and p99 (seconds) of steps lo..hi (1-based, inclusive)."""
    xs = sorted(times[lo - 1:hi])
    if not xs:
        return None
    return statistics.median(xs), xs[min(len(xs) - 1, int(len(xs) * 0.99))]


def windows(times: list[float], upto: int | None = None) -> dict[str, tuple[float, float] | None]:
    """The first and the last thousand steps of `times[:upto]`."""
    k = len(times) if upto is None else upto
    return {"first": window(times, 1, min(1000, k)), "last": window(times, max(1, k - 999), k)}


def median_of(pairs: list[tuple[int, float]]) -> float | None:
    return statistics.median(t for _, t in pairs) if pairs else None
