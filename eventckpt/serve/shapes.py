"""What the pages draw, as plain data (the JSON twins carry it as is): a state as a tree of nodes with
gaps where long lists were not read, the fork graph of a stream tree as lanes, and small plots. Only
geometry is computed here; the templates turn it into SVG and HTML (escaping every string)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import orjson

from ..errors import PathError
from ..paths import Path, to_text

INLINE_ITEMS = 60  # a list up to this long is shown whole
HEAD_ITEMS, TAIL_ITEMS = 5, 25  # a longer one: its first and last items, and a gap between
INLINE_KEYS = 200  # a dict with more keys: the first ones and a gap
NODE_BUDGET = 1500  # nodes one page renders; deeper ones become links to their own page


class Raw:
    """A value as the JSON text the store keeps (tagged forms for tuples, datetimes, ...): the JSON
    twins embed it as JSON, the templates show the text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def short(self, width: int = 160) -> str:
        return self.text if len(self.text) <= width else self.text[: width - 1] + "…"


def raw(encode: Callable[[Any], bytes], value: Any) -> Raw:
    return Raw(encode(value).decode())


def default(value: Any) -> Any:
    """orjson's `default` for page data."""
    if isinstance(value, Raw):
        return orjson.Fragment(value.text.encode())
    raise TypeError(f"{type(value).__name__} is not page data")


def page_json(data: Any) -> bytes:
    """Page data as JSON. An int orjson cannot write (past 64 bits: a big int in metadata, a sum of
    token counters) is written exactly as JSON allows, in a second pass only the pages holding one pay."""
    try:
        return orjson.dumps(data, default=default)
    except TypeError:
        return orjson.dumps(_exact_ints(data), default=default)


