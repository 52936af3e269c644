"""Export and import streams as JSON Lines.

One JSON object per line:

    {"eventckpt": "export", "format": 1}
    {"stream": "task-1", "parent": null, "fork_version": null, "created_at": "..."}
    {"stream": "task-1", "version": 1, "created_at": "...", "name": null, "auto": false,
     "metadata": {...} | null, "usage": {...} | null, "checkpoint_id": null,
     "events": [["set", "$.step", 1], ["append", "$.messages", {...}], ...], "checksum": "...",
     "tool_calls": [[call_id, name, arguments, result, error, undoes], ...]}   (only when there are any)
    ...

A stream is exported with its whole lineage as its own versions (a fork's shared versions are copied
from its ancestors), so the export stands alone; with forks, every fork below it follows as a stream
line naming its parent and fork version, then its own versions. Values are the stored JSON, embedded
as is (tagged forms included). Import replays every version through the ordinary write path with the
exported time, name, metadata, usage and checkpoint id, so each version's state is identical and its
snapshots follow the importing store's policy. Version numbers are kept, holes included (retention
folds removed versions into the next kept one), and each imported version must reproduce its exported
checksum, which chains over the versions before it: a version missing from the lines is refused. The
whole import is one transaction.

`copy(source, target)` moves a whole store between engines (SQLite <-> PostgreSQL) the same way, one stream
tree per transaction, with the LangGraph saver's threads and pending writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .checkpoint import parse_time
from .checks import check_usage
from .commit import commit
from .errors import InvalidArgumentError, StreamExistsError, StreamNotFoundError
from .journal import Segment, StreamRow
from .ops import DELETE, EXTEND, INCR, OPS, TRUNCATE
from .paths import from_text

if TYPE_CHECKING:
    from .store import Store

FORMAT = 1
_BATCH = 1000


def export(store: Store, task_id: str, *, forks: bool = False) -> Iterator[bytes]:
    """See Store.export. Lines are produced in batches, each read in one session."""
    core = store.core
    with core.session() as journal:
        found = journal.stream_and_head(task_id)
        if found is None:
            raise StreamNotFoundError(task_id)
        row, head = found
        todo = [(row, head, None)]
        if forks:
            todo += [(r, journal.stream_and_head(r.name)[1], r) for r in core.subtree(journal, row)[1:]]
        todo.sort(key=lambda t: t[0].id)  # a parent before its forks
    yield orjson.dumps({"eventckpt": "export", "format": FORMAT}) + b"\n"
    for stream, upto, fork in todo:
        yield orjson.dumps({"stream": stream.name, "parent": _parent_name(store, fork), "fork_version": fork and fork.fork_version,
                            "created_at": stream.created_at}) + b"\n"
        yield from _versions(store, stream, upto, (fork.fork_version or 0) if fork else 0)


def _parent_name(store: Store, fork: StreamRow | None) -> str | None:
    if fork is None:
        return None
    with store.core.session() as journal:
        return store.core.lineage(journal, fork)[-2].name


def _versions(store: Store, row: StreamRow, upto: int, after: int) -> Iterator[bytes]:
    for lo in range(after + 1, upto + 1, _BATCH):
        hi = min(upto, lo + _BATCH - 1)
        with store.core.session() as journal, journal.read():
            segments = [s for s in (Segment(s.tree_id, s.stream_id, max(s.lo, lo), s.hi)
                                    for s in store.core.segments(journal, row, hi)) if s.lo <= s.hi]
            vrows = journal.version_rows(segments)
            events: dict[int, list[Any]] = {}
            for version, _, op, path, value in journal.tail(segments, lo - 1):
                events.setdefault(version, []).append([op, path, orjson.Fragment(value) if value is not None else None])
            ids = {v: journal.checkpoint_id_of(s, v) for s in segments for v in range(s.lo, s.hi + 1)}
            calls: dict[int, list[Any]] = {}
            for version, call_id, name, arguments, result, error, undoes in journal.tool_calls(segments, lo - 1):
                calls.setdefault(version, []).append([call_id, name, orjson.Fragment(arguments),
                                                      orjson.Fragment(result) if result is not None else None,
                                                      error, undoes])
        lines = [orjson.dumps({
            "stream": row.name, "version": v.version, "created_at": v.created_at, "name": v.name, "auto": bool(v.auto),
            "metadata": orjson.Fragment(v.metadata) if v.metadata else None,
            "usage": orjson.Fragment(v.usage) if v.usage else None,
            "checkpoint_id": ids.get(v.version), "events": events.get(v.version, []), "checksum": v.checksum.hex(),
            **({"tool_calls": calls[v.version]} if v.version in calls else {}),
        }) + b"\n" for v in vrows]
        yield from lines


def import_lines(store: Store, lines: Iterable[bytes | str], progress: Callable[[int], None] | None = None) -> list[str]:
    """See Store.import_lines. `progress(n)` is called with the size of every line read.

    The whole import is one write transaction (Core.batch): a bad line, an exception or a killed
    process leaves the file as it was, never a partial stream. Other writers wait for it."""
    created: dict[str, int] = {}  # stream -> its last imported version (its fork version at first)
    with store.core.batch():
        _import(store, lines, progress, created)
    return list(created)


def _import(store: Store, lines: Iterable[bytes | str], progress: Callable[[int], None] | None, created: dict[str, int]) -> None:
    header = True
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
        if header:
            if record.get("eventckpt") != "export" or record.get("format") != FORMAT:
                raise InvalidArgumentError("line", number, f"the first line must be the export header of format {FORMAT}")
            header = False
        elif "version" in record:
            _import_version(store, record, number, created)
        else:
            _import_stream(store, record, number, created)


def _field(record: dict[str, Any], name: str, types: tuple[type, ...], number: int) -> Any:
    value = record.get(name)
    if type(value) not in types:
        raise InvalidArgumentError("line", number, f"{name!r} must be {' or '.join(t.__name__ for t in types)}")
    return value


def _import_stream(store: Store, record: dict[str, Any], number: int, created: dict[str, int]) -> None:
    name = _field(record, "stream", (str,), number)
    parent = _field(record, "parent", (str, type(None)), number)
    if store.stream(name).exists():
        raise StreamExistsError(name)
    if name in created:
        raise InvalidArgumentError("line", number, f"stream {name!r} comes twice")
    if parent is None:
        created[name] = 0  # a root stream is created by its first version
        return
    if parent not in created:
        raise InvalidArgumentError("line", number, f"stream {name!r} forks from {parent!r}, which this import has not created")
    at = _field(record, "fork_version", (int,), number)
    store.stream(parent).fork(at=at, task_id=name)
    created[name] = at


def _import_version(store: Store, record: dict[str, Any], number: int, created: dict[str, int]) -> None:
    name = _field(record, "stream", (str,), number)
    if name not in created:
        raise InvalidArgumentError("line", number, f"a version of {name!r} comes before its stream line")
    version = _field(record, "version", (int,), number)
    if version <= created[name]:  # holes are fine (retention leaves them); going back is not
        raise InvalidArgumentError("line", number, f"version {version} of {name!r} does not come after version {created[name]}")
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
    tool_rows = []
    for call in record.get("tool_calls") or []:  # absent in exports from before tool calls travelled
        if type(call) is not list or len(call) != 6 or not all(type(call[i]) is str for i in (0, 1)) \
                or not all(call[i] is None or type(call[i]) is str for i in (4, 5)):
            raise InvalidArgumentError("line", number, f"a tool call is [call_id, name, arguments, result, error, undoes], not {call!r}")
        tool_rows.append((call[0], call[1], orjson.dumps(call[2]).decode(),
                          orjson.dumps(call[3]).decode() if call[3] is not None else None, call[4], call[5]))
    usage = check_usage(_field(record, "usage", (dict, type(None)), number)) or {}
    created_at = _field(record, "created_at", (str,), number)
    try:
        parse_time(created_at)
    except ValueError:
        raise InvalidArgumentError("line", number, f"created_at {created_at!r} is not an ISO-8601 time") from None
    commit(
        store.core, name, lambda head: recorded, True, lambda prev: usage,
        metadata=codec.decode(orjson.dumps(metadata)) if metadata is not None else None,
        name=_field(record, "name", (str, type(None)), number), auto=_field(record, "auto", (bool,), number),
        expected_version=None, at=version, checkpoint_id=_field(record, "checkpoint_id", (str, type(None)), number),
        created_at=created_at, tool_rows=tool_rows,
    )
    created[name] = version
    if checksum is not None:  # it chains over every version before: a missing one shows here
        with store.core.session() as journal:
            row = journal.stream(name)
            vrow = journal.version_row(row, version) if row else None
        if vrow is None or vrow.checksum.hex() != checksum:
            raise InvalidArgumentError("line", number, f"version {version} of {name!r} does not match its checksum"
                                       " (a damaged export, or a version missing before it)")


@dataclass(frozen=True)
class Copied:
    """What `copy` moved: the streams (roots with their forks) and the versions."""

    streams: tuple[str, ...]
    versions: int


def copy(source: Store, target: Store, progress: Callable[[int, int], None] | None = None) -> Copied:
    """See eventckpt.copy."""
    with source.core.session() as journal, journal.read():
        rows = journal.streams_all()
        total = journal.totals()["versions"]
        namespaces = journal.langgraph_namespaces()
    names = [r.name for r in rows]
    with target.core.session() as journal:
        taken = [n for n in names if journal.stream(n) is not None]
        if taken:  # refuse before anything is written
            raise StreamExistsError(taken[0])
        clash = [(t, ns) for t, ns, _ in namespaces if journal.langgraph_tree(t, ns) is not None]
        if clash:
            raise InvalidArgumentError("target", target.path, f"already has the LangGraph thread {clash[0][0]!r}")
    roots = [r for r in rows if r.parent_id is None]
    lines_total = total + len(rows) + len(roots)  # per tree: a header, a line per stream, one per version
    done = 0

    def counted(lines: Iterator[bytes]) -> Iterator[bytes]:
        nonlocal done
        for line in lines:
            done += 1
            if progress:
                progress(done, lines_total)
            yield line

    copied: list[str] = []
    for root in roots:  # a tree at a time, each in one transaction of the target
        copied += import_lines(target, counted(export(source, root.name, forks=True)), None)
    with source.core.session() as journal:
        writes = {(t, ns): journal.langgraph_all_writes(t, ns) for t, ns, _ in namespaces}
    with target.core.session() as journal, journal.write():
        for thread_id, ns, root_name in namespaces:
            root = journal.stream(root_name)
            assert root is not None
            journal.langgraph_set_tree(thread_id, ns, root.tree_id)
            for checkpoint_id, task_id, task_path, text in writes[(thread_id, ns)]:
                journal.langgraph_set_writes(thread_id, ns, checkpoint_id, task_id, task_path, text, replace=True)
    return Copied(tuple(copied), done - len(rows) - len(roots))
