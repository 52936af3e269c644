"""bench/compare.py runs end to end: its quick mode writes the report, the JSON and the plots, and a
system that passes the time bound is reported as stopped, never dropped."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LABELS = ["eventckpt", "eventckpt tracked save()", "eventckpt save()", "LangGraph SqliteSaver", "LangGraph SqliteSaver + DeltaChannel",
          "LangGraph EventCkptSaver", "eventsourcing", "bare apsw (limit)"]
PNG = b"\x89PNG\r\n\x1a\n"


def compare(tmp_path: Path, *args: str) -> tuple[Path, dict]:
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "compare.py"), "--quick", "--out", str(out),
                           "--dir", str(tmp_path), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return out, json.loads((out / "results.json").read_text())


def rows(report: str, size: str) -> dict[str, str]:
    """The table rows of one size, by system label."""
    section = report.split(f"### {size} steps\n")[1].split("\n### ")[0]
    return {line.split(" | ")[0][2:]: line for line in section.splitlines() if line.startswith("| ") and " | " in line}


def test_quick_mode_writes_report_json_and_plots(tmp_path: Path) -> None:
    """--quick runs every system at two small sizes and writes a table row for each, ratios, JSON and PNGs."""
    out, results = compare(tmp_path)
    report = (out / "report.md").read_text()
    for size in ("50", "200"):
        table = rows(report, size)
        assert set(LABELS) <= set(table), table.keys()
        figures = {r["system"]: r for r in results["sizes"][size]}
        for label in LABELS:
            if label in results["not_available"]:
                assert "not available: " in table[label]
                continue
            row = figures[label]
            assert row["steps"] == int(size) and row["stopped"] is None
            assert row["file_bytes"] > row["payload_bytes"] > 0
            assert row["save_last_median_us"] > 0
            if label != "eventckpt":
                assert "×)" in table[label], table[label]  # every figure comes with its ratio to eventckpt
            if label != "bare apsw (limit)":
                assert row["restore_count"] == 5 and row["restore_median_ms"] > 0
    assert "LangGraph SqliteSaver" not in results["not_available"]
    for name in ("file_bytes.png", "save_time.png", "restore_time.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG) and len(data) > 20_000, name
    assert not list(tmp_path.glob("*.db")), "the stores are removed after each size"


def test_time_bound_stops_a_peer_and_says_so(tmp_path: Path) -> None:
    """A peer past the time bound is stopped, its reached steps reported, larger sizes marked not run;
    --readme refreshes the block between the markers."""
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- compare:begin -->\nold table\n<!-- compare:end -->\noutro\n")
    out, results = compare(tmp_path, "--time-bound", "0", "--systems", "sqlite", "--readme", str(readme))
    first = {r["system"]: r for r in results["sizes"]["50"]}
    assert first["eventckpt"]["steps"] == 50 and first["eventckpt"]["stopped"] is None  # the reference is unbounded
    stopped = first["LangGraph SqliteSaver"]
    assert 1 <= stopped["steps"] < 50 and "time bound" in stopped["stopped"]
    second = {r["system"]: r for r in results["sizes"]["200"]}
    assert second["LangGraph SqliteSaver"]["steps"] == 0
    assert second["LangGraph SqliteSaver"]["stopped"].startswith("not run: stopped by the time bound")
    report = (out / "report.md").read_text()
    assert "(stopped)" in rows(report, "50")["LangGraph SqliteSaver"]
    text = readme.read_text()
    assert "old table" not in text and text.startswith("intro\n") and text.endswith("<!-- compare:end -->\noutro\n")
    assert "### 50 steps" in text and "results/file_bytes.png" in text
