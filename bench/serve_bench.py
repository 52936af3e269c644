"""Server time of every page of `eventckpt serve` on workload W (target: 200 ms each at 100k versions).

    python bench/serve_bench.py --steps 100000                 # builds W once (about a minute per 100k steps)
    python bench/serve_bench.py --db /tmp/w.db --keep           # reuse a file built before

W is built as query_bench.py builds it (stream "w", step v is version v + 1), plus a fork of it at the
middle with a few versions, so the fork graph and cross-fork diffs have something to draw. The viewer is
run as `eventckpt serve` in its own process; each request is made over HTTP and timed by the server
itself (its Server-Timing header: routing, queries and rendering, not the network). Each route is asked
--repeat times after a warm-up; the median and the p95 are printed, with the bytes answered.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eventckpt  # noqa: E402
from query_bench import build_w  # noqa: E402

TARGET_MS = 200.0


def routes(head: int) -> list[tuple[str, str]]:
    """(label, target) of every page and a JSON twin, at the head, the middle and the start of W."""
    mid, fork = head // 2, "w-fork"
    span = min(10_000, head - mid)
    return [
        ("streams", "/streams"),
        ("streams.json", "/streams.json"),
        ("timeline (newest 100)", "/s/w"),
        ("timeline (middle page)", f"/s/w?before={mid}"),
        ("timeline.json", "/s/w.json"),
        ("version (head)", f"/s/w/v/{head}"),
        ("version (middle)", f"/s/w/v/{mid}"),
        ("version (first)", "/s/w/v/1"),
        ("version + pinned path", f"/s/w/v/{head}?pin=scratch.k05"),
        ("version + pinned message", f"/s/w/v/{head}?pin=messages[{mid}].content"),
        ("version.json (head)", f"/s/w/v/{head}.json"),
        ("fork version (head)", f"/s/{fork}/v/{mid + 5}"),
        ("list page (middle items)", f"/s/w/v/{head}/state?path=messages&start={mid}"),
        ("history scratch.k05", "/s/w/history?path=scratch.k05"),
        ("history step (older page)", f"/s/w/history?path=step&until={mid}"),
        ("diff adjacent", f"/diff?a=w@{head - 1}&b=w@{head}"),
        (f"diff {span:,} apart", f"/diff?a=w@{mid}&b=w@{mid + span}"),
        ("diff across the fork", f"/diff?a=w@{head}&b={fork}@{mid + 5}"),
        ("search by name", "/search?name=checkpoint"),
        ("search by metadata", "/search?meta=node%3Dtools"),
    ]


def add_fork(path: str) -> None:
    """A fork of W at its middle with a few versions of its own, and a few named, tagged checkpoints."""
    with eventckpt.open(path) as store:
        task = store.stream("w")
        if store.stream("w-fork").exists():
            return
        head = task.version
        branch = task.fork(at=head // 2, task_id="w-fork")
        for i in range(5):
            with branch.transaction(name="checkpoint" if i == 2 else None, metadata={"node": "tools"}) as tx:
                tx.append("messages", {"role": "tool", "content": f"fork step {i}"})
                tx.set("step", -i)


def server_ms(conn: http.client.HTTPConnection, target: str) -> tuple[float, int, int]:
    conn.request("GET", target)
    response = conn.getresponse()
    body = response.read()
    timing = response.getheader("Server-Timing", "app;dur=nan")
    return float(timing.split("dur=")[1]), response.status, len(body)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--db", default=None, help="the W file (built when missing)")
    parser.add_argument("--keep", action="store_true", help="keep the file afterwards")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    path = args.db or os.path.join(tempfile.mkdtemp(prefix="eventckpt-sbench-"), f"w-{args.steps}.db")
    if not os.path.exists(path):
        t0 = time.perf_counter()
        build_w(path, args.steps)
        print(f"built W with {args.steps} steps in {time.perf_counter() - t0:.0f} s: {path}", flush=True)
    add_fork(path)
    with eventckpt.open(path, readonly=True) as store:
        head = store.stream("w").version
    proc = subprocess.Popen([sys.executable, "-m", "eventckpt", "serve", path, "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().split(" at ", 1)[1].split()[0]
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
        print(f"\n== eventckpt serve on W: {head} versions; server ms, median and p95 of {args.repeat} (target {TARGET_MS:g} ms) ==")
        print(f"{'page':28} {'median':>8} {'p95':>8} {'bytes':>9}  target")
        worst = 0.0
        for label, target in routes(head):
            _, status, _ = server_ms(conn, target)  # warm-up
            if status != 200:
                raise SystemExit(f"{label}: {target} answered {status}")
            times, size = [], 0
            for _ in range(args.repeat):
                ms, _, size = server_ms(conn, target)
                times.append(ms)
            times.sort()
            median, p95 = statistics.median(times), times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            worst = max(worst, p95)
            print(f"{label:28} {median:8.1f} {p95:8.1f} {size:9,}  {'met' if p95 <= TARGET_MS else 'MISSED'}", flush=True)
        print(f"slowest p95: {worst:.1f} ms")
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    if not args.keep and not args.db:
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)


if __name__ == "__main__":
    main()
