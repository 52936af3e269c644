"""The benchmark scripts README names run end to end at a tiny size, so they cannot rot unnoticed
(compare.py has its own test in test_compare.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .pgserver import binaries

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _run(script: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_w_native_prints_ratios_to_the_bare_commit(tmp_path: Path) -> None:
    """w_native.py runs W with transactions, a tracked state's save(), plain save() and bare commits in
    turn and prints their ratios (to the bare commit and to transactions) and how flat each stays."""
    out = _run("w_native.py", "--steps", "150", "--restores", "3", "--dir", str(tmp_path))
    for line in ("ratio tx/bare", "ratio tracked/bare", "ratio save/bare", "ratio tracked/tx", "ratio save/tx",
                 "flat tracked"):
        assert line in out, out


def test_query_bench_builds_w_and_checks_the_targets(tmp_path: Path) -> None:
    """query_bench.py builds W, then times log, history and diff against their targets and the naive way."""
    db = tmp_path / "w.db"
    out = _run("query_bench.py", "--steps", "200", "--repeat", "1", "--db", str(db), "--keep")
    for line in ("log(3000)", "history(scratch.k05)", "diff("):
        assert line in out
    assert out.count("target") >= 3 and db.exists()


def test_langgraph_bench_compares_the_savers(tmp_path: Path) -> None:
    """langgraph_bench.py runs W on EventCkptSaver and both SqliteSaver set-ups, W long on EventCkptSaver,
    and the agent graph, and prints every figure next to its target."""
    out = _run("langgraph_bench.py", "--steps", "15", "--long", "40", "--invokes", "4", "--durability", "normal",
               "--dir", str(tmp_path / "lg"))
    assert "EventCkptSaver / SqliteSaver:" in out and "EventCkptSaver / SqliteSaver+DeltaChannel:" in out
    assert "agent graph with LangChain messages, 4 invokes" in out
    figures = out.split("figure | value | target | met")[1].strip().splitlines()
    assert len(figures) == 11 and all(line.endswith(("| yes", "| NO")) for line in figures)


def test_serve_bench_times_every_page(tmp_path: Path) -> None:
    """serve_bench.py builds W, serves it with `eventckpt serve` and prints each page's server time."""
    out = _run("serve_bench.py", "--steps", "120", "--repeat", "2", "--db", str(tmp_path / "w.db"))
    for label in ("streams", "version (head)", "diff across the fork", "search by metadata", "list page (middle items)"):
        assert label in out
    assert "slowest p95" in out and out.count(" met") + out.count("MISSED") >= 20


def test_postgres_bench_runs_every_part_on_its_own_server(tmp_path: Path) -> None:
    """postgres_bench.py starts its own PostgreSQL server, runs W against the bare psycopg commit,
    EventCkptSaver against PostgresSaver and the writer scaling, prints each figure next to its target and
    writes postgres.md and postgres.json."""
    if binaries() is None:
        message = "PostgreSQL server binaries not found (Debian: apt-get install postgresql); postgres_bench.py needs them"
        if os.environ.get("CI"):
            pytest.fail(message + " and CI must not skip it")
        pytest.skip(message)
    out = _run("postgres_bench.py", "--quick", "--out", str(tmp_path))
    for label in ("| ratio median | ratio p99", "EventCkptSaver | 32 |", "PostgresSaver | 32 |", "get_state_history ms",
                  "| eventckpt / 1 writer |", "| bare / 1 writer |", "\n4 | ", "fsync = on", "synchronous_commit = on"):
        assert label in out, label
    figures = out.split("figure | value | target | met\n---|---|---|---\n")[1].strip().splitlines()
    assert [line.split(" | ")[0] for line in figures] == [
        "W 60 steps, all 60: transaction / bare commit (median)", "LangGraph W 30: graph step / PostgresSaver's",
        "LangGraph W 30: table bytes / PostgresSaver's", "LangGraph W 30: get_state newest / PostgresSaver's",
        "LangGraph W 30: get_state middle / PostgresSaver's", "writer scaling: 4 writers / 1 writer (commits/s)"]
    assert all(line.endswith(("| yes", "| NO")) for line in figures)
    assert (tmp_path / "postgres.md").read_text() + "\n" == out
    assert '"figures"' in (tmp_path / "postgres.json").read_text()
