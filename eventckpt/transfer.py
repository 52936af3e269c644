"""Export and import streams as JSON Lines.

One JSON object per line:

    {"eventckpt": "export", "format": 2}
    {"stream": "task-1", "parent": null, "fork_version": null, "created_at": "..."}
    {"stream": "task-1", "version": 1, "created_at": "...", "name": null, "auto": false,
     "metadata": {...} | null, "usage": {...} | null, "checkpoint_id": null,
     "events": [["set", "$.step", 1], ["append", "$.messages", {...}], ...], "checksum": "..."}
    ...
    {"eventckpt": "end", "streams": 1, "versions": 12, "events": 40}

The last line says where the export ends and what it holds: an import refuses a file without it (cut
short at a line boundary) or whose counts differ. Format 1 (before the end line existed) is refused with
a message saying so: a cut-short format 1 file cannot be told from a whole one.

A stream is exported with its whole lineage as its own versions (a fork's shared versions are copied
from its ancestors), so the export stands alone; with forks, every fork below it follows as a stream
line naming its parent and fork version, then its own versions. Values are the stored JSON, embedded
as is (tagged forms included). Import replays every version through the ordinary write path with the
exported time, name, metadata, usage and checkpoint id, so each version's state is identical and its
snapshots follow the importing store's policy. Version numbers are kept, holes included (retention
folds removed versions into the next kept one), and each imported version must reproduce its exported
checksum, which chains over the versions before it: a version missing from the lines is refused. The
whole import is one transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import orjson

from .errors import InvalidArgumentError, StreamExistsError, StreamNotFoundError
from .journal import Segment, StreamRow, segments_for
from .checkpoint import parse_time
from .ops import DELETE, EXTEND, INCR, OPS, TRUNCATE
from .paths import from_text
from .stream import _check_usage, check_new_name

if TYPE_CHECKING:
    from .store import Store

FORMAT = 2
_BATCH = 1000


def export(store: Store, task_id: str, *, forks: bool = False) -> Iterator[bytes]:
    """See Store.export. Lines are produced in batches, each read under the store lock."""
    with store._guard() as journal:
        found = journal.stream_and_head(task_id)
        if found is None:
            raise StreamNotFoundError(task_id)
        row, head = found
        todo = [(row, head, None)]
        if forks:
            todo += [(r, journal.stream_and_head(r.name)[1], r) for r in store._subtree(row)[1:]]
        todo.sort(key=lambda t: t[0].id)  # a parent before its forks
        removed = {r.id: journal.removed_head(r.id) or None for r, _, _ in todo}
    yield orjson.dumps({"eventckpt": "export", "format": FORMAT}) + b"\n"
    counts = {"versions": 0, "events": 0}
    for stream, upto, fork in todo:
        yield orjson.dumps({"stream": stream.name, "parent": _parent_name(store, fork), "fork_version": fork and fork.fork_version,
                            "created_at": stream.created_at, "removed_head": removed[stream.id]}) + b"\n"
        yield from _versions(store, stream, upto, (fork.fork_version or 0) if fork else 0, counts)
    yield orjson.dumps({"eventckpt": "end", "streams": len(todo), **counts}) + b"\n"


def _parent_name(store: Store, fork: StreamRow | None) -> str | None:
    return store._chain(fork)[-2].name if fork is not None else None


def _versions(store: Store, row: StreamRow, upto: int, after: int, counts: dict[str, int]) -> Iterator[bytes]:
    for lo in range(after + 1, upto + 1, _BATCH):
        hi = min(upto, lo + _BATCH - 1)
        with store._guard() as journal, journal.read():
            segments = [s for s in (Segment(s.stream_id, max(s.lo, lo), s.hi) for s in segments_for(store._chain(row), hi))
                        if s.lo <= s.hi]
            vrows = journal.version_rows(segments)
            events: dict[int, list[Any]] = {}
            for version, _, op, path, value in journal.tail(segments, lo - 1):
                events.setdefault(version, []).append([op, path, orjson.Fragment(value) if value is not None else None])
            ids = {v: journal.checkpoint_id_of(s.stream_id, v) for s in segments for v in range(s.lo, s.hi + 1)}
        lines = [orjson.dumps({
            "stream": row.name, "version": v.version, "created_at": v.created_at, "name": v.name, "auto": bool(v.auto),
            "metadata": orjson.Fragment(v.metadata) if v.metadata else None,
            "usage": orjson.Fragment(v.usage) if v.usage else None,
            "checkpoint_id": ids.get(v.version), "events": events.get(v.version, []), "checksum": v.checksum.hex(),
        }) + b"\n" for v in vrows]
        counts["versions"] += len(vrows)
        counts["events"] += sum(map(len, events.values()))
        yield from lines


def import_lines(store: Store, lines: Iterable[bytes | str], progress: Callable[[int], None] | None = None) -> list[str]:
    """See Store.import_lines. `progress(n)` is called with the size of every line read.

    The whole import is one write transaction (Store._batch): a bad line, an exception or a killed
    process leaves the file as it was, never a partial stream. Other writers wait for it."""
    created: dict[str, int] = {}  # stream -> its last imported version (its fork version at first)
    with store._batch():
        _import(store, lines, progress, created)
    return list(created)


def _import(store: Store, lines: Iterable[bytes | str], progress: Callable[[int], None] | None, created: dict[str, int]) -> None:
    header, end = True, None
    seen = {"streams": 0, "versions": 0, "events": 0}
    number = 0
    for number, line in enumerate(lines, 1):
        if progress:
            progress(len(line))
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise InvalidArgumentError("line", number, f"is not JSON ({exc})") from None
        if type(record) is not dict:
            raise InvalidArgumentError("line", number, "is not a JSON object")
        if end is not None:
            raise InvalidArgumentError("line", number, f"comes after the export's end line (line {end})")
        if header:
            _check_header(record, number)
            header = False
        elif record.get("eventckpt") == "end":
            expected = {key: record.get(key) for key in seen}
            if expected != seen:
                raise InvalidArgumentError("line", number, f"the end line says the export holds {expected}, but it holds {seen}")
            end = number
        elif "version" in record:
            seen["events"] += _import_version(store, record, number, created)
            seen["versions"] += 1
        else:
            _import_stream(store, record, number, created)
            seen["streams"] += 1
    if header:
        raise InvalidArgumentError("export", "empty", "there is nothing to import: not even the export's first line")
    if end is None:
        raise InvalidArgumentError("export", f"{number} lines", "ends without its end line: the export was cut short"
                                   " (or is not whole); nothing was imported")


def _check_header(record: dict[str, Any], number: int) -> None:
    if record.get("eventckpt") != "export" or type(record.get("format")) is not int:
        raise InvalidArgumentError("line", number, f"the first line must be the export header of format {FORMAT}")
    if record["format"] == 1:
        raise InvalidArgumentError("export", "format 1", "format 1 exports (from eventckpt before the end line"
                                   " existed) cannot be checked for being whole: export the stream again with this version")
    if record["format"] != FORMAT:
        raise InvalidArgumentError("export", f"format {record['format']}", f"this eventckpt reads export format {FORMAT}")


def _field(record: dict[str, Any], name: str, types: tuple[type, ...], number: int) -> Any:
    value = record.get(name)
    if type(value) not in types:
        raise InvalidArgumentError("line", number, f"{name!r} must be {' or '.join(t.__name__ for t in types)}")
    return value


def _time(record: dict[str, Any], number: int) -> str:
    created_at = _field(record, "created_at", (str,), number)
    try:
        parse_time(created_at)
    except ValueError:
        raise InvalidArgumentError("line", number, f"created_at {created_at!r} is not an ISO-8601 time") from None
    return created_at


def _import_stream(store: Store, record: dict[str, Any], number: int, created: dict[str, int]) -> None:
    name = _field(record, "stream", (str,), number)
    parent = _field(record, "parent", (str, type(None)), number)
    created_at = _time(record, number)
    removed = _field(record, "removed_head", (int, type(None)), number)
    if removed is not None and removed < 1:
        raise InvalidArgumentError("line", number, f"removed_head {removed} is not a version number")
    if store.stream(name).exists():
        raise StreamExistsError(name)
    if name in created:
        raise InvalidArgumentError("line", number, f"stream {name!r} comes twice")
    journal = store._journal
    if parent is None:
        row = journal.create_stream(check_new_name(name), created_at)
        created[name] = 0
    elif parent not in created:
        raise InvalidArgumentError("line", number, f"stream {name!r} forks from {parent!r}, which this import has not created")
    else:
        at = _field(record, "fork_version", (int,), number)
        store.stream(parent).fork(at=at, task_id=name)
        row = journal.stream(name)
        created[name] = at
    if removed is not None:  # before its versions: the next version after the import is numbered above it
        journal.set_removed_head(row.id, removed)


def _import_version(store: Store, record: dict[str, Any], number: int, created: dict[str, int]) -> int:
    """Import one version line; returns its number of events."""
    name = _field(record, "stream", (str,), number)
    if name not in created:
        raise InvalidArgumentError("line", number, f"a version of {name!r} comes before its stream line")
    version = _field(record, "version", (int,), number)
    if version <= created[name]:  # holes are fine (retention leaves them); going back is not
        raise InvalidArgumentError("line", number, f"version {version} of {name!r} does not come after version {created[name]}")
    stream = store.stream(name)
    codec = store.codec
    recorded = []
    for event in _field(record, "events", (list,), number):
        if type(event) is not list or len(event) != 3 or event[0] not in OPS or type(event[1]) is not str:
            raise InvalidArgumentError("line", number, f"an event is [op, path, value], not {event!r}")
        op, path, value = event
        if (op == INCR and type(value) not in (int, float)) or (op == TRUNCATE and (type(value) is not int or value < 0)) \
                or (op == EXTEND and type(value) is not list):
            raise InvalidArgumentError("line", number, f"{op} does not take {value!r}")
        raw = orjson.dumps(value) if op != DELETE else None
        recorded.append((op, from_text(path), codec.decode(raw) if raw is not None else None, raw))
    metadata = record.get("metadata")
    checksum = _field(record, "checksum", (str, type(None)), number)  # absent in hand-written lines
    usage = _check_usage(_field(record, "usage", (dict, type(None)), number)) or {}
    created_at = _time(record, number)
    stream._commit(
        lambda head: recorded, True, lambda prev: usage,
        metadata=codec.decode(orjson.dumps(metadata)) if metadata is not None else None,
        name=_field(record, "name", (str, type(None)), number), auto=_field(record, "auto", (bool,), number),
        expected_version=None, at=version, checkpoint_id=_field(record, "checkpoint_id", (str, type(None)), number),
        created_at=created_at,
    )
    created[name] = version
    if checksum is not None:  # it chains over every version before: a missing one shows here
        row = store._journal.stream(name)
        vrow = store._journal.version_row(row.id, version) if row else None
        if vrow is None or vrow.checksum.hex() != checksum:
            raise InvalidArgumentError("line", number, f"version {version} of {name!r} does not match its checksum"
                                       " (a damaged export, or a version missing before it)")
    return len(recorded)
