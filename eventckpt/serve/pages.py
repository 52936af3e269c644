"""The viewer's pages: each builds the data of one page from the store's public API (the page's JSON twin
is that data; its template draws it). Lists are paged and every query is indexed, so a page costs what
it shows, however long the history is."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple
from urllib.parse import quote, unquote, urlencode

import orjson

from ..checkpoint import Checkpoint, format_time
from ..checks import whole_number
from ..diffing import Change
from ..cli_output import parse_meta, parse_path, parse_ref
from ..errors import PathError, StreamNotFoundError
from ..paths import Path, to_text
from . import shapes

if TYPE_CHECKING:
    from ..overview import StreamSummary
    from ..store import Store
    from ..stream import CheckpointStore

STREAMS_PAGE, VERSIONS_PAGE, ITEMS_PAGE, HISTORY_PAGE, CHANGES_PAGE, EVENTS_SHOWN = 50, 100, 100, 50, 200, 200
TREE_LANES = 40  # streams drawn per tree
PINNED_HISTORY = 15


class Page(NamedTuple):
    template: str
    title: str
    data: dict[str, Any]


class BadRequest(Exception):
    """A query parameter that cannot be read (answered 400)."""


Query = Mapping[str, Sequence[str]]


# -- links ------------------------------------------------------------------------------------------


def _href(base: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return base + ("?" + query if query else "")


def stream_url(name: str, **params: Any) -> str:
    return _href("/s/" + _segment(name), **params)


def version_url(name: str, version: int, **params: Any) -> str:
    return _href(f"/s/{_segment(name)}/v/{version}", **params)


def node_url(name: str, version: int, path: str, start: int = 0, inner: Sequence[Any] = ()) -> str:
    return _href(f"/s/{_segment(name)}/v/{version}/state", path=path,
                 inner=orjson.dumps(list(inner)).decode() if inner else None, start=start or None)


def _where_url(name: str, version: int) -> Any:
    """A TreeBuilder's link: the page of a node (its path, and the keys of the stored form below it)."""
    return lambda where, start: node_url(name, version, shapes.path_text(where.path) or "$", start, where.inner)


def history_url(name: str, path: str, **params: Any) -> str:
    return _href(f"/s/{_segment(name)}/history", path=path, **params)


def diff_url(a: str, b: str, **params: Any) -> str:
    return _href("/diff", a=a, b=b, **params)


DOTS_MARK = "!"  # before a name of only dots; quote() always escapes a "!" of a name, so it marks nothing else


def _segment(name: str) -> str:
    """A stream name as one path segment: '/' and '.' escaped too, so no name can end in the '.json' of a
    JSON twin's route, or walk to another route. The names '.' and '..' escaped are still dot segments to
    a browser (the URL standard reads %2E as '.' there) and would be resolved away: they are marked."""
    segment = quote(name, safe="").replace(".", "%2E")
    return DOTS_MARK + segment if name in (".", "..") else segment


def segment_text(segment: str) -> str:
    """The text a path segment of a request stands for (what _segment wrote, decoded exactly)."""
    if segment.startswith(DOTS_MARK) and unquote(segment[1:]) in (".", ".."):
        return unquote(segment[1:])
    return unquote(segment)


def json_url(url: str) -> str:
    base, sep, query = url.partition("?")
    return (base.rstrip("/") or "/streams") + ".json" + sep + query


# -- parameters -------------------------------------------------------------------------------------


