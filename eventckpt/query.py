"""Log, history and search: questions about versions answered by SQL over indexed columns, newest first,
without decoding any state (see journal.log_rows / history_rows / search_rows)."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import orjson

from .checkpoint import Checkpoint, parse_time
from .codec import Codec, quiet_gc
from .diffing import MISSING, equal, value_at
from .errors import InvalidArgumentError, StreamNotFoundError, VersionNotFoundError
from .journal import HistoryRow, Journal, LogRow, MetaFilter, Segment, StreamRow, segments_for
from .ops import DELETE, SET, TRUNCATE
from .paths import Path, addressable, from_text, normalize, to_text

if TYPE_CHECKING:
    from .store import Store
    from .stream import CheckpointStore

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
        out.append(MetaFilter(to_text((key,)), codec.encode_text(value), indexed))
    return out


def log(stream: CheckpointStore, limit: int | None = None, *, before: int | None = None, name: str | None = None,
        auto: bool | None = None, metadata: Mapping[str, Any] | None = None) -> list[Checkpoint]:
    """The stream's checkpoints, newest first; see CheckpointStore.log."""
    check_limit("limit", limit, 0)
    check_limit("before", before, 1)
    if name is not None and type(name) is not str:
        raise InvalidArgumentError("name", name, "must be None or a str")
    if auto is not None and type(auto) is not bool:
        raise InvalidArgumentError("auto", auto, "must be None or a bool")
    store = stream.store
    meta = meta_filters(store.codec, metadata)
    if limit == 0:
        return []
    with store._guard() as journal, journal.read():
        found = journal.stream_and_head(stream.task_id)
        if found is None:
            return []
        row, head = found
        rows = journal.log_rows(segments_for(store._chain(row), head), before=before, limit=limit, name=name,
                                auto=auto, meta=meta)
        return checkpoints(stream, row, rows)


def search(store: Store, name: str | None = None, metadata: Mapping[str, Any] | None = None,
           limit: int | None = None) -> list[Checkpoint]:
    """Checkpoints of every stream by name and/or metadata, newest first; see Store.search."""
    from .stream import CheckpointStore

    if name is not None and type(name) is not str:
        raise InvalidArgumentError("name", name, "must be None or a str")
    check_limit("limit", limit, 0)
    meta = meta_filters(store.codec, metadata)
    with store._guard() as journal, journal.read():
        rows = journal.search_rows(name=name, meta=meta, limit=limit)
        owners = {}
        for sid in {r.stream_id for r in rows}:
            chain = journal.lineage(sid)
            store._chains.setdefault(sid, chain)
            owners[sid] = chain[-1]
        streams = {sid: CheckpointStore(store, owner.name) for sid, owner in owners.items()}
        return [checkpoints(streams[r.stream_id], owners[r.stream_id], [r])[0] for r in rows]


def checkpoints(stream: CheckpointStore, row: StreamRow, rows: list[LogRow]) -> list[Checkpoint]:
    """Checkpoints of `stream` (whose row is `row`) for version rows, values loaded on first access;
    usage and metadata are decoded in one parser call each."""
    store = stream.store
    usages = orjson.loads("[" + ",".join(r.usage or "{}" for r in rows) + "]")
    metas = store.codec.decode_many([r.metadata or "{}" for r in rows])
    parent = stream._origin(row)

    def loader(version: int) -> Callable[[], Any]:
        def load() -> Any:
            with store._guard():
                return store._state_at(row, version)
        return load

    with quiet_gc():  # thousands of small acyclic objects: no reason to let the collector rescan the heap
        return [Checkpoint._stored(stream.task_id, r.version, usage, meta, r.created_at, r.name, bool(r.auto), parent,
                                   r.checkpoint_id, loader(r.version))
                for r, usage, meta in zip(rows, usages, metas)]


