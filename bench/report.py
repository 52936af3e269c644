"""The comparison's outputs: a Markdown report (one table per size, every figure with its ratio to eventckpt
measured in the same run), a JSON summary, and three PNG plots, each with a lower panel of ratios."""

from __future__ import annotations

import dataclasses
import gzip
import json
import math
import statistics
from collections.abc import Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from harness import Op, Run, median_of, window, windows
from workload import payload_bytes, steps

REFERENCE = "eventckpt"
PLOTS = {
    "file_bytes.png": "File bytes against steps",
    "save_time.png": "Save time per step against steps",
    "restore_time.png": "Restore time against version",
}


def number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) else None


def ratio(value: Any, ref: Any) -> float | None:
    value, ref = number(value), number(ref)
    if value is None or not ref:
        return None
    return value / ref


def cell(value: float | str | None, ref: float | None, digits: int = 0, is_ref: bool = False) -> str:
    """`value (ratio×)`; a dash when there is nothing to show, "n/a" when the system has no such thing."""
    if value is None:
        return "—"
    if isinstance(value, str):
        return value
    text = f"{value:,.{digits}f}"
    r = None if is_ref else ratio(value, ref)
    return text if r is None else f"{text} ({r:.3g}×)"


def reference(runs: Sequence[Run]) -> Run:
    return next(r for r in runs if r.system == REFERENCE)


def figures(run: Run, ref: Run) -> dict[str, Any]:
    """The row of one system: each figure next to eventckpt's over exactly the same steps or versions."""
    own, base = windows(run.save), windows(ref.save, run.steps)
    row: dict[str, Any] = {"system": run.system, "steps": run.steps, "asked": run.n, "stopped": run.stopped}
    for part in ("first", "last"):
        for i, stat in enumerate(("median", "p99")):
            row[f"save_{part}_{stat}_us"] = own[part][i] * 1e6 if own[part] else None
            row[f"ref_save_{part}_{stat}_us"] = base[part][i] * 1e6 if base[part] else None
    wall = window(run.wall, max(1, len(run.wall) - 999), len(run.wall)) if run.wall else None
    row["step_last_median_us"] = wall[0] * 1e6 if wall else None
    row["file_bytes"] = run.file_bytes if run.steps else None
    row["payload_bytes"] = run.payload_bytes
    row["ref_file_bytes"] = run.ref_file_bytes or None
    unavailable = run.restore_note and "stopped" not in run.restore_note
    row["restore_median_ms"] = median_of(run.restores) * 1e3 if run.restores else "n/a" if unavailable else None
    row["ref_restore_median_ms"] = (median_of(run.ref_restores) or 0) * 1e3 or None
    row["restore_count"] = len(run.restores)
    row["restore_note"] = run.restore_note
    for name, op in run.ops.items():
        ref_op = ref.ops.get(name)
        row[f"{name}_ms"] = op.seconds * 1e3 if op.seconds is not None else "n/a"
        row[f"ref_{name}_ms"] = ref_op.seconds * 1e3 if ref_op and ref_op.seconds is not None else None
        row[f"{name}_rows"] = op.rows
        row[f"{name}_note"] = op.note
    return row


HEADER = ("| system | steps | save µs median, first 1k | p99, first 1k | median, last 1k | p99, last 1k "
          "| graph step µs median, last 1k | file MB | file ÷ payload | restore ms (median) | log ms | history ms "
          "| diff ms |")