def _one(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _int(query: Query, name: str, default: int | None, lo: int, hi: int) -> int | None:
    text = _one(query, name)
    if text is None or text == "":
        return default
    if not whole_number(text) or not lo <= int(text) <= hi:
        raise BadRequest(f"{name} must be a whole number from {lo} to {hi}, not {text!r}")
    return int(text)


def _path(query: Query, name: str, required: bool = True) -> Path | None:
    text = _one(query, name)
    if not text or text == "$":
        if required:
            raise BadRequest(f"{name} must name a path, e.g. scratch.best_fare or $.messages[3].content")
        return None
    return parse_path(text)


def _inner(query: Query) -> tuple[Any, ...]:
    """The `inner` parameter: keys (strings) and indices (whole numbers) as a JSON list."""
    text = _one(query, "inner")
    if not text:
        return ()
    try:
        keys = orjson.loads(text)
    except orjson.JSONDecodeError:
        keys = None
    if not isinstance(keys, list) or not all(type(k) is str or (type(k) is int and k >= 0) for k in keys):
        raise BadRequest(f"inner must be a JSON list of keys and indices, e.g. [\"$set\", 3], not {text!r}")
    return tuple(keys)


def _ref(store: Store, text: str) -> tuple[str, int | None]:
    """STREAM[@VERSION] as given: a stream name may start or end with spaces (the viewer's own links carry
    them). Only a ref that names no stream that way is read again without the spaces around it (typed)."""
    if text == text.strip():
        return parse_ref(store, text)
    try:
        name, number = parse_ref(store, text)
        if store.stream(name).exists():
            return name, number
    except StreamNotFoundError:
        pass
    return parse_ref(store, text.strip())


# -- shared pieces ------------------------------------------------------------------------------------


def total_tokens(usage: Mapping[str, Any]) -> int | float | None:
    """total_tokens when the counters have it, else the sum of the *tokens counters (None: none)."""
    if isinstance(usage.get("total_tokens"), (int, float)):
        return usage["total_tokens"]
    counted = [v for k, v in usage.items() if k.endswith("tokens") and isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(counted) if counted else None


def _summary(s: StreamSummary) -> dict[str, Any]:
    return {"stream": s.task_id, "head": s.head, "href": stream_url(s.task_id),
            "head_href": version_url(s.task_id, s.head) if s.head else None,
            "fork_of": {"stream": s.parent.task_id, "version": s.parent.version,
                        "href": version_url(s.parent.task_id, s.parent.version) if s.parent.version else None}
            if s.parent else None,
            "tree": s.tree, "created_at": format_time(s.created_at),
            "updated_at": format_time(s.updated_at) if s.updated_at else None,
            "usage": s.token_usage, "total_tokens": total_tokens(s.token_usage)}


def _graph(store: Store, name: str, current: str | None = None) -> dict[str, Any]:
    members = store.tree(name, limit=TREE_LANES)
    graph = shapes.fork_graph(members, current)
    for lane in graph["lanes"]:
        lane["href"] = stream_url(lane["stream"])
        lane["head_href"] = version_url(lane["stream"], lane["head"]) if lane["head"] else None
        if lane["fork"] is not None and lane["fork"]["version"]:
            lane["fork"]["href"] = version_url(lane["fork"]["stream"], lane["fork"]["version"])
    graph["root"] = members[0].tree if members else name
    graph["truncated"] = len(members) >= TREE_LANES
    return graph


def _checkpoint(store: Store, cp: Checkpoint) -> dict[str, Any]:
    return {"stream": cp.task_id, "version": cp.version, "name": cp.name, "auto": cp.auto,
            "created_at": format_time(cp.created_at), "metadata": shapes.raw(store.codec.encode, cp.metadata),
            "usage": cp.token_usage, "total_tokens": total_tokens(cp.token_usage), "checkpoint_id": cp.checkpoint_id,
            "href": version_url(cp.task_id, cp.version)}


def _stream(store: Store, name: str) -> CheckpointStore:
    task = store.stream(name)
    if not task.exists():
        raise StreamNotFoundError(name)
    return task


def _change(store: Store, change: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": change.kind, "path": to_text(change.path) if change.path else "$"}
    if change.kind != "added":
        out["old"] = shapes.raw(store.codec.encode, change.old)
    if change.kind != "removed":
        out["new"] = shapes.raw(store.codec.encode, change.new)
    return out


# -- pages ------------------------------------------------------------------------------------------------


def streams(store: Store, query: Query) -> Page:
    """Every stream, newest first, a page at a time, and the fork graph of each tree among them."""
    n = _int(query, "n", STREAMS_PAGE, 1, 1000)
    before = _one(query, "before")
    rows = store.summaries(n + 1, before=before or None)
    listed = [_summary(s) for s in rows[:n]]
    trees = list(dict.fromkeys(s.tree for s in rows[:n]))
    data = {"streams": listed, "trees": [_graph(store, root) for root in trees],
            "older": _href("/streams", before=rows[n - 1].task_id, n=n if n != STREAMS_PAGE else None)
            if len(rows) > n else None}
    return Page("streams.html", "Streams", data)


def timeline(store: Store, name: str, query: Query) -> Page:
    """A stream's versions newest first, a page at a time (before or after a version), with plots of token
    usage and event bytes."""
    task = _stream(store, name)
    n = _int(query, "n", VERSIONS_PAGE, 1, 1000)
    before = _int(query, "before", None, 1, 2**62)
    after = _int(query, "after", None, 0, 2**62)
    if before is not None and after is not None:
        raise BadRequest("a timeline page is the versions before one version or after one, not both")
    head = task.version
    if after is not None:  # the n versions just after it (retention may have left holes in the numbers)
        above = task.sizes(after + 1, limit=n)
        before = above[-1].version + 1 if above else after + 1
    found = task.log(n + 1, before=before)
    page = found[:n]
    sizes = {s.version: s for s in task.sizes(page[-1].version, page[0].version)} if page else {}
    rows = []
    for cp in page:
        row = _checkpoint(store, cp)
        size = sizes.get(cp.version)
        row["events"], row["bytes"] = (size.events, size.bytes) if size else (0, 0)
        rows.append(row)
    oldest_first = list(reversed(rows))
    origin = task.parent
    keep = n if n != VERSIONS_PAGE else None
    data = {
        "stream": name, "head": head, "head_href": version_url(name, head) if head else None,
        "fork_of": {"stream": origin.task_id, "version": origin.version, "href": version_url(origin.task_id, origin.version)}
        if origin and origin.version else None,
        "versions": rows,
        "plots": shapes.plots([r["version"] for r in oldest_first], [r["usage"] for r in oldest_first],
                              [(r["events"], r["bytes"]) for r in oldest_first]),
        "graph": _graph(store, name, current=name),
        "newer": stream_url(name, after=page[0].version, n=keep) if page and page[0].version < head else None,
        "older": stream_url(name, before=page[-1].version, n=keep) if len(found) > n else None,
        "diff_action": "/diff",
    }
    for row in rows:
        row["ref"] = f"{name}@{row['version']}"
    for lane in data["plots"]["bars"]:
        lane["href"] = version_url(name, lane["version"])
    return Page("timeline.html", name, data)


def state_tree(store: Store, task: CheckpointStore, version: int) -> dict[str, Any]:
    """The state at a version as nodes; a long top-level list shows its first and last items, read
    without restoring the rest (CheckpointStore.value with start/stop)."""
    builder = shapes.TreeBuilder(_where_url(task.task_id, version))
    encode = store.codec.encode
    children = []
    for key in task.keys(version):
        where = shapes.Where(()).child(key)
        length = task.length((key,), version)
        if length is not None and length > shapes.INLINE_ITEMS:
            head = task.value((key,), version, start=0, stop=shapes.HEAD_ITEMS)
            tail = task.value((key,), version, start=-shapes.TAIL_ITEMS)
            node = {"key": key, "path": where.text, "kind": "array", "size": length,
                    "children": builder.items(where, length, list(enumerate(_plain(encode, head))),
                                              list(enumerate(_plain(encode, tail), length - shapes.TAIL_ITEMS)))}
        else:
            node = builder.node(key, where, _plain(encode, task.value((key,), version)))
        children.append(node)
    return {"key": None, "path": "$", "kind": "object", "size": len(children), "children": children}


def _plain(encode: Any, value: Any) -> Any:
    """A decoded value as the plain JSON the store keeps (tagged forms for tuples, datetimes, ...)."""
    return orjson.loads(encode(value))


def version(store: Store, name: str, number: int, query: Query, store_label: str) -> Page:
    """One version: its checkpoint, state tree, events, the diff from the previous version, neighbours for
    keyboard navigation, commands to fork or roll back there, and a pinned path's value and history."""
    task = _stream(store, name)
    cp = task.get(number)
    before = task.log(1, before=number)
    after = task.sizes(number + 1, limit=1)
    prev_version = before[0].version if before else None
    next_version = after[0].version if after else None
    own = task.sizes(number, number)
    first_event = _int(query, "events_start", 0, 0, 2**62) or 0
    # The events of a version come in order from the first: a page of them past the first decodes those before it too.
    events = task.events(number, limit=first_event + EVENTS_SHOWN)[first_event:]
    encode = store.codec.encode
    if prev_version is not None:
        changes: Any = task.diff(prev_version, number)
    else:  # the first version: everything in it is new (version 0 names no checkpoint to diff with)
        changes = [Change("added", (key,), new=value) for key, value in task.state(number).items()]
    pin = _path(query, "pin", required=False)
    pin_text = to_text(pin) if pin else None

    def link(v: int | None) -> str | None:
        return version_url(name, v, pin=pin_text) if v is not None else None

    def events_link(start: int) -> str:
        return version_url(name, number, pin=pin_text, events_start=start or None)

    data: dict[str, Any] = {
        "stream": name, "version": number, "head": task.version, "checkpoint": _checkpoint(store, cp),
        "events_total": own[0].events if own else 0, "bytes": own[0].bytes if own else 0,
        "prev": link(prev_version), "next": link(next_version), "prev_version": prev_version, "next_version": next_version,
        "state": state_tree(store, task, number),
        "events_start": first_event,
        "events_previous": events_link(max(first_event - EVENTS_SHOWN, 0)) if first_event else None,
        "events_next": events_link(first_event + len(events)) if own and first_event + len(events) < own[0].events else None,
        "events": [{"seq": e.seq, "op": e.op, "path": to_text(e.path), "stored_in": e.task_id,
                    "value": shapes.raw(encode, e.value) if e.op != "delete" else None} for e in events],
        "diff": {"from": prev_version or 0, "changes": [_change(store, c) for c in list(changes)[:CHANGES_PAGE]],
                 "total": len(changes),
                 "href": diff_url(f"{name}@{prev_version}", f"{name}@{number}") if prev_version is not None else None},
        "commands": {
            # Options first, then "--": a store or stream name starting with "-" is still an argument.
            "fork": shlex.join(["eventckpt", "fork", f"--name={name}-v{number}", "--", store_label, f"{name}@{number}"]),
            "rollback": shlex.join(["eventckpt", "rollback", "--", store_label, name, str(number)]),
        },
        "pin": _pinned(store, task, number, pin) if pin else None,
        "compare_href": diff_url(f"{name}@{number}", f"{name}@{task.version}"),
    }
    return Page("version.html", f"{name}@{number}", data)


def _pinned(store: Store, task: CheckpointStore, number: int, path: Path) -> dict[str, Any]:
    text = to_text(path)
    try:
        value: Any = shapes.raw(store.codec.encode, task.value(path, number))
    except PathError:
        value = None  # absent at this version
    entries = task.history(path, until=number, limit=PINNED_HISTORY)
    return {"path": text, "value": value, "history": [_entry(store, task.task_id, e, text) for e in entries],
            "history_href": history_url(task.task_id, text, until=number), "unpin": version_url(task.task_id, number)}


def _entry(store: Store, name: str, e: Any, pin: str) -> dict[str, Any]:
    return {"version": e.version, "seq": e.seq, "op": e.op, "path": to_text(e.path), "stored_in": e.task_id,
            "value": shapes.raw(store.codec.encode, e.value) if e.op != "delete" else None,
            "created_at": format_time(e.created_at), "href": version_url(name, e.version, pin=pin)}


def node(store: Store, name: str, number: int, query: Query) -> Page:
    """One node of the state at a version, its items (or keys) a page at a time. `inner` (a JSON list of
    keys and indices) goes on into the stored form of the value at `path`: into a tagged value (a set, a
    tuple, a dict with int keys, ...) or past a key that is no path, which have no path of their own."""
    task = _stream(store, name)
    task.get(number)
    path = _path(query, "path", required=False)
    inner = _inner(query)
    start = _int(query, "start", 0, 0, 2**62) or 0
    if path is None and not inner:
        tree = state_tree(store, task, number)
        return Page("node.html", f"{name}@{number} $", {"stream": name, "version": number, "path": "$", "inner": None,
                                                        "node": tree, "previous_page": None, "next_page": None,
                                                        "version_href": version_url(name, number),
                                                        "history_href": None})
    where = shapes.Where(path or (), inner)
    text = shapes.path_text(where.path) or "$"
    builder = shapes.TreeBuilder(_where_url(name, number))
    encode = store.codec.encode
    key = inner[-1] if inner else path[-1] if path else None
    length = task.length(path, number) if path and not inner else None
    read_window = length is not None  # a list the store reads a window of, without the rest
    if read_window:
        value: Any = _plain(encode, task.value(path, number, start=start, stop=start + ITEMS_PAGE)) if start < length else []
    else:
        value = _plain(encode, task.value(path, number) if path else task.state(number))
        for depth, step in enumerate(inner):
            if isinstance(value, list) and type(step) is int and step < len(value) or isinstance(value, dict) and step in value:
                value = value[step]
            else:
                raise BadRequest(f"{text} holds nothing at inner {orjson.dumps(inner[:depth + 1]).decode()}")
        length = len(value) if isinstance(value, (list, dict)) else None
    if length is None or (length <= ITEMS_PAGE and start == 0):
        tree, more = builder.node(key, where, value), (None, None)
    else:  # a window of a long list or dict (or of a shorter one, from a gap where a page's budget ran out)
        stop = max(min(start + ITEMS_PAGE, length), start)
        if isinstance(value, dict):
            pairs = [(k, value[k]) for k in list(value)[start:stop]]
        else:
            pairs = list(enumerate(value if read_window else value[start:stop], start))
        tree = {"key": key, "path": where.text, "kind": shapes.kind_of(value), "size": length, "window": [start, stop],
                "children": builder.children(pairs, where, start, tagged=shapes.is_tagged(value))}
        more = (node_url(name, number, text, max(start - ITEMS_PAGE, 0), inner) if start > 0 else None,
                node_url(name, number, text, stop, inner) if stop < length else None)
    data = {"stream": name, "version": number, "path": text, "inner": orjson.dumps(inner).decode() if inner else None,
            "node": tree, "previous_page": more[0], "next_page": more[1],
            "version_href": version_url(name, number, pin=text if path else None),
            "history_href": history_url(name, text, until=number) if path else None}
    title = f"{name}@{number} {text}" + (f" {data['inner']}" if inner else "")
    return Page("node.html", title, data)


def history(store: Store, name: str, query: Query) -> Page:
    """Every change of one path, newest first, a page at a time (pages end at whole versions)."""
    task = _stream(store, name)
    path = _path(query, "path")
    text = to_text(path)
    n = _int(query, "n", HISTORY_PAGE, 1, 1000)
    until = _int(query, "until", None, 0, 2**62)
    entries = task.history(path, until=until, limit=n)
    older = None
    if len(entries) == n and entries:
        low = entries[-1].version  # the page may hold only part of its oldest version: take all of it
        entries = [e for e in entries if e.version != low] + task.history(path, since=low, until=low)
        older = history_url(name, text, until=low - 1, n=n if n != HISTORY_PAGE else None) if low > 1 else None
    data = {"stream": name, "path": text, "until": until, "entries": [_entry(store, name, e, text) for e in entries],
            "older": older, "newest": history_url(name, text) if until is not None else None}
    return Page("history.html", f"{name} {text}", data)


def diff(store: Store, query: Query) -> Page:
    """The changes between any two versions (of one stream, or across forks), a page at a time."""
    a, b = _one(query, "a"), _one(query, "b")
    data: dict[str, Any] = {"a": a or "", "b": b or "", "changes": None}
    if not a:
        return Page("diff.html", "Diff", data)
    start = _int(query, "start", 0, 0, 2**62) or 0
    name_a, va = _ref(store, a)
    task = _stream(store, name_a)
    name_b, vb = _ref(store, b) if b else (name_a, None)
    other = _stream(store, name_b)
    va = task.version if va is None else va
    vb = other.version if vb is None else vb
    result = task.diff(va, (name_b, vb))
    shown = list(result)[start:start + CHANGES_PAGE]
    data.update({
        "a": f"{name_a}@{va}", "b": f"{name_b}@{vb}", "a_href": version_url(name_a, va) if va else None,
        "b_href": version_url(name_b, vb) if vb else None, "total": len(result), "start": start,
        "changes": [_change(store, c) for c in shown],
        "counts": {kind: sum(1 for c in result if c.kind == kind) for kind in ("added", "removed", "changed")},
        "older": diff_url(f"{name_a}@{va}", f"{name_b}@{vb}", start=max(start - CHANGES_PAGE, 0) or None) if start else None,
        "newer": diff_url(f"{name_a}@{va}", f"{name_b}@{vb}", start=start + CHANGES_PAGE)
        if start + CHANGES_PAGE < len(result) else None,
    })
    return Page("diff.html", f"Diff {name_a}@{va} {name_b}@{vb}", data)


def search(store: Store, query: Query) -> Page:
    """Checkpoints of every stream by name and/or metadata, newest first."""
    name = _one(query, "name") or None
    meta_items = [m for m in query.get("meta", []) if m.strip()]
    n = _int(query, "n", 100, 1, 1000)
    data: dict[str, Any] = {"name": name or "", "meta": meta_items, "results": None}
    if name is None and not meta_items:
        return Page("search.html", "Search", data)
    found = store.search(name, parse_meta([m.strip() for m in meta_items]), limit=n + 1)
    data["results"] = [_checkpoint(store, cp) for cp in found[:n]]
    data["more"] = _href("/search", name=name, n=min(n * 2, 1000)) + "".join(
        "&" + urlencode({"meta": m}) for m in meta_items) if len(found) > n and n < 1000 else None
    return Page("search.html", "Search", data)
