"""What the CLI prints (lines, tables, JSON) and how it reads its arguments (STREAM@VERSION, paths,
KEY=VALUE metadata filters)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

import click
import orjson

from .checkpoint import Checkpoint, format_time
from .checks import whole_number
from .codec import plain_json
from .diffing import ADDED, REMOVED, Change, Diff
from .errors import InvalidArgumentError, StreamNotFoundError
from .paths import Path, parse, to_text
from .query import HistoryEntry
from .store import Store

# -- arguments ----------------------------------------------------------------------------------------


def parse_ref(store: Store, text: str) -> tuple[str, int | None]:
    """STREAM[@VERSION]: VERSION is a number, or the log's `vN`. A name that is itself a stream is that
    stream's head, so names holding '@' (user@example.com) stay addressable: `user@example.com@3` is
    its version 3. New names cannot end in '@' and a version (see check_new_name)."""
    if "@" not in text or store.stream(text).exists():
        return text, None
    name, _, version = text.rpartition("@")
    if not is_version(version) and not store.stream(name).exists():
        raise StreamNotFoundError(text)
    return name, parse_version(version, text)


def parse_version(text: str, ref: str | None = None) -> int:
    """A version as the CLI takes it: 3 or v3."""
    digits = text[1:] if text[:1] == "v" else text
    if not whole_number(digits):
        raise InvalidArgumentError("version", ref if ref is not None else text,
                                   "a version is a whole number such as 3 or v3 (STREAM@3, STREAM@v3)")
    return int(digits)


def is_version(text: str) -> bool:
    """Whether a diff's second side is a bare version of the first stream (7 or v7)."""
    digits = text[1:] if text[:1] == "v" else text
    return whole_number(digits)


def parse_path(text: str) -> Path:
    """A key, a dotted path (scratch.k05, messages[3].content) or a SQLite JSON path ($."a.b")."""
    return parse(text)


def parse_meta(items: Sequence[str]) -> dict[str, Any] | None:
    """KEY=VALUE filters; VALUE is JSON when it parses (3 is a number, "3" a string), else a string."""
    if not items:
        return None
    out: dict[str, Any] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise InvalidArgumentError("--meta", item, "must be KEY=VALUE")
        try:  # the standard parser, since orjson reads an int past 64 bits as a float
            out[key] = json.loads(raw, parse_float=_finite, parse_constant=_refused)
        except ValueError:
            out[key] = raw
    return out


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text} is not a finite number")
    return number


def _refused(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


# -- text -----------------------------------------------------------------------------------------------


def show_path(path: Path) -> str:
    text = to_text(path)
    return text[2:] if text.startswith("$.") else text


def shown(value: Any) -> str:
    """A value for people: JSON when it is plain JSON data (JSON text shows it as it is), else its repr (a
    tuple, a datetime, a UUID, a big int, bytes, a Decimal, a set, a dict with number or "$" keys, NaN):
    as JSON these would read as a list, a string or null, and a real change (a list that became a tuple)
    would print as no change."""
    if plain_json(value):
        try:
            return orjson.dumps(value).decode()
        except orjson.JSONEncodeError:  # a lone surrogate in a string
            pass
    return repr(value)


def short(value: Any, width: int) -> str:
    text = shown(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def log_line(cp: Checkpoint, *, stream: bool = False) -> str:
    usage = " ".join(f"{k}={v}" for k, v in sorted(cp.token_usage.items()))
    meta = " ".join(f"{k}={shown(v)}" for k, v in sorted(cp.metadata.items()))
    head = f"{cp.task_id}@{cp.version}" if stream else f"v{cp.version}"
    return "  ".join(part for part in (
        f"{head:<6}", format_time(cp.created_at)[:19].replace("T", " "), "auto  " if cp.auto else "manual",
        repr(cp.name) if cp.name else "", usage, meta) if part)


def change_line(change: Change, width: int) -> str:
    where = show_path(change.path)
    if change.kind == ADDED:
        return f"+ {where}  {short(change.new, width)}"
    if change.kind == REMOVED:
        return f"- {where}  {short(change.old, width)}"
    half = max(10, width // 2)
    return f"~ {where}  {short(change.old, half)} -> {short(change.new, half)}"


def history_line(entry: HistoryEntry, asked: Path) -> str:
    """One change; an ancestor's change shows the path asked for and names the ancestor."""
    value = "" if entry.op == "delete" else short(entry.value, 80)
    where = show_path(entry.path) if len(entry.path) >= len(asked) else f"{show_path(asked)} (via {show_path(entry.path)})"
    return f"v{entry.version:<5} {format_time(entry.created_at)[:19].replace('T', ' ')}  {entry.op:8} {where:24} {value}"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]], *, header: bool = True) -> None:
    cells = [[("" if v is None else str(v)) for v in row] for row in rows]
    shown = [list(columns)] + cells if header and any(columns) else cells
    widths = [max((len(r[i]) for r in shown), default=0) for i in range(len(columns))]
    for row in shown:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


# -- JSON -------------------------------------------------------------------------------------------------


def emit_json(data: Any) -> None:
    click.echo(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())


def value_json(store: Store, value: Any) -> orjson.Fragment:
    """A value as the JSON the store keeps (tagged forms for tuples, datetimes, ...)."""
    return orjson.Fragment(store.codec.encode(value))


def checkpoint_json(store: Store, cp: Checkpoint) -> dict[str, Any]:
    return {
        "stream": cp.task_id, "version": cp.version, "created_at": format_time(cp.created_at), "name": cp.name,
        "auto": cp.auto, "metadata": value_json(store, cp.metadata), "usage": cp.token_usage,
        "checkpoint_id": cp.checkpoint_id,
        "fork_of": {"stream": cp.parent.task_id, "version": cp.parent.version} if cp.parent else None,
    }


def diff_json(store: Store, result: Diff) -> dict[str, Any]:
    def side(ref: Any) -> Any:
        return {"stream": ref.task_id, "version": ref.version} if ref else None

    return {
        "from": side(result.old), "to": side(result.new),
        "changes": [{"kind": c.kind, "path": to_text(c.path),
                     **({} if c.kind == ADDED else {"old": value_json(store, c.old)}),
                     **({} if c.kind == REMOVED else {"new": value_json(store, c.new)})} for c in result],
    }


def history_json(store: Store, entry: HistoryEntry) -> dict[str, Any]:
    return {"stream": entry.task_id, "version": entry.version, "seq": entry.seq, "op": entry.op,
            "path": to_text(entry.path), "value": value_json(store, entry.value),
            "created_at": format_time(entry.created_at)}