def table(runs: Sequence[Run], missing: dict[str, str]) -> list[str]:
    ref = reference(runs)
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    for run in runs:
        is_ref = run is ref
        if not run.steps:
            lines.append(f"| {run.system} | {run.stopped} |" + " |" * (HEADER.count("|") - 3))
            continue
        f = figures(run, ref)
        stop = f" of {run.n:,} (stopped)" if run.stopped else ""
        mb = f["file_bytes"] / 1e6
        per_payload = f["file_bytes"] / f["payload_bytes"]
        ref_per_payload = (f["ref_file_bytes"] or 0) / f["payload_bytes"]
        cells = [
            run.system, f"{run.steps:,}{stop}",
            *(cell(f[f"save_{p}_{s}_us"], f[f"ref_save_{p}_{s}_us"], 0, is_ref)
              for p in ("first", "last") for s in ("median", "p99")),
            cell(f["step_last_median_us"], f["ref_save_last_median_us"], 0, is_ref),
            cell(mb, (f["ref_file_bytes"] or 0) / 1e6, 2, is_ref),
            cell(per_payload, ref_per_payload, 2, is_ref),
            cell(f["restore_median_ms"], f["ref_restore_median_ms"], 2, is_ref),
            *(cell(f.get(f"{op}_ms"), f.get(f"ref_{op}_ms"), 2, is_ref) for op in ("log", "history", "diff")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    for label, why in missing.items():
        lines.append(f"| {label} | not available: {why} |" + " |" * (HEADER.count("|") - 3))
    return lines


def notes(runs: Sequence[Run]) -> list[str]:
    """What stopped early at this size."""
    out = []
    for run in runs:
        if run.stopped and run.steps:
            out.append(f"- {run.system}: {run.stopped} at step {run.steps:,}; its figures are for the steps it "
                       f"reached, and its ratios are to eventckpt over the same steps and versions.")
        if "stopped" in run.restore_note:
            out.append(f"- {run.system}, restore: {run.restore_note}.")
        for name, op in run.ops.items():
            if op.seconds is not None and "stopped" in op.note:
                out.append(f"- {run.system}, {name}: {op.note}.")
    return out


def not_available(results: dict[int, list[Run]]) -> list[str]:
    """Each operation a system lacks, once, with the reason."""
    seen: dict[tuple[str, str], str] = {}
    for runs in results.values():
        for run in runs:
            if run.steps and run.restore_note and "stopped" not in run.restore_note:
                seen.setdefault((run.system, "restore"), run.restore_note)
            for name, op in run.ops.items():
                if op.seconds is None:
                    seen.setdefault((run.system, name), op.note)
    return [f"- {system}, {op}: {why}." for (system, op), why in seen.items()]


def saver_table(runs: Sequence[Run]) -> list[str]:
    """eventckpt's LangGraph saver against SqliteSaver (plain and DeltaChannel) on the same graph."""
    ours = next((r for r in runs if r.system == "LangGraph EventCkptSaver" and r.steps), None)
    if ours is None:
        return []
    ref = reference(runs)
    lines = ["| EventCkptSaver ÷ | save median, last 1k | graph step median, last 1k | file bytes | restore median "
             "| log |", "|---|---|---|---|---|---|"]
    mine = figures(ours, ref)
    for peer in (r for r in runs if r.system.startswith("LangGraph SqliteSaver") and r.steps):
        other = figures(peer, ref)
        upto = min(ours.steps, peer.steps)
        a, b = windows(ours.save, upto)["last"], windows(peer.save, upto)["last"]
        wa = window(ours.wall, max(1, upto - 999), upto)
        wb = window(peer.wall, max(1, upto - 999), upto)
        values = [
            ratio(a[0], b[0]) if a and b else None,
            ratio(wa[0], wb[0]) if wa and wb else None,
            ratio(mine["file_bytes"], other["file_bytes"]) if ours.steps == peer.steps else None,
            ratio(number(mine["restore_median_ms"]), number(other["restore_median_ms"])) if ours.steps == peer.steps
            else None,
            ratio(number(mine.get("log_ms")), number(other.get("log_ms"))) if ours.steps == peer.steps else None,
        ]
        shown = " | ".join("—" if v is None else f"{v:.3g}×" for v in values)
        lines.append(f"| {peer.system} ({upto:,} steps) | {shown} |")
    return lines


def markdown(results: dict[int, list[Run]], missing: dict[str, str], meta: dict[str, Any],
             plots_dir: str = "") -> str:
    lines = ["# eventckpt against its peers on workload W", ""]
    lines += [f"- {k}: {v}" for k, v in meta.items()]
    lines += ["", *tables(results, missing)]
    if plots_dir is not None:
        lines += [""] + [f"![{title}]({plots_dir}{name})" for name, title in PLOTS.items()]
    return "\n".join(lines) + "\n"


def tables(results: dict[int, list[Run]], missing: dict[str, str]) -> list[str]:
    """The per-size tables and their notes (what README.md shows)."""
    lines = []
    for n, runs in results.items():
        lines += [f"### {n:,} steps", "", *table(runs, missing), ""]
        saver = saver_table(runs)
        if saver:
            lines += ["eventckpt's LangGraph saver as a fraction of SqliteSaver on the same graph:", "", *saver, ""]
        lines += notes(runs)
        if lines[-1]:
            lines.append("")
    gaps = not_available(results)
    if gaps:
        lines += ["Not available (n/a in the tables):", "", *gaps, ""]
    lines += [
        "Ratios in parentheses are to eventckpt (native transactions) measured in the same run over the same steps",
        "and versions. Save time is the time inside the store's save (for LangGraph, inside the saver's `put` and",
        "`put_writes`); a graph step is the whole LangGraph superstep. File bytes are the closed file; payload is",
        "the JSON of what W changed. log lists the newest checkpoints; history is every change of `step`; diff",
        "compares two versions.",
    ]
    return lines


def summary(results: dict[int, list[Run]], missing: dict[str, str], meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"meta": meta, "not_available": missing, "sizes": {}}
    for n, runs in results.items():
        ref = reference(runs)
        out["sizes"][str(n)] = [figures(r, ref) if r.steps else {"system": r.system, "steps": 0, "stopped": r.stopped}
                                for r in runs]
    return out


def write(out_dir: Path, results: dict[int, list[Run]], missing: dict[str, str], meta: dict[str, Any]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.md").write_text(markdown(results, missing, meta))
    (out_dir / "results.json").write_text(json.dumps(summary(results, missing, meta), indent=1) + "\n")
    plot(out_dir, results)


def save_runs(path: Path, results: dict[int, list[Run]], missing: dict[str, str], meta: dict[str, Any]) -> None:
    """Every measurement, per step, so the outputs can be rendered again without running (--from-runs)."""
    data = {"meta": meta, "not_available": missing,
            "sizes": {str(n): [dataclasses.asdict(r) for r in runs] for n, runs in results.items()}}
    with gzip.open(path, "wt") as f:
        json.dump(data, f)


def load_runs(path: Path) -> tuple[dict[int, list[Run]], dict[str, str], dict[str, Any]]:
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    results = {}
    for n, runs in data["sizes"].items():
        loaded = []
        for d in runs:
            for name in ("sizes", "restores", "ref_restores"):
                d[name] = [tuple(pair) for pair in d[name]]
            d["ops"] = {name: Op(**op) for name, op in d["ops"].items()}
            loaded.append(Run(**d))
        results[int(n)] = loaded
    return results, data["not_available"], data["meta"]


def update_readme(readme: Path, results: dict[int, list[Run]], missing: dict[str, str], meta: dict[str, Any],
                  plots_dir: str) -> None:
    """Replace the block between the compare markers in README.md with these tables and the size plot."""
    begin, end = "<!-- compare:begin -->", "<!-- compare:end -->"
    text = readme.read_text()
    head, found, rest = text.partition(begin)
    if not found or end not in rest:
        raise SystemExit(f"{readme} has no {begin} ... {end} block to refresh")
    body = "\n".join([provenance(meta), "", *tables(results, missing), "",
                      f"![File bytes against steps]({plots_dir}file_bytes.png)"])
    readme.write_text(head + begin + "\n" + body + "\n" + end + rest.partition(end)[2])


def provenance(meta: dict[str, Any]) -> str:
    return (f"Measured by `{meta['command']}` ({meta['started']}; {meta['machine']}; durability {meta['durability']}; "
            f"bounds: {meta['bounds']}).")


def progress(run: Run) -> str:
    """One line for the console: how far a system got and its headline figures."""
    last = windows(run.save)["last"]
    parts = [f"{run.system:34} {run.steps:>7,} steps in {run.write_seconds:7.1f}s"]
    if last:
        parts.append(f"save median last 1k {last[0] * 1e6:8.1f} us")
    if run.payload_bytes:
        parts.append(f"file {run.file_bytes / 1e6:9.2f} MB = {run.file_bytes / run.payload_bytes:6.2f}x payload")
    restore = median_of(run.restores)
    if restore is not None:
        parts.append(f"restore {restore * 1e3:8.2f} ms")
    if run.stopped:
        parts.append(f"STOPPED: {run.stopped}")
    return " | ".join(parts)


# -- plots ----------------------------------------------------------------------------------------


def largest(results: dict[int, list[Run]]) -> list[tuple[Run, Run]]:
    """Each system's run at the largest size it has steps for, with eventckpt's run of that size."""
    chosen: dict[str, tuple[Run, Run]] = {}
    for n in sorted(results):
        ref = reference(results[n])
        for run in results[n]:
            if run.steps:
                chosen[run.system] = (run, ref)
    return list(chosen.values())


def binned(times: Sequence[float], bins: int = 60) -> list[tuple[float, float]]:
    """(step, median seconds) over log-spaced bins of steps."""
    n = len(times)
    edges = sorted({int(round(math.exp(math.log(n) * i / bins))) for i in range(bins + 1)} | {n})
    out = []
    for lo, hi in zip(edges, edges[1:]):
        chunk = times[lo - 1:hi]
        if chunk:
            out.append(((lo + hi) / 2, statistics.median(chunk)))
    return out


def plot(out_dir: Path, results: dict[int, list[Run]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = largest(results)

    def figure(title: str, xlabel: str, ylabel: str) -> tuple[Any, Any, Any]:
        fig, (top, low) = plt.subplots(2, 1, figsize=(12, 8), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
        top.set_title(title)
        top.set_ylabel(ylabel)
        low.set_ylabel("ratio to eventckpt")
        low.set_xlabel(xlabel)
        for ax in (top, low):
            ax.grid(True, which="both", alpha=0.3)
        return fig, top, low

    def finish(fig: Any, top: Any, low: Any, name: str) -> None:
        low.axhline(1.0, color="black", linewidth=0.8)
        top.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
        fig.tight_layout()
        fig.savefig(out_dir / name, dpi=110)
        plt.close(fig)

    # file bytes against steps
    fig, top, low = figure("File bytes against steps (workload W)", "steps", "bytes on disk")
    top.set_xscale("log")
    top.set_yscale("log")
    low.set_yscale("log")
    n_max = max(run.steps for run, _ in pairs)
    grid = sorted({s for run, _ in pairs for s, _ in run.sizes})
    cumulative = list(accumulate(payload_bytes(s) for s in steps(n_max)))
    top.plot(grid, [cumulative[s - 1] for s in grid], "k:", label="payload (JSON of the changes)")
    for run, ref in pairs:
        xs, ys = zip(*run.sizes) if run.sizes else ((), ())
        top.plot(xs, ys, marker=".", label=run.system)
        base = dict(ref.sizes)
        common = [(s, b / base[s]) for s, b in run.sizes if base.get(s)]
        if common:
            low.plot(*zip(*common), marker=".", label=run.system)
    finish(fig, top, low, "file_bytes.png")

    # save time per step against steps
    fig, top, low = figure("Save time per step (median over log-spaced bins)", "step", "µs")
    top.set_xscale("log")
    top.set_yscale("log")
    low.set_yscale("log")
    for run, ref in pairs:
        mine, base = binned(run.save), dict(binned(ref.save[:run.steps]))
        line, = top.plot([x for x, _ in mine], [t * 1e6 for _, t in mine], label=run.system)
        common = [(x, t / base[x]) for x, t in mine if base.get(x)]
        if common:
            low.plot(*zip(*common), color=line.get_color())
        if run.wall:
            walls = binned(run.wall)
            top.plot([x for x, _ in walls], [t * 1e6 for _, t in walls], linestyle="--", color=line.get_color(),
                     label=f"{run.system}: whole graph step")
    finish(fig, top, low, "save_time.png")

    # restore time against version
    fig, top, low = figure("Restore time of random versions", "version (steps)", "ms")
    top.set_yscale("log")
    low.set_yscale("log")
    for run, _ in pairs:
        if not run.restores:
            continue
        points = top.plot([v for v, _ in run.restores], [t * 1e3 for _, t in run.restores], marker="o",
                          linestyle="-", label=run.system)
        base = dict(run.ref_restores)
        common = [(v, t / base[v]) for v, t in run.restores if base.get(v)]
        if common:
            low.plot(*zip(*common), marker="o", color=points[0].get_color())
    finish(fig, top, low, "restore_time.png")
