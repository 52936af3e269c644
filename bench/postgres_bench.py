"""eventckpt on PostgreSQL, measured side by side with its references on one throw-away server.

    pip install -e '.[bench]'                       # and Debian's postgresql (the server binaries)
    python bench/postgres_bench.py                  # the full run: W at 1000 and 10000 steps, ...
    python bench/postgres_bench.py --quick          # every part at a tiny size, in seconds

The script starts its own PostgreSQL server (tests/pgserver.py) with the server's default durability
(fsync on, synchronous_commit on), gives every system its own database of it, and destroys it at the end.
Systems take turns in blocks of `--block` steps (the first to go alternates), so load on a shared machine
hits them alike; every comparison is a ratio measured in this one run.

1. Workload W (bench/workload.py): eventckpt transactions (append, set, add_usage) against a bare psycopg
   commit of the same rows (bench/pg_systems.py: one prepared statement, one round trip, on a connection
   of eventckpt's own pool, into eventckpt's tables). Per-step median and p99 of the first and the last
   1000 steps at each `--steps` size (a size is that many steps of one run). The two databases must end
   with the same event rows (checked).
2. LangGraph: W as a graph (the loop of bench/langgraph_bench.py) with EventCkptSaver("postgresql://...")
   against langgraph's PostgresSaver: time per graph step and per step inside put/put_writes, table bytes
   (pg_total_relation_size), then (after ANALYZE of both databases, as autovacuum would soon do) on freshly
   opened savers get_state of the newest and the middle checkpoint and get_state_history of every
   checkpoint (medians, the savers taking turns). Both must give the same states (checked).
3. Writer scaling: 1, 2, 4, 8 writer processes on one store, each on its own stream, committing W for
   `--seconds` after a warm-up: eventckpt transactions, and bare psycopg commits of the same rows (what
   this machine allows), taking turns; aggregate commits/s, the median over `--rounds` rounds (the order
   of the writer counts alternates) and the ratio to one writer. The store must end with every version
   the writers reported (checked).

Writes postgres.md and postgres.json to --out (default bench/results; nothing with --quick unless --out is
given) and prints the report.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import importlib.metadata
import itertools
import json
import multiprocessing
import os
import platform
import queue
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # tests/pgserver.py, the throw-away server the tests use too

import click  # noqa: E402
import psycopg  # noqa: E402
from langgraph.checkpoint.postgres import PostgresSaver  # noqa: E402

import eventckpt  # noqa: E402
from eventckpt.langgraph import EventCkptSaver  # noqa: E402
from harness import window  # noqa: E402
from langgraph_bench import CONFIG, PlainState, Timed, in_turns, w_graph, w_input  # noqa: E402
from pg_systems import BarePg, EventckptPg, table_bytes, writer  # noqa: E402
from tests.pgserver import PostgresServer  # noqa: E402
from workload import steps  # noqa: E402

POSTGRES_SAVER_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")
SETTINGS = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "wal_sync_method", "wal_level",
            "commit_delay", "shared_buffers", "max_connections")
FIGURES: list[dict[str, Any]] = []


def figure(what: str, value: float, target: str, met: bool) -> None:
    FIGURES.append({"figure": what, "value": value, "target": target, "met": met})


def bar(length: int, label: str) -> Any:
    return click.progressbar(length=length, label=label, file=sys.stderr, width=30)


def turns(keys: list[str]) -> Iterator[str]:
    """The systems in turn, the first to go alternating from one round to the next."""
    for b in itertools.count():
        yield from (keys if b % 2 == 0 else keys[::-1])


class Server:
    """The run's own PostgreSQL server and its databases."""

    def __init__(self) -> None:
        self.pg = PostgresServer.start(Path(tempfile.mkdtemp(prefix="eventckpt-pgbench-")), durable=True)

    def database(self, name: str) -> str:
        with psycopg.connect(self.pg.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")  # our own names, never a caller's
        return self.pg.url(name)

    def settings(self) -> dict[str, str]:
        with psycopg.connect(self.pg.url(), autocommit=True) as conn:
            return {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in SETTINGS}

    def close(self) -> None:
        try:
            self.pg.stop()
        finally:
            self.pg.destroy()


# -- 1. workload W: a transaction against the bare commit of its rows -------------------------------------


def run_w(server: Server, n: int, block: int) -> dict[str, list[float]]:
    """Seconds per step of each system, the systems taking turns in blocks."""
    urls = {"eventckpt": server.database("w_eventckpt"), "bare": server.database("w_bare")}
    systems: dict[str, Any] = {"eventckpt": EventckptPg(), "bare": BarePg()}
    times: dict[str, list[float]] = {key: [] for key in systems}
    work = list(steps(n))
    clock = time.perf_counter
    with contextlib.ExitStack() as stack:
        for key, system in systems.items():
            system.open(urls[key])
            stack.callback(system.close)
        order = turns(list(systems))
        with bar(2 * n, "W: eventckpt / bare psycopg") as progress:
            for lo in range(0, n, block):
                for _ in systems:
                    key = next(order)
                    commit, out = systems[key].commit, times[key]
                    for s in work[lo:lo + block]:
                        t0 = clock()
                        commit(s)
                        out.append(clock() - t0)
                    progress.update(len(work[lo:lo + block]))
    same_rows(urls["eventckpt"], urls["bare"], n)
    return times


def same_rows(a: str, b: str, n: int) -> None:
    """Both databases hold W's n + 1 versions with the same events and usage: the bare side wrote the rows
    eventckpt writes, no fewer."""
    sql = ("SELECT v.version, v.usage, v.event_count, v.event_bytes, array_agg(e.op || ' ' || e.path || ' ' ||"
           " e.value ORDER BY e.seq) FROM eventckpt.versions AS v JOIN eventckpt.events AS e USING (tree_id,"
           " stream_id, version) GROUP BY 1, 2, 3, 4 ORDER BY 1")
    rows = []
    for url in (a, b):
        with psycopg.connect(url) as conn:
            rows.append(conn.execute(sql).fetchall())
    if len(rows[0]) != n + 1 or rows[0] != rows[1]:
        raise AssertionError(f"the bare commit did not write eventckpt's rows ({len(rows[0])} and {len(rows[1])}"
                             f" versions; first difference at {next((x for x, y in zip(*rows) if x != y), None)})")


def w_figures(times: dict[str, list[float]], sizes: list[int]) -> list[dict[str, Any]]:
    out = []
    for m in sizes:
        windows = [("first", 1, 1000), ("last", m - 999, m)] if m > 1000 else [("all", 1, m)]
        for name, lo, hi in windows:
            ours, bare = window(times["eventckpt"], lo, hi), window(times["bare"], lo, hi)
            assert ours is not None and bare is not None
            row = {"steps": m, "window": f"{name} {hi - lo + 1} (steps {lo}-{hi})",
                   "eventckpt_median_us": ours[0] * 1e6, "eventckpt_p99_us": ours[1] * 1e6,
                   "bare_median_us": bare[0] * 1e6, "bare_p99_us": bare[1] * 1e6,
                   "ratio_median": ours[0] / bare[0], "ratio_p99": ours[1] / bare[1]}
            out.append(row)
            figure(f"W {m} steps, {name} {hi - lo + 1}: transaction / bare commit (median)", row["ratio_median"], "<= 1.5",
                   row["ratio_median"] <= 1.5)
    return out


# -- 2. LangGraph: EventCkptSaver against PostgresSaver ---------------------------------------------------


@contextlib.contextmanager
def savers(urls: dict[str, str], setup: bool) -> Iterator[dict[str, Any]]:
    with EventCkptSaver(urls["EventCkptSaver"]) as ours, PostgresSaver.from_conn_string(urls["PostgresSaver"]) as pg:
        if setup:
            pg.setup()
        yield {"EventCkptSaver": ours, "PostgresSaver": pg}


def run_graph(server: Server, n: int, block: int, rounds: int) -> dict[str, dict[str, Any]]:
    urls = {"EventCkptSaver": server.database("lg_eventckpt"), "PostgresSaver": server.database("lg_postgres")}
    out: dict[str, dict[str, Any]] = {name: {} for name in urls}
    with savers(urls, setup=True) as live:
        timers = {name: Timed(saver) for name, saver in live.items()}
        runs = {name: w_graph(n, PlainState).compile(checkpointer=timer.saver).stream(
            w_input(), {**CONFIG, "recursion_limit": n + 10}, stream_mode="updates", durability="sync")
            for name, timer in timers.items()}
        wall: dict[str, list[float]] = {name: [] for name in runs}
        spent: dict[str, list[float]] = {name: [] for name in runs}
        order, done = turns(list(runs)), set()
        with bar(2 * n, "LangGraph: EventCkptSaver / PostgresSaver") as progress:
            while len(done) < len(runs):
                name = next(order)
                for _ in range(block):
                    if name in done:
                        break
                    t0 = time.perf_counter()
                    if next(runs[name], None) is None:
                        done.add(name)
                        break
                    wall[name].append(time.perf_counter() - t0)
                    spent[name].append(timers[name].take())
                    progress.update(1)
    for name in urls:
        out[name]["steps"] = len(wall[name])
        out[name]["step_us"] = statistics.median(wall[name]) * 1e6
        out[name]["saver_us"] = statistics.median(spent[name]) * 1e6
        out[name]["saver_mean_us"] = statistics.fmean(spent[name]) * 1e6
    tables = {"EventCkptSaver": table_bytes(urls["EventCkptSaver"], "eventckpt"),
              "PostgresSaver": table_bytes(urls["PostgresSaver"], "public", POSTGRES_SAVER_TABLES)}
    for name, sizes in tables.items():
        out[name]["bytes"] = sum(sizes.values())
        out[name]["tables"] = sizes
    for url in urls.values():  # the planner statistics autovacuum would gather soon after: both read with them
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
    with savers(urls, setup=False) as fresh:  # freshly opened: nothing cached from the run
        apps = {name: w_graph(n, PlainState).compile(checkpointer=saver) for name, saver in fresh.items()}
        middles = {}
        for name, app in apps.items():
            history = [h.config for h in app.get_state_history(CONFIG)]
            out[name]["checkpoints"] = len(history)
            middles[name] = history[len(history) // 2]
        for kind, call, times in (("latest_ms", lambda a, m: a.get_state(CONFIG), rounds),
                                  ("middle_ms", lambda a, m: a.get_state(m), rounds),
                                  ("history_ms", lambda a, m: list(a.get_state_history(CONFIG)), max(1, rounds // 5))):
            medians = in_turns({name: functools.partial(call, apps[name], middles[name]) for name in apps}, times)
            for name, seconds in medians.items():
                out[name][kind] = seconds * 1e3
        for config in (CONFIG, None):
            values = [app.get_state(config or middles[name]).values for name, app in apps.items()]
            if values[0] != values[1]:
                raise AssertionError("EventCkptSaver and PostgresSaver give different states")
    ours, theirs = out["EventCkptSaver"], out["PostgresSaver"]
    figure(f"LangGraph W {n}: graph step / PostgresSaver's", ours["step_us"] / theirs["step_us"], "<= 0.5",
           ours["step_us"] <= 0.5 * theirs["step_us"])
    figure(f"LangGraph W {n}: table bytes / PostgresSaver's", ours["bytes"] / theirs["bytes"], "<= 1/50 (0.02)",
           ours["bytes"] * 50 <= theirs["bytes"])
    for kind, what in (("latest_ms", "get_state newest"), ("middle_ms", "get_state middle")):
        figure(f"LangGraph W {n}: {what} / PostgresSaver's", ours[kind] / theirs[kind], "<= 1.0",
               ours[kind] <= theirs[kind])
    return out


# -- 3. writer scaling --------------------------------------------------------------------------------------


KINDS = ("eventckpt", "bare")


def run_scaling(server: Server, counts: list[int], seconds: float, warmup: int,
                rounds: int) -> dict[str, dict[int, dict[str, list[float]]]]:
    """For eventckpt's writers and bare psycopg writers (the limit of this machine), taking turns: the
    aggregate commits/s of each writer count, and the writers' CPU milliseconds per commit, per round."""
    url = server.database("scaling")
    eventckpt.open(url).close()  # the schema, before the writers start
    ctx = multiprocessing.get_context("spawn")  # fresh interpreters: nothing (pools, threads) inherited
    found = {kind: {k: {"commits_per_s": [], "cpu_ms_per_commit": []} for k in counts} for kind in KINDS}
    expected_versions = 0
    with bar(rounds * len(counts) * len(KINDS), "writer scaling") as progress:
        for r in range(rounds):
            for k in (counts if r % 2 == 0 else counts[::-1]):
                for kind in (KINDS if (r + k) % 2 == 0 else KINDS[::-1]):
                    commits = run_writers(ctx, kind, url, f"{kind}-r{r}-k{k}", k, warmup, seconds)
                    done = sum(c for c, _ in commits)
                    found[kind][k]["commits_per_s"].append(done / seconds)
                    found[kind][k]["cpu_ms_per_commit"].append(sum(cpu for _, cpu in commits) / max(1, done) * 1e3)
                    expected_versions += sum(1 + warmup + c for c, _ in commits)
                    progress.update(1)
    with psycopg.connect(url) as conn:
        stored = conn.execute("SELECT count(*) FROM eventckpt.versions").fetchone()[0]
    if stored != expected_versions:
        raise AssertionError(f"the writers reported {expected_versions} versions, the store holds {stored}")
    if 4 in counts and counts[0] == 1:
        ours = found["eventckpt"]
        ratio = statistics.median(ours[4]["commits_per_s"]) / statistics.median(ours[1]["commits_per_s"])
        figure("writer scaling: 4 writers / 1 writer (commits/s)", ratio, ">= 1.5", ratio >= 1.5)
    return found


def run_writers(ctx: Any, kind: str, url: str, prefix: str, k: int, warmup: int, seconds: float) -> list[tuple[int, float]]:
    """Start k writer processes on streams of their own and collect (commits, CPU seconds) from each."""
    barrier, results = ctx.Barrier(k), ctx.Queue()
    procs = [ctx.Process(target=writer, args=(kind, url, f"{prefix}-w{i}", warmup, seconds, barrier, results))
             for i in range(k)]
    for p in procs:
        p.start()
    commits: list[tuple[int, float]] = []
    while len(commits) < k:
        try:
            commits.append(results.get(timeout=1))
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.kill()
                raise RuntimeError(f"a {kind} writer process failed ({prefix})") from None
    for p in procs:
        p.join()
    return commits


# -- the report ---------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() else ""
    memory = next((line.split(":", 1)[1].strip() for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal")), "") if Path("/proc/meminfo").exists() else ""
    versions = {d: importlib.metadata.version(d) for d in ("eventckpt", "psycopg", "psycopg-pool", "langgraph",
                                                            "langgraph-checkpoint-postgres")}
    return {"platform": platform.platform(), "python": platform.python_version(), "cpu": cpu,
            "cores": os.cpu_count(), "memory": memory, "load_average": os.getloadavg(), "packages": versions}


def render(data: dict[str, Any]) -> str:
    m, a = data["machine"], data["args"]
    lines = ["# eventckpt on PostgreSQL: benchmark (bench/postgres_bench.py)", "",
             f"Run {data['date']} with `{data['command']}`.", "",
             f"Machine: {m['cpu']}, {m['cores']} cores, {m['memory']} memory, {m['platform']}, Python {m['python']};"
             f" load average at the start {m['load_average'][0]:.2f}, at the end {data['load_average_end'][0]:.2f}"
             " (a machine shared with other work: compare the ratios, not the times). The server runs on the same"
             " machine as the clients.",
             f"Packages: {', '.join(f'{k} {v}' for k, v in m['packages'].items())}.", "",
             "PostgreSQL: a throw-away cluster started by tests/pgserver.py with the server's default durability; "
             + ", ".join(f"{k} = {v}" for k, v in data["server"].items()) + ".", ""]
    if data.get("w"):
        lines += [f"## Workload W: an eventckpt transaction against the bare psycopg commit of its rows", "",
                  f"Interleaved in blocks of {a['block']} steps; per-step times in microseconds.", "",
                  "steps | window | eventckpt median | eventckpt p99 | bare median | bare p99 | ratio median | ratio p99",
                  "---|---|---|---|---|---|---|---"]
        lines += [f"{r['steps']} | {r['window']} | {r['eventckpt_median_us']:.0f} | {r['eventckpt_p99_us']:.0f} |"
                  f" {r['bare_median_us']:.0f} | {r['bare_p99_us']:.0f} | {r['ratio_median']:.2f} | {r['ratio_p99']:.2f}"
                  for r in data["w"]]
        lines.append("")
    if data.get("graph"):
        g = data["graph"]
        lines += [f"## LangGraph: W as a graph, {a['graph_steps']} steps, EventCkptSaver against PostgresSaver", "",
                  "Graph steps interleaved in blocks; step and saver (put + put_writes) times are medians per step in"
                  " microseconds; reads on freshly opened savers, medians of the savers taking turns.", "",
                  "saver | checkpoints | graph step us | saver us | table bytes | get_state newest ms |"
                  " get_state middle ms | get_state_history ms", "---|---|---|---|---|---|---|---"]
        lines += [f"{name} | {r['checkpoints']:.0f} | {r['step_us']:.0f} | {r['saver_us']:.0f} | {r['bytes']:,.0f} |"
                  f" {r['latest_ms']:.2f} | {r['middle_ms']:.2f} | {r['history_ms']:.1f}" for name, r in g.items()]
        ours, pg = g["EventCkptSaver"], g["PostgresSaver"]
        lines += ["", f"EventCkptSaver / PostgresSaver: graph step {ours['step_us'] / pg['step_us']:.2f}x, saver time"
                  f" {ours['saver_us'] / pg['saver_us']:.2f}x, table bytes 1/{pg['bytes'] / ours['bytes']:.0f},"
                  f" get_state newest {ours['latest_ms'] / pg['latest_ms']:.2f}x, middle"
                  f" {ours['middle_ms'] / pg['middle_ms']:.2f}x, get_state_history"
                  f" {ours['history_ms'] / pg['history_ms']:.3f}x", "",
                  "Table bytes (pg_total_relation_size: heap, TOAST, indexes) by table, the largest first:"]
        lines += [f"{name}: " + ", ".join(f"{table} {size:,}" for table, size in r["tables"].items() if size > 32768)
                  + " (and smaller ones)" for name, r in g.items()]
        lines.append("")
    if data.get("scaling"):
        s = data["scaling"]
        first = str(a["writers"][0])
        lines += ["## Writer scaling: writer processes on one store, each on its own stream", "",
                  f"W commits for {a['seconds']:g} s after {a['warmup']} warm-up commits each; eventckpt transactions"
                  " and, as the limit of this machine, bare psycopg commits of the same rows, taking turns;"
                  f" {a['rounds']} rounds (the writer counts in alternating order). This machine has {m['cores']}"
                  " cores, shared by the writers and the server (and by whatever else runs: see the load average).",
                  "", f"writers | eventckpt commits/s per round | eventckpt median | eventckpt / {first} writer |"
                  f" eventckpt CPU ms per commit | bare median | bare / {first} writer | bare CPU ms per commit",
                  "---|---|---|---|---|---|---|---"]
        ours, bare = s["eventckpt"], s["bare"]
        for k in ours:
            median = {kind: statistics.median(s[kind][k]["commits_per_s"]) for kind in s}
            one = {kind: statistics.median(s[kind][first]["commits_per_s"]) for kind in s}
            lines.append(f"{k} | {', '.join(f'{x:.0f}' for x in ours[k]['commits_per_s'])} | {median['eventckpt']:.0f} |"
                         f" {median['eventckpt'] / one['eventckpt']:.2f} |"
                         f" {statistics.median(ours[k]['cpu_ms_per_commit']):.2f} | {median['bare']:.0f} |"
                         f" {median['bare'] / one['bare']:.2f} | {statistics.median(bare[k]['cpu_ms_per_commit']):.2f}")
        lines.append("")
    lines += ["## Figures against their targets", "", "figure | value | target | met", "---|---|---|---"]
    lines += [f"{f['figure']} | {f['value']:.4g} | {f['target']} | {'yes' if f['met'] else 'NO'}" for f in FIGURES]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 10000],
                        help="W sizes (one run to the largest; each size reports its first and last 1000 steps)")
    parser.add_argument("--graph-steps", type=int, default=1000, help="W steps through the LangGraph savers")
    parser.add_argument("--block", type=int, default=100, help="steps a system runs before the other takes its turn")
    parser.add_argument("--reads", type=int, default=60,
                        help="get_state calls per saver, taking turns (get_state_history: a fifth); fewer make noisy medians")
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--seconds", type=float, default=5.0, help="measured seconds per writer count and round")
    parser.add_argument("--warmup", type=int, default=50, help="commits each writer makes before the measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the writer counts")
    parser.add_argument("--parts", nargs="+", choices=("w", "graph", "scaling"), default=["w", "graph", "scaling"])
    parser.add_argument("--out", default=None, help="where postgres.md and postgres.json go (default bench/results;"
                        " with --quick, nowhere unless given)")
    parser.add_argument("--quick", action="store_true", help="every part at a tiny size (checks the script)")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.graph_steps, args.block, args.reads = [60], 30, 20, 3
        args.writers, args.seconds, args.warmup, args.rounds = [1, 4], 0.5, 5, 1
    out = Path(args.out) if args.out else (None if args.quick else HERE / "results")
    data: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                            "command": shlex.join(["python", "bench/postgres_bench.py", *sys.argv[1:]]),
                            "machine": machine(), "args": vars(args)}
    server = Server()
    try:
        data["server"] = server.settings()
        if "w" in args.parts:
            times = run_w(server, max(args.steps), args.block)
            data["w"] = w_figures(times, sorted(args.steps))
        if "graph" in args.parts:
            data["graph"] = run_graph(server, args.graph_steps, args.block, args.reads)
        if "scaling" in args.parts:
            found = run_scaling(server, args.writers, args.seconds, args.warmup, args.rounds)
            data["scaling"] = {kind: {str(k): v for k, v in by_count.items()} for kind, by_count in found.items()}
    finally:
        server.close()
    data["load_average_end"] = os.getloadavg()
    data["figures"] = FIGURES
    text = render(data)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "postgres.md").write_text(text)
        (out / "postgres.json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
