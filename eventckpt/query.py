"""Log, history and search: questions about versions answered by SQL over indexed columns, newest first,
without decoding any state (see journal.log_rows / history_rows / search_rows)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from .checkpoint import Checkpoint, parse_time
from .codec import Codec
from .diffing import MISSING, descend, value_at
from .errors import InvalidArgumentError, VersionNotFoundError
from .errors import PathError
from .gcpause import quiet_gc
from .journal import HistoryRow, Journal, LogRow, MetaFilter, MetaTerm, Segment, StreamKey, StreamRow
from .ops import APPEND, DELETE, EXTEND, SET, TRUNCATE, apply, same
from .paths import Path, addressable, from_text, normalize, to_text

if TYPE_CHECKING:
    from .core import Core

_INT64 = range(-(2**63), 2**63)
# Stored times end in "Z", which fromisoformat accepts from Python 3.11 on (twice as fast as parse_time).
_parse_time = dt.datetime.fromisoformat if sys.version_info >= (3, 11) else parse_time


class HistoryEntry(NamedTuple):
    """One change of a path, as `history()` reports it.

    `path` is where the event was recorded: the path asked for, a path below it (an item appended to
    it, a key set inside it), or an ancestor that replaced or removed it. For an ancestor, `op` is "set"
    with the path's new value taken from inside the ancestor's, or "delete" when the ancestor's event
    left no value there; an ancestor's event that left the path as it was (equal, or still absent) is not
    reported. `task_id` names the stream that stores the event (an ancestor stream for the versions a
    fork shares).
    """

    task_id: str
    version: int
    seq: int
    op: str
    path: Path
    value: Any
    created_at: dt.datetime


def check_limit(name: str, value: Any, minimum: int) -> None:
    if value is not None and (type(value) is not int or value < minimum):
        raise InvalidArgumentError(name, value, f"must be None or an int >= {minimum}")


def meta_filters(codec: Codec, metadata: Any) -> list[MetaFilter]:
    """metadata={key: value, ...} as bound filters; every key and value is data, never SQL."""
    if metadata is None:
        return []
    if not isinstance(metadata, Mapping):
        raise InvalidArgumentError("metadata", metadata, "a metadata filter is a mapping of key to value")
    out = []
    for key, value in metadata.items():
        if type(key) is not str or key.startswith("$") or not addressable(key):
            raise InvalidArgumentError(
                "metadata", metadata, f"key {key!r}: filter keys are str without '$' first, quotes, backslashes or control characters"
            )
        indexed = (key, value) if type(value) is str or (type(value) is int and value in _INT64) else None
        encoded = codec.encode_text(value)
        out.append(MetaFilter(key, to_text((key,)), encoded, indexed, _shape_terms(key, encoded)))
    return out


def _reorderable(value: Any) -> bool:
    """Whether `value` (decoded JSON) holds an object of two keys or more: its stored text may list the
    keys in another order."""
    if type(value) is dict:
        return len(value) > 1 or any(_reorderable(v) for v in value.values())
    return type(value) is list and any(_reorderable(v) for v in value)


def _shape_terms(key: str, encoded: str) -> tuple[MetaTerm, ...]:
    """A filter value holding objects, taken apart into terms the SQL checks one by one (each object's
    size, each leaf's JSON text), so the stored key order does not matter; () when the text compare is
    exact already, or when a nested key cannot be addressed by a JSON path (then the text is compared)."""
    value = orjson.loads(encoded)
    if not _reorderable(value):
        return ()
    terms: list[MetaTerm] = []

    def walk(parts: tuple[str | int, ...], v: Any) -> None:
        if not _reorderable(v):  # leaves are compared as text, as a whole filter value is (1 and 1.0 differ)
            terms.append(MetaTerm(to_text(parts), parts, "value", json=orjson.dumps(v).decode()))
        elif type(v) is dict:
            terms.append(MetaTerm(to_text(parts), parts, "object", size=len(v)))
            for k, item in v.items():
                walk(parts + (k,), item)
        else:
            terms.append(MetaTerm(to_text(parts), parts, "array", size=len(v)))
            for i, item in enumerate(v):
                walk(parts + (i,), item)

    try:
        walk((key,), value)
    except PathError:
        return ()
    return tuple(terms)


def log(core: Core, task_id: str, limit: int | None = None, *, before: int | None = None, name: str | None = None,
        auto: bool | None = None, metadata: Mapping[str, Any] | None = None) -> list[Checkpoint]:
    """The stream's checkpoints, newest first; see CheckpointStore.log."""
    check_limit("limit", limit, 0)
    check_limit("before", before, 1)
    if name is not None and type(name) is not str:
        raise InvalidArgumentError("name", name, "must be None or a str")
    if auto is not None and type(auto) is not bool:
        raise InvalidArgumentError("auto", auto, "must be None or a bool")
    meta = meta_filters(core.codec, metadata)
    with core.session() as journal, journal.read():
        row, head = core.existing(journal, task_id)
        if limit == 0:
            return []
        rows = journal.log_rows(core.segments(journal, row, head), before=before, limit=limit, name=name,
                                auto=auto, meta=meta)
        return checkpoints(core, journal, task_id, row, rows)


def search(core: Core, name: str | None = None, metadata: Mapping[str, Any] | None = None,
           limit: int | None = None) -> list[Checkpoint]:
    """Checkpoints of every stream by name and/or metadata, newest first; see Store.search."""
    if name is not None and type(name) is not str:
        raise InvalidArgumentError("name", name, "must be None or a str")
    check_limit("limit", limit, 0)
    meta = meta_filters(core.codec, metadata)
    with core.session() as journal, journal.read():
        rows = journal.search_rows(name=name, meta=meta, limit=limit)
        owners = {}
        for r in rows:
            if r.stream_id not in owners:
                chain = journal.lineage(StreamKey(r.tree_id, r.stream_id))
                core.remember_lineage(chain)
                owners[r.stream_id] = chain[-1]
        return [checkpoints(core, journal, owners[r.stream_id].name, owners[r.stream_id], [r])[0] for r in rows]


def checkpoints(core: Core, journal: Journal, task_id: str, row: StreamRow, rows: list[LogRow]) -> list[Checkpoint]:
    """Checkpoints of stream `task_id` (whose row is `row`) for version rows, values loaded on first
    access; usage and metadata are decoded in one parser call each."""
    usages = orjson.loads("[" + ",".join(r.usage or "{}" for r in rows) + "]")
    metas = core.codec.decode_many([r.metadata or "{}" for r in rows])
    parent = core.origin(journal, row)
    with quiet_gc():  # thousands of small acyclic objects: no reason to let the collector rescan the heap
        return [Checkpoint.trusted(task_id, r.version, usage, meta, r.created_at, r.name, bool(r.auto), parent,
                                   r.checkpoint_id, core.loader(row, r.version))
                for r, usage, meta in zip(rows, usages, metas)]


def history(core: Core, task_id: str, path: Any, *, since: int | None = None, until: int | None = None,
            limit: int | None = None) -> list[HistoryEntry]:
    """Every change of one path, newest first; see CheckpointStore.history."""
    parts = normalize(path)
    check_limit("since", since, 0)
    check_limit("until", until, 0)
    check_limit("limit", limit, 0)
    # (ancestor path, this path relative to it, whether the ancestor is a list)
    ancestors = [(to_text(parts[:i]), to_text(parts[i:]), type(parts[i]) is int) for i in range(1, len(parts))]
    codec = core.codec
    with core.session() as journal, journal.read():
        row, head = core.existing(journal, task_id)
        if limit == 0:
            return []
        until = head if until is None else min(until, head)
        chain = core.lineage(journal, row)
        segments = core.segments(journal, row, until)
        rows, replaced = _path_rows(journal, codec, segments, parts, ancestors, since or 0, until, limit)
        names = {r.id: r.name for r in chain}
        created = _list_changes(journal, codec, segments, parts, since or 0, until)
        for row, change in created:
            replaced[len(rows)] = change
            rows.append(row)
        if created or limit is not None and len(rows) > limit:  # merge, newest first
            order = sorted(range(len(rows)), key=lambda i: (rows[i].version, rows[i].seq), reverse=True)[:limit]
            rows, replaced = [rows[i] for i in order], {n: replaced[i] for n, i in enumerate(order) if i in replaced}
    values = codec.decode_many([r.value if r.value is not None and i not in replaced else "null" for i, r in enumerate(rows)])
    with quiet_gc():
        out = [HistoryEntry(names[r.stream_id], r.version, r.seq, r.op, from_text(r.path), None if r.op == DELETE else value,
                            _parse_time(r.created_at))
               for r, value in zip(rows, values)]
    if replaced:  # rare: rewrite the ancestors' entries with what they did to the path
        out = [e if i not in replaced else e._replace(op=replaced[i][0], value=replaced[i][1]) for i, e in enumerate(out)]
    return out


def _path_rows(journal: Journal, codec: Codec, segments: list[Segment], parts: Path,
               ancestors: list[tuple[str, str, bool]], since: int, until: int, limit: int | None
               ) -> tuple[list[HistoryRow], dict[int, tuple[str, Any]]]:
    """The newest `limit` events at the path, below it and at its ancestors that changed it, newest first,
    with what each ancestor's event did to the path (by row index).

    An ancestor's event that left the path as it was is dropped only after SQL applied the limit, so when
    drops leave fewer than `limit` rows and SQL had more, the rows are read again with twice the limit:
    the cost grows with the dropped rows, which have to be read to be told apart."""
    fetch, seen = limit, {}  # seen: (stream id, version, seq) -> what that ancestor's event did
    while True:
        rows = journal.history_rows(segments, to_text(parts), ancestors, since, until, fetch)
        kept: list[HistoryRow] = []
        changes: dict[int, tuple[str, Any]] = {}
        for r in rows:
            where = from_text(r.path)
            if len(where) < len(parts):
                key = (r.stream_id, r.version, r.seq)
                if key not in seen:
                    seen[key] = _ancestor_change(journal, codec, segments, parts, where, r)
                if seen[key] is None:
                    continue
                changes[len(kept)] = seen[key]
            kept.append(r)
        if limit is None or fetch is None or len(rows) < fetch or len(kept) >= limit:
            return kept, changes
        fetch *= 2


def _list_changes(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, since: int,
                  until: int) -> list[tuple[HistoryRow, tuple[str, Any]]]:
    """What the lists on the way did to the path in versions since..until, which history_rows does not
    read: the appends and extends that created an item on it, as (op, the path's value in the new item),
    and the sets of such a list to something else than a list that removed it, as (delete, None), each
    compared with the path's value right before it as an ancestor's event is. Outer lists first: what
    created an item of one resets the lists inside that item."""
    made: dict[int, list[tuple[tuple[Any, ...], Any]]] = {}  # k -> what created item parts[k]
    out = []
    for k, key in enumerate(parts):
        if type(key) is not int:
            continue
        made[k], unlisted = _creations(journal, codec, segments, parts, k, made, until)
        text = to_text(parts[:k])
        for event, item in made[k]:
            value = descend(item, parts[k + 1:])
            if event[1] >= since and value is not MISSING:
                out.append((_row(journal, segments, (*event, None), text), (event[3], value)))
        for event in unlisted:
            if event[1] >= since and value_before(journal, codec, segments, parts, event) is not MISSING:
                out.append((_row(journal, segments, (*event, None), text), (DELETE, None)))
    return out


def _creations(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, k: int,
               made: dict[int, list[tuple[tuple[Any, ...], Any]]], until: int
               ) -> tuple[list[tuple[tuple[Any, ...], Any]], list[tuple[Any, ...]]]:
    """The appends and extends through version `until` that created item `parts[k]` of the list at
    `parts[:k]`, each as ((stream_id, version, seq, op), the item's value), and the sets that made the
    list something else than a list while it may have held the item (see _unlisting). `made[m]` holds the
    creations of every list item `parts[:m + 1]` on the way (m < k).

    Appends record no index, so the list's length is followed from the start of the lineage: every event
    that changes it other than by appending is a reset (a set, delete, truncate or extend of the list, a
    delete of one of its items, a replacement of an ancestor, and for a list item on the way: what
    created, replaced, removed or shifted that item), read from events_reshaping or the path index, and
    the appends between two of them are counted in the path index in one statement, never read: the one
    creating the item is the (index - length)-th after the last of them. Cost: O(such events + results),
    not O(appends), plus a read of the top-level key for each event that shifts a list item on the way
    (see _length_after)."""
    parent, index = parts[:k], parts[k]
    text = to_text(parent)
    # (stream_id, version, seq, op, path, n) of each reset, and the list's length after it: None for the
    # list's own events (by op and n), an int, _RECOUNT, or the path of the list inside the event's value
    resets: list[tuple[tuple[Any, ...], Any]] = [
        (r, None) for r in journal.list_resets(segments, text, until) if r[3] != DELETE or r[4] == text or _is_item(r[4], k)]
    for m in range(1, k):  # the ancestors that hold the list
        ancestor = to_text(parts[:m])
        if type(parts[m]) is int:  # a list on the way, whose item parts[m] holds the list
            for r in journal.list_resets(segments, ancestor, until):
                if r[3] == DELETE and r[4] != ancestor:  # an item: this one or an earlier one moves the next here
                    if _is_item(r[4], m) and from_text(r[4])[m] <= parts[m]:
                        resets.append((r, _RECOUNT))
                elif r[3] == SET:  # decoded: the outer list's length says nothing of the list inside it
                    resets.append((r, parts[m:k]))
                elif r[3] == DELETE or r[3] == TRUNCATE and r[5] <= parts[m]:
                    resets.append((r, 0))
                # an extend: the item it may create is in made[m]; the items before it stay
            resets += [((*event, None, None), _length(descend(item, parts[m + 1:k]))) for event, item in made[m]]
        else:  # a value with tagged forms may hide the list from JSON paths: read it from the decoded value
            for r in journal.replacements(segments, ancestor, to_text(parts[m:k]), until):
                if r[3] == SET:
                    resets.append((r[:6], parts[m:k] if r[6] else r[5] or 0))
                elif type(parts[m - 1]) is not int:  # a list item's delete shifts the list: handled at its level
                    resets.append((r[:6], 0))
    resets.sort(key=lambda t: (t[0][1], t[0][2]))
    # where appends may lie: between one reset and the next. Each length below is the one right after its
    # reset event, never at the end of its version: appends later in that version count from it.
    spans, cursor = [], (0, -1)
    for reset, _ in resets:
        spans.append((cursor, (reset[1], reset[2])))
        cursor = (reset[1], reset[2])
    spans.append((cursor, (until + 1, -1)))
    counts = journal.counts_between(segments, text, spans)
    out: list[tuple[tuple[Any, ...], Any]] = []
    # Spans in which a set of the list to something else may have removed the item: the list may have
    # held it right before such a set, bounded from above by its length after the reset plus the span's
    # events (counts include such sets, after the appends); and the span does not end in an extend,
    # truncate or item delete of the list, which need a list (only a set of a list, a delete or an
    # ancestor's event makes it one again).
    held = []
    length = 0
    for span, count, (reset, how) in zip(spans, counts, resets + [(None, None)]):
        if length <= index < length + count:  # these appends added items length, length + 1, ...
            hit = journal.nth_between(segments, text, *span, index - length)
            if hit is not None and hit[3] == APPEND:
                out.append((hit[:4], codec.decode(hit[4])))
        if count and index < length + count and not (
                reset is not None and how is None and (reset[3] in (EXTEND, TRUNCATE) or reset[3] == DELETE and reset[4] != text)):
            held.append(span)
        length += count
        if reset is None:
            break
        op, n = reset[3], reset[5]
        if type(how) is int:
            length = how
        elif how is _RECOUNT:
            length = _length_after(journal, codec, segments, parent, reset)
        elif how is not None:  # a set on the way: the list inside its value, decoded
            length = _length_in(journal, codec, segments, reset, how)
        elif op == EXTEND:
            if length <= index < length + n:
                value = journal.event_at(StreamKey(segments[0].tree_id, reset[0]), reset[1], reset[2])[2]
                out.append((reset[:4], codec.decode(value)[index - length]))
            length += n
        elif op == TRUNCATE:
            length = min(length, n)
        elif op == DELETE:
            length = 0 if reset[4] == text else max(length - 1, 0)
        else:  # a set of the list
            length = n
    unlisted = []
    if held:  # only a span whose last event at the list's path is not an append holds such sets
        for span, last in zip(held, journal.last_ops_between(segments, text, held)):
            if last is not None and last != APPEND:
                unlisted += _unlisting(journal, segments, text, *span)
    return out, unlisted


def _unlisting(journal: Journal, segments: list[Segment], text: str, after: tuple[int, int],
               before: tuple[int, int]) -> list[tuple[Any, ...]]:
    """The sets at the list's path `text` between two of its resets (events `after` and `before`) in the
    first version where one made it something else than a list, as (stream_id, version, seq, op): history
    compares each with the path's value right before it, as it does an ancestor's events (only the first
    that found the item removes it).

    Between two resets, the events at the list's own path are its appends and then, once a set made it
    something else, sets and increments only: nothing makes it a list again but a reset (a set of a list,
    a delete, an ancestor's event). The sets are not in events_reshaping, and reading every event at the
    path would read every append, so the first version holding one is found by bisection on whether the
    first event from a version on is an append: O(log versions) index searches."""
    def first_from(version: int) -> tuple[Any, ...] | None:
        return journal.nth_between(segments, text, max(after, (version, -1)), before, 0)

    hit = first_from(0)
    if hit is not None and hit[3] == APPEND:
        lo, hi = hit[1], before[0] + 1  # the first event from lo on is an append; from hi on, none is
        while hi - lo > 1:
            mid = (lo + hi) // 2
            hit = first_from(mid)
            if hit is not None and hit[3] == APPEND:
                lo = hit[1]
            else:
                hi = mid
        events = _events_between(journal, segments, text, lo, after, before)
        if all(e[3] == APPEND for e in events):  # version lo ends with appends: the first event from hi on
            hit = first_from(hi)
            events = [] if hit is None else _events_between(journal, segments, text, hit[1], after, before)
    else:
        events = [] if hit is None else _events_between(journal, segments, text, hit[1], after, before)
    return [e for e in events if e[3] == SET]


def _events_between(journal: Journal, segments: list[Segment], text: str, version: int, after: tuple[int, int],
                    before: tuple[int, int]) -> list[tuple[Any, ...]]:
    """(stream_id, version, seq, op) of the events at exactly `text` in one version, strictly between
    events `after` and `before`: from that version's events."""
    owner = next(s for s in segments if s.lo <= version <= s.hi)
    return [(owner.stream_id, version, seq, op) for seq, (op, path, _) in enumerate(journal.events_of(owner, version))
            if path == text and after < (version, seq) < before]


def _length(value: Any) -> int:
    return len(value) if type(value) is list else 0


def _length_in(journal: Journal, codec: Codec, segments: list[Segment], event: tuple[Any, ...], rel: Path) -> int:
    """The length of the list at `rel` inside the value an ancestor's set event (stream_id, version, seq,
    ...) wrote, 0 when there is none."""
    value = journal.event_at(StreamKey(segments[0].tree_id, event[0]), event[1], event[2])[2]
    return 0 if value is None else _length(descend(codec.decode(value), rel))


def _length_after(journal: Journal, codec: Codec, segments: list[Segment], path: Path, event: tuple[Any, ...]) -> int:
    """The length of the list at `path` right after `event` (stream_id, version, seq, ...), 0 when there is
    none: the path's top-level key at the version before, with the events of the version up to `event`
    folded onto it. Costs what reading that key costs; only for events that shift or replace a list item
    on the way to the list (its new occupant's list is not in any event's value)."""
    owner = StreamKey(segments[0].tree_id, event[0])
    return _length(descend(_folded(journal, codec, segments, path[:1], owner, event[1], event[2] + 1), path[1:]))


def _folded(journal: Journal, codec: Codec, segments: list[Segment], prefix: Path, owner: StreamKey, version: int,
            upto: int) -> Any:
    """The value at `prefix` after the first `upto` events of `version` (MISSING when absent): its value at
    the version before, with those of the events at or below it folded on."""
    base = value_at(journal, codec, segments, prefix, version - 1)
    holder = {} if base is MISSING else {0: base}
    for op, text, value in journal.events_of(owner, version)[:upto]:
        where = from_text(text)
        if where[:len(prefix)] == prefix:
            apply(holder, op, (0, *where[len(prefix):]), None if value is None else codec.decode(value))
    return holder.get(0, MISSING)


def _is_item(path: str, depth: int) -> bool:
    """Whether a stored path names an item of the list `depth` parts deep (a delete there shifts it)."""
    parts = from_text(path)
    return len(parts) == depth + 1 and type(parts[-1]) is int


_RECOUNT: Any = object()


def _row(journal: Journal, segments: list[Segment], event: tuple[Any, ...], path: str) -> HistoryRow:
    """A history row for one event (stream_id, version, seq, op, value) at `path`."""
    created_at = journal.version_row(StreamKey(segments[0].tree_id, event[0]), event[1]).created_at
    return HistoryRow(event[0], event[1], event[2], event[3], path, event[4], created_at)


def _ancestor_change(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, where: Path,
                     row: HistoryRow) -> tuple[str, Any] | None:
    """What an ancestor's event did to the path: ("set", new value), ("delete", None), or None when it
    left it as it was (an equal value, still absent, or an item a truncation kept)."""
    if row.op == TRUNCATE and parts[len(where)] < int(row.value):
        return None
    now = ancestor_value(journal, codec, segments, parts, where, row)
    before = value_before(journal, codec, segments, parts, (row.stream_id, row.version, row.seq))
    if before is MISSING and now is MISSING or same(before, now):
        return None
    return (DELETE, None) if now is MISSING else (SET, now)


def value_before(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, event: tuple[Any, ...]) -> Any:
    """The path's value right before `event` (stream_id, version, seq, ...), MISSING when absent: an
    ancestor's event is compared with it, not with the version before, since an earlier event of the same
    version may have created, changed or removed the path already.

    The value at the version before, when no earlier event of the version touched the path, an ancestor
    or an item before a list index on the way (which shifts it); else the value at the version before of
    the deepest ancestor none of those events lies above (or shifts), with the version's events below it
    up to `event` folded on. Costs a read of the paths of the version's events before it (none for its
    first event), and of their values only when some must be folded."""
    stream_id, version, seq = event[:3]
    if not seq:
        return value_at(journal, codec, segments, parts, version - 1)
    owner = StreamKey(segments[0].tree_id, stream_id)
    depth = None  # how many parts of the path the fold starts from
    for op, text in journal.event_paths(owner, version, seq):
        where = from_text(text)
        n = min(len(where), len(parts))
        if where[:n] != parts[:n]:  # elsewhere, unless an item of a list on the way before the path's
            n -= 1
            if not (op == DELETE and len(where) == n + 1 and type(where[n]) is int and type(parts[n]) is int
                    and where[:n] == parts[:n] and where[n] < parts[n]):
                continue
        elif op == DELETE and len(where) <= len(parts) and type(where[-1]) is int:
            n = len(where) - 1  # an item on the way deleted: the next moves in
        depth = n if depth is None else min(depth, n)
    if depth is None:
        return value_at(journal, codec, segments, parts, version - 1)
    depth = max(depth, 1)
    return descend(_folded(journal, codec, segments, parts[:depth], owner, version, seq), parts[depth:])


def ancestor_value(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, where: Path, row: HistoryRow) -> Any:
    """The path's value as an ancestor's event left it (MISSING for a delete, or a truncation that cut
    it): taken from inside the ancestor's new value by SQL, or when that cannot be trusted (nothing found,
    which may be a null, or "$" keys that a tagged form could shadow), from the event's decoded value.
    Never from the end of the version: a later event of the same version may have changed it again."""
    rest = parts[len(where):]
    if row.op != SET:
        return MISSING
    if row.value is not None and not any(type(k) is str and k.startswith("$") for k in rest):
        return codec.decode(row.value)
    owner = next(s for s in segments if s.stream_id == row.stream_id and s.lo <= row.version <= s.hi)
    value = journal.event_at(owner, row.version, row.seq)[2]
    return MISSING if value is None else descend(codec.decode(value), rest)


class VersionSize(NamedTuple):
    """How much one version wrote: its events and their values' bytes."""

    version: int
    events: int
    bytes: int


def sizes(core: Core, task_id: str, since: int, until: int | None, limit: int | None) -> list[VersionSize]:
    """See CheckpointStore.sizes."""
    check_limit("since", since, 0)
    check_limit("until", until, 0)
    check_limit("limit", limit, 0)
    with core.session() as journal, journal.read():
        row, head = core.existing(journal, task_id)
        until = head if until is None else min(until, head)
        if limit == 0 or until < since:
            return []
        segments = core.segments(journal, row, until)
        return [VersionSize(*r) for r in journal.version_sizes(segments, since, until, limit)]


def events(core: Core, task_id: str, version: int, limit: int | None) -> list[HistoryEntry]:
    """See CheckpointStore.events."""
    if type(version) is not int:
        raise InvalidArgumentError("version", version, "must be an int")
    check_limit("limit", limit, 0)
    with core.session() as journal, journal.read():
        row, head = core.existing(journal, task_id)
        chain = core.lineage(journal, row)
        owner = core.owner(journal, row, version) if 1 <= version <= head else None
        vrow = journal.version_row(owner, version) if owner else None
        if vrow is None:
            raise VersionNotFoundError(task_id, version, head)
        rows = journal.events_of(owner, version)[:limit]
    name = next(r.name for r in chain if r.id == owner.stream_id)
    values = core.codec.decode_many([value if value is not None else "null" for _, _, value in rows])
    created = _parse_time(vrow.created_at)
    return [HistoryEntry(name, version, seq, op, from_text(path), None if op == DELETE else value, created)
            for seq, ((op, path, _), value) in enumerate(zip(rows, values))]