def history(stream: CheckpointStore, path: Any, *, since: int | None = None, until: int | None = None,
            limit: int | None = None) -> list[HistoryEntry]:
    """Every change of one path, newest first; see CheckpointStore.history."""
    parts = normalize(path)
    check_limit("since", since, 0)
    check_limit("until", until, 0)
    check_limit("limit", limit, 0)
    store = stream.store
    text = to_text(parts)
    # (ancestor path, this path relative to it, whether the ancestor is a list)
    ancestors = [(to_text(parts[:i]), to_text(parts[i:]), type(parts[i]) is int) for i in range(1, len(parts))]
    with store._guard() as journal, journal.read():
        found = journal.stream_and_head(stream.task_id)
        if found is None or limit == 0:
            return []
        row, head = found
        until = head if until is None else min(until, head)
        chain = store._chain(row)
        segments = segments_for(chain, until)
        rows = journal.history_rows(segments, text, ancestors, since or 0, until, limit)
        names = {r.id: r.name for r in chain}
        depth = len(parts)
        replaced = {}  # row index -> (op, value) for events at ancestors, read while the journal is at hand
        for i, r in enumerate(rows):
            where = from_text(r.path)
            if len(where) < depth:
                replaced[i] = _ancestor_change(journal, store.codec, segments, parts, where, r)
    values = store.codec.decode_many([r.value if r.value is not None and i not in replaced else "null" for i, r in enumerate(rows)])
    with quiet_gc():
        out = [HistoryEntry(names[r.stream_id], r.version, r.seq, r.op, from_text(r.path), None if r.op == DELETE else value,
                            _parse_time(r.created_at))
               for r, value in zip(rows, values)]
    if replaced:  # rare: rewrite the ancestors' entries, dropping those that left the path as it was
        out = [e if i not in replaced else e._replace(op=replaced[i][0], value=replaced[i][1])
               for i, e in enumerate(out) if replaced.get(i, True) is not None]
    return out


def _ancestor_change(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, where: Path,
                     row: HistoryRow) -> tuple[str, Any] | None:
    """What an ancestor's event did to the path: ("set", new value), ("delete", None), or None when it
    left it as it was (an equal value, still absent, or an item a truncation kept)."""
    if row.op == TRUNCATE and parts[len(where)] < int(row.value):
        return None
    now = ancestor_value(journal, codec, segments, parts, where, row)
    before = value_at(journal, codec, segments, parts, row.version - 1)
    if before is MISSING and now is MISSING or equal(before, now):
        return None
    return (DELETE, None) if now is MISSING else (SET, now)


def ancestor_value(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, where: Path, row: HistoryRow) -> Any:
    """The path's value as an ancestor's event left it: taken from inside the ancestor's new value by
    SQL, or when that cannot be trusted (nothing found, or "$" keys that a tagged form could shadow),
    read as of the end of that version."""
    if row.op == SET and row.value is not None and not any(type(k) is str and k.startswith("$") for k in parts[len(where):]):
        return codec.decode(row.value)
    if row.op == SET or row.op == TRUNCATE:
        return value_at(journal, codec, segments, parts, row.version)
    return MISSING


class VersionSize(NamedTuple):
    """How much one version wrote: its events and their values' bytes."""

    version: int
    events: int
    bytes: int


def sizes(stream: CheckpointStore, since: int, until: int | None, limit: int | None) -> list[VersionSize]:
    """See CheckpointStore.sizes."""
    check_limit("since", since, 0)
    check_limit("until", until, 0)
    check_limit("limit", limit, 0)
    store = stream.store
    with store._guard() as journal, journal.read():
        found = journal.stream_and_head(stream.task_id)
        if found is None:
            raise StreamNotFoundError(stream.task_id)
        row, head = found
        until = head if until is None else min(until, head)
        if limit == 0 or until < since:
            return []
        segments = segments_for(store._chain(row), until)
        return [VersionSize(*r) for r in journal.version_sizes(segments, since, until, limit)]


def events(stream: CheckpointStore, version: int, limit: int | None) -> list[HistoryEntry]:
    """See CheckpointStore.events."""
    if type(version) is not int:
        raise InvalidArgumentError("version", version, "must be an int")
    check_limit("limit", limit, 0)
    store = stream.store
    with store._guard() as journal, journal.read():
        found = journal.stream_and_head(stream.task_id)
        if found is None:
            raise StreamNotFoundError(stream.task_id)
        row, head = found
        chain = store._chain(row)
        owner = next((s for s in segments_for(chain, version) if s.lo <= version <= s.hi), None) if 1 <= version <= head else None
        vrow = journal.version_row(owner.stream_id, version) if owner else None
        if vrow is None:
            raise VersionNotFoundError(stream.task_id, version, head)
        rows = journal.events_of(owner.stream_id, version)[:limit]
    name = next(r.name for r in chain if r.id == owner.stream_id)
    values = store.codec.decode_many([value if value is not None else "null" for _, _, value in rows])
    created = _parse_time(vrow.created_at)
    return [HistoryEntry(name, version, seq, op, from_text(path), None if op == DELETE else value, created)
            for seq, ((op, path, _), value) in enumerate(zip(rows, values))]
