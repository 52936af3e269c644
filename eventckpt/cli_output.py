"""What the CLI prints (lines, tables, JSON) and how it reads its arguments (STREAM@VERSION, paths,
KEY=VALUE metadata filters)."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Sequence
from decimal import Decimal
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
    return "  ".join(part for part in (  # the name "" is a name: it shows as ''
        f"{head:<6}", format_time(cp.created_at)[:19].replace("T", " "), "auto  " if cp.auto else "manual",
        repr(cp.name) if cp.name is not None else "", usage, meta) if part)


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


# -- sql results ----------------------------------------------------------------------------------------

_NON_FINITE = {"inf": "Infinity", "-inf": "-Infinity", "nan": "NaN"}


def sql_columns(columns: Sequence[str]) -> list[str]:
    """The keys of `sql --json`'s objects: a name that repeats an earlier one (a self-join's a.version,
    b.version) is suffixed :2, :3, ... (the first free one), so no column is lost."""
    taken = set(columns)
    out: list[str] = []
    seen: set[str] = set()
    for name in columns:
        key, n = name, 1
        while key in seen or (key != name and key in taken):  # a column named a:2 keeps its name
            n += 1
            key = f"{name}:{n}"
        seen.add(key)
        out.append(key)
    return out


def sql_text(value: Any) -> Any:
    """A result cell for the text table: bytes as hex, non-finite numbers as JSON's spelling of them in
    --json (Infinity, -Infinity, NaN), everything else as str() shows it."""
    if isinstance(value, (bytes, memoryview)):
        return bytes(value).hex()
    if type(value) is float and not math.isfinite(value):
        return _NON_FINITE[repr(value)]
    if type(value) is Decimal and not value.is_finite():
        return _NON_FINITE[repr(float(value))]
    return value


def sql_json(value: Any) -> Any:
    """A result cell as exact JSON (PostgreSQL's types included): bytes as hex; a number that JSON cannot
    hold (infinities, NaN) as the string "Infinity", "-Infinity" or "NaN"; a Decimal (numeric) that is
    whole as an integer, else as a JSON number with every digit; an integer past 64 bits with every digit;
    a timedelta (interval) as an ISO 8601 duration ("P1DT2H3M4.5S", "-PT1S"); arrays and json item by item."""
    t = type(value)
    if t is float:
        return value if math.isfinite(value) else _NON_FINITE[repr(value)]
    if t is int:
        return value if -(2**63) <= value < 2**64 else orjson.Fragment(str(value))
    if t is Decimal:
        if not value.is_finite():
            return _NON_FINITE[repr(float(value))]
        if value == value.to_integral_value():
            return sql_json(int(value))
        return orjson.Fragment(str(value))  # Decimal's str is a JSON number: 1.50, 1E-7, -0.0012
    if t is dt.timedelta:
        return iso_duration(value)
    if t is bytes or t is memoryview:
        return bytes(value).hex()
    if t is list or t is tuple:
        return [sql_json(x) for x in value]
    if t is dict:
        return {k: sql_json(x) for k, x in value.items()}
    return value


def iso_duration(delta: dt.timedelta) -> str:
    """A timedelta as an ISO 8601 duration: days, hours, minutes and seconds (with microseconds)."""
    micros = delta // dt.timedelta(microseconds=1)
    sign, micros = ("-" if micros < 0 else ""), abs(micros)
    seconds, micro = divmod(micros, 1_000_000)
    days, seconds = divmod(seconds, 86_400)
    hours, seconds = divmod(seconds, 3600)
    minutes, seconds = divmod(seconds, 60)
    time = "".join(f"{n}{unit}" for n, unit in ((hours, "H"), (minutes, "M")) if n)
    if seconds or micro or not (days or time):
        time += f"{seconds}.{micro:06d}".rstrip("0").rstrip(".") + "S"
    return f"{sign}P{f'{days}D' if days else ''}{'T' + time if time else ''}"