def _exact_ints(value: Any) -> Any:
    if type(value) is int and not -(2**63) <= value < 2**64:
        return orjson.Fragment(str(value).encode())
    if isinstance(value, dict):
        return {k: _exact_ints(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_exact_ints(v) for v in value]
    return value


# -- a state as a tree ------------------------------------------------------------------------------


def path_text(path: Path | None) -> str | None:
    """The JSON path of a node when it can be asked about (pinned, paged), else None."""
    if path is None:
        return None
    try:
        return to_text(path) if path else "$"
    except PathError:
        return None


def kind_of(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"


def is_tagged(value: Any) -> bool:
    """A stored object that is the tagged form of something else (a set, a tuple, a dict whose keys are
    not strings or not paths, a datetime, ...): its keys are no part of the value's paths."""
    return isinstance(value, dict) and any(type(k) is str and k.startswith("$") for k in value)


class Where(NamedTuple):
    """Where a node is: the nearest path the store answers for (keys and indices of the state itself),
    and below it the keys of the stored form down to the node (into a tagged value, or past a key that
    is no path), so that every stored item has a page even where it has no path."""

    path: Path
    inner: tuple[Any, ...] = ()

    def child(self, key: Any, tagged: bool = False) -> Where:
        if not self.inner and not tagged and path_text(self.path + (key,)) is not None:
            return Where(self.path + (key,))
        return Where(self.path, self.inner + (key,))

    @property
    def text(self) -> str | None:
        """The JSON path of the node when it has one (it can be pinned, its history asked)."""
        return None if self.inner else path_text(self.path)


class TreeBuilder:
    """Nodes of plain JSON (a decoded state's stored form) within a page's node budget."""

    def __init__(self, link: Callable[[Where, int], str] | None) -> None:
        self.link = link  # (where a node is, start) -> the URL of its own page from item `start` on
        self.budget = NODE_BUDGET

    def node(self, key: Any, where: Where, value: Any) -> dict[str, Any]:
        self.budget -= 1
        kind = kind_of(value)
        out: dict[str, Any] = {"key": key, "path": where.text, "kind": kind}
        if kind not in ("object", "array"):
            out["value"] = Raw(orjson.dumps(value).decode())
            return out
        out["size"] = len(value)
        if kind == "object":
            keys = list(value)[:INLINE_KEYS]
            out["children"] = self.children([(k, value[k]) for k in keys], where, tagged=is_tagged(value))
            if len(value) > len(keys):
                out["children"].append(self.gap(where, len(keys), len(value)))
        elif len(value) <= INLINE_ITEMS:
            out["children"] = self.children(list(enumerate(value)), where)
        else:
            out["children"] = self.items(where, len(value), list(enumerate(value[:HEAD_ITEMS])),
                                         list(enumerate(value[-TAIL_ITEMS:], len(value) - TAIL_ITEMS)))
        return out

    def children(self, pairs: Sequence[tuple[Any, Any]], parent: Where, first: int = 0, *,
                 tagged: bool = False) -> list[dict[str, Any]]:
        """Nodes of the items (or keys) at positions first.. of the parent: a page may show a window of a
        long value, and a gap must name the parent's own positions for its link to show what it hides."""
        out = []
        for i, (key, value) in enumerate(pairs):
            if self.budget <= 0:  # the rest on the parent's own page
                out.append(self.gap(parent, first + i, first + len(pairs)))
                break
            out.append(self.node(key, parent.child(key, tagged), value))
        return out

    def items(self, where: Where, size: int, head: list[tuple[int, Any]], tail: list[tuple[int, Any]]) -> list[dict[str, Any]]:
        """A long list's first and last items with a gap between (what was read of it)."""
        out = self.children(head, where)
        missing, stop = (head[-1][0] + 1 if head else 0), (tail[0][0] if tail else size)
        if missing < stop:
            out.append(self.gap(where, missing, stop))
        return out + self.children(tail, where, stop)

    def gap(self, where: Where, start: int, stop: int) -> dict[str, Any]:
        """Items (or keys) start..stop not shown here, with a link to the page that shows them."""
        href = self.link(where, start) if self.link is not None else None
        return {"kind": "gap", "start": start, "stop": stop, "href": href}


# -- the fork graph of a stream tree ------------------------------------------------------------------

LEFT, STEP, TOP, ROW = 190, 64, 34, 34


def fork_graph(streams: Sequence[Any], current: str | None = None) -> dict[str, Any]:
    """Lanes of a stream tree (StreamSummary rows, root first): one lane per stream from its fork point to
    its head, a curve from the parent's lane at the fork point, and the versions as points. Versions are
    spaced by rank, as a git graph spaces commits, so a fork at v3 of a 100k-version stream stays legible."""
    names = {s.task_id for s in streams}
    children: dict[str | None, list[Any]] = {}
    for s in streams:
        parent = s.parent.task_id if s.parent is not None and s.parent.task_id in names else None
        children.setdefault(parent, []).append(s)
    ordered: list[Any] = []

    def visit(parent: str | None) -> None:
        for s in children.get(parent, []):
            ordered.append(s)
            visit(s.task_id)

    visit(None)
    starts = {s.task_id: (s.parent.version if s.parent is not None else min(1, s.head)) for s in ordered}
    points = sorted({v for s in ordered for v in (starts[s.task_id], s.head)})
    column = {v: i for i, v in enumerate(points)}
    step = max(STEP, min(140, 640 // max(len(points) - 1, 1)))  # few points: spread them out
    lane = {s.task_id: i for i, s in enumerate(ordered)}

    def x(v: int) -> int:
        return LEFT + column[v] * step

    def y(name: str) -> int:
        return TOP + lane[name] * ROW

    lanes = []
    for s in ordered:
        start, yy = starts[s.task_id], y(s.task_id)
        item: dict[str, Any] = {
            "stream": s.task_id, "index": lane[s.task_id] % 8, "current": s.task_id == current, "y": yy,
            "x1": x(start), "x2": x(s.head), "head": s.head, "label_x": LEFT - 14,
            "fork": None,
        }
        if s.parent is not None and s.parent.task_id in lane:
            py, fx = y(s.parent.task_id), x(start)
            parent_head = next((p.head for p in ordered if p.task_id == s.parent.task_id), None)
            item["fork"] = {"stream": s.parent.task_id, "version": start, "x": fx, "y": py,
                            "label": start != parent_head,  # the parent's head label already says it
                            "curve": f"M {fx} {py} C {fx} {yy}, {fx} {yy}, {min(fx + step // 2, x(s.head))} {yy}"
                            if s.head > start else f"M {fx} {py} L {fx} {yy}"}
        lanes.append(item)
    width = LEFT + max(len(points) - 1, 0) * step + 48
    return {"width": width, "height": TOP + len(ordered) * ROW, "lanes": lanes}


# -- plots ------------------------------------------------------------------------------------------------

PLOT_W, PLOT_H, PAD = 600, 150, 44


def plots(versions: Sequence[int], usage: Sequence[dict[str, Any]], sizes: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """Token usage (cumulative counters, one line each) and event bytes (a bar each) per version, oldest
    first, spaced evenly over the versions shown."""
    n = max(len(versions), 1)
    step = (PLOT_W - PAD - 10) / n
    counters = sorted({k for u in usage for k, v in u.items() if isinstance(v, (int, float)) and not isinstance(v, bool)},
                      key=lambda k: (not k.endswith("tokens"), k))[:4]
    top = max([u.get(k, 0) for u in usage for k in counters] or [0]) or 1
    lines = []
    for i, counter in enumerate(counters):
        pts = [(round(PAD + (j + 0.5) * step, 1), round(PLOT_H - 22 - (u.get(counter, 0) / top) * (PLOT_H - 40), 1))
               for j, u in enumerate(usage)]
        lines.append({"counter": counter, "index": i, "points": " ".join(f"{a},{b}" for a, b in pts),
                      "last": usage[-1].get(counter, 0) if usage else 0})
    biggest = max([b for _, b in sizes] or [0]) or 1
    bars = []
    for j, (version, (count, nbytes)) in enumerate(zip(versions, sizes)):
        h = max(round(nbytes / biggest * (PLOT_H - 40), 1), 1.0)
        bars.append({"version": version, "x": round(PAD + j * step + step * 0.1, 1), "w": max(round(step * 0.8, 1), 1.0),
                     "y": round(PLOT_H - 22 - h, 1), "h": h, "bytes": nbytes, "events": count})
    return {"width": PLOT_W, "height": PLOT_H, "pad": PAD, "first": versions[0] if versions else None,
            "last": versions[-1] if versions else None, "lines": lines, "top_tokens": top if counters else 0,
            "bars": bars, "top_bytes": biggest if sizes else 0}
