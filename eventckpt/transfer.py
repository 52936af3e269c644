"""Export and import streams as JSON Lines.

One JSON object per line:

    {"eventckpt": "export", "format": 2}
    {"stream": "task-1", "parent": null, "fork_version": null, "created_at": "..."}
    {"stream": "task-1", "version": 1, "created_at": "...", "name": null, "auto": false,
     "metadata": {...} | null, "usage": {...} | null, "checkpoint_id": null,
     "events": [["set", "$.step", 1], ["append", "$.messages", {...}], ...], "checksum": "...",
     "tool_calls": [[call_id, name, arguments, result, error, undoes], ...]}   (only when there are any)
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
snapshots follow the importing store's policy. It folds and writes values in their stored form
(codec.StoredCodec), so what it stores (snapshots and metadata included) is exactly what was exported,
whatever classes (types=) the importing process knows, NaN included. Times are stored in the store's UTC
form. Version numbers are kept, holes included (retention folds removed versions into the next kept
one), and each imported version must reproduce its exported checksum, which chains over the versions
before it: a version missing from the lines is refused. The whole import is one transaction.

`copy(source, target)` moves a whole store between engines (SQLite <-> PostgreSQL) the same way, in one
transaction of the target, with the LangGraph saver's threads and pending writes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .checkpoint import format_time, parse_time
from .checks import check_new_name, check_usage
from .codec import StoredCodec
from .commit import commit
from .core import Core
from .errors import CorruptStoreError, InvalidArgumentError, StoreBusyError, StoreClosedError, StreamExistsError
from .integrity import ROOT, version_checksum
from .journal import Journal, Segment, StreamRow
from .ops import DELETE, EXTEND, INCR, OPS, TRUNCATE
from .paths import from_text

if TYPE_CHECKING:
    from .store import Store

FORMAT = 2
_BATCH = 1000

Reader = Callable[[], AbstractContextManager[Journal]]  # a journal to read one batch through


def export(store: Store, task_id: str, *, forks: bool = False) -> Iterator[bytes]:
    """See Store.export. Lines are produced in batches of versions, so memory stays bounded.

    On an SQLite file every batch is read in one read transaction on a connection of the export's own
    (Backend.own_snapshot), held to the end: one moment of the file, whatever is saved, pruned or deleted
    meanwhile, and the store's own connection stays free (a save on the exporting thread between two
    lines commits at once). Elsewhere each batch is read in a read transaction of its own: the thread's
    session is never held across a `yield`, where a save on the same thread would join it (and be rolled
    back with it) and other threads would wait. A retention rewrite of an exported tree meanwhile (a prune
    on another host, whose rechained checksums an import would refuse after versions read before it), or
    its deletion, then stops the export with StoreBusyError."""
    core = store.core
    own = core.backend.own_snapshot()
    if own is not None:
        with own as journal:
            todo, removed = _plan(core, journal, task_id, forks)

            def held() -> AbstractContextManager[Journal]:
                if core.closed:  # the export's connection is its own, but it ends with the store
                    raise StoreClosedError()
                return nullcontext(journal)

            yield from _lines(core, held, todo, removed)
        return
    with core.session() as journal, journal.read():
        todo, removed = _plan(core, journal, task_id, forks)
        generations = [(r, journal.generation(r)) for r, _, _ in todo]

    @contextmanager
    def batch() -> Iterator[Journal]:
        with core.session() as journal, journal.read():
            for r, generation in generations:
                found = journal.stream(r.name)
                if found is None or found.id != r.id:
                    raise StoreBusyError(f"{task_id}: {r.name!r} was deleted while it was exported (by another process)",
                                         code="deleted")
                if journal.rewritten_since(r, generation):
                    raise StoreBusyError(f"{task_id}: retention rewrote the history of {r.name!r} while it was exported"
                                         " (a prune by another process); export it again", code="rewritten")
            yield journal

    yield from _lines(core, batch, todo, removed)


def _plan(core: Core, journal: Journal, task_id: str,
          forks: bool) -> tuple[list[tuple[StreamRow, int, StreamRow | None]], dict[int, int | None]]:
    """What an export writes: (stream, its head, itself when exported as a fork, else None), parents first,
    and each stream's removed head (None: none)."""
    row, head = core.existing(journal, task_id)
    todo = [(row, head, None)]
    if forks:
        todo += [(r, journal.stream_and_head(r.name)[1], r) for r in core.subtree(journal, row)[1:]]
    todo.sort(key=lambda t: t[0].id)  # a parent before its forks
    return todo, {r.id: journal.removed_head(r) or None for r, _, _ in todo}


def _lines(core: Core, reader: Reader, todo: list[tuple[StreamRow, int, StreamRow | None]],
           removed: dict[int, int | None]) -> Iterator[bytes]:
    """The export of `todo`: (stream, its head, itself when it is exported as a fork, else None), parents
    first; `removed` maps a stream's id to its removed head (None: none). Each batch of versions is read
    through the journal `reader()` gives: a read transaction of its own (export), or the one a copy holds
    around all of it (one snapshot)."""
    yield orjson.dumps({"eventckpt": "export", "format": FORMAT}) + b"\n"
    counts = {"versions": 0, "events": 0}
    for stream, upto, fork in todo:
        with reader() as journal:
            parent = _parent_name(core, journal, fork)
        yield orjson.dumps({"stream": stream.name, "parent": parent,
                            "fork_version": fork and fork.fork_version,
                            "created_at": stream.created_at, "removed_head": removed[stream.id]}) + b"\n"
        yield from _versions(core, reader, stream, upto, (fork.fork_version or 0) if fork else 0, counts)
    yield orjson.dumps({"eventckpt": "end", "streams": len(todo), **counts}) + b"\n"


def _parent_name(core: Core, journal: Journal, fork: StreamRow | None) -> str | None:
    if fork is None:
        return None
    return core.lineage(journal, fork)[-2].name


def _versions(core: Core, reader: Reader, row: StreamRow, upto: int, after: int,
              counts: dict[str, int]) -> Iterator[bytes]:
    with reader() as journal:
        check = _Check(core, journal, row, after)
    for lo in range(after + 1, upto + 1, _BATCH):
        hi = min(upto, lo + _BATCH - 1)
        with reader() as journal:
            segments = [s for s in (Segment(s.tree_id, s.stream_id, max(s.lo, lo), s.hi)
                                    for s in core.segments(journal, row, hi)) if s.lo <= s.hi]
            vrows = journal.version_rows(segments)
            events: dict[int, list[Any]] = {}
            raw: dict[int, list[tuple[str, str, str | None]]] = {}
            for version, _, op, path, value in journal.tail(segments, lo - 1):
                events.setdefault(version, []).append([op, path, orjson.Fragment(value) if value is not None else None])
                raw.setdefault(version, []).append((op, path, value))
            ids = {v: journal.checkpoint_id_of(s, v) for s in segments for v in range(s.lo, s.hi + 1)}
            calls: dict[int, list[Any]] = {}
            for version, call_id, name, arguments, result, error, undoes in journal.tool_calls(segments, lo - 1):
                calls.setdefault(version, []).append([call_id, name, orjson.Fragment(arguments),
                                                      orjson.Fragment(result) if result is not None else None,
                                                      error, undoes])
        lines = [check(v, raw.get(v.version, []), orjson.dumps({
            "stream": row.name, "version": v.version, "created_at": v.created_at, "name": v.name, "auto": bool(v.auto),
            "metadata": orjson.Fragment(v.metadata) if v.metadata else None,
            "usage": orjson.Fragment(v.usage) if v.usage else None,
            "checkpoint_id": ids.get(v.version), "events": events.get(v.version, []), "checksum": v.checksum.hex(),
            **({"tool_calls": calls[v.version]} if v.version in calls else {}),
        }) + b"\n") for v in vrows]
        counts["versions"] += len(vrows)
        counts["events"] += sum(map(len, events.values()))
        yield from lines


class _Check:
    """Refuses to export damage it can see, so a backup that exits 0 can be imported: each version's checksum
    must chain as verify computes it (integrity.py), and its line must parse (stored JSON is embedded as
    is, so a damaged value would make a line import refuses). A CorruptStoreError names the version."""

    def __init__(self, core: Core, journal: Journal, row: StreamRow, after: int) -> None:
        """Read through `journal`, inside a read transaction of the export."""
        self.prev = ROOT  # the checksum the next version chains from: the last one kept at or before `after`
        chain = core.lineage(journal, row)
        self.names = {r.id: r.name for r in chain}
        if after:
            segments = core.segments(journal, row, after)
            kept = journal.version_numbers(segments)
            if kept:
                last = max(kept)
                self.prev = next(r.checksum for r in journal.version_rows(
                    [Segment(s.tree_id, s.stream_id, last, last) for s in segments if s.lo <= last <= s.hi]))

    def __call__(self, v: Any, events: list[tuple[str, str, str | None]], line: bytes) -> bytes:
        where = f"{self.names.get(v.stream_id, '?')}@{v.version}"
        if version_checksum(self.prev, v.version, v.created_at, v.name, v.auto, v.metadata, v.usage, events) != v.checksum:
            raise CorruptStoreError(f"{where}: the checksum does not match the version's row, events and the checksum"
                                    " before it (altered, missing or reordered); it is not exported or copied (eventckpt verify lists all damage)",
                                    code="corrupt")
        try:
            orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise CorruptStoreError(f"{where}: its stored JSON is damaged ({exc}); it is not exported or copied", code="corrupt") from None
        self.prev = v.checksum
        return line


def import_lines(store: Store, lines: Iterable[bytes | str], progress: Callable[[int], None] | None = None) -> list[str]:
    """See Store.import_lines. `progress(n)` is called with the size of every line read.

    The whole import is one write transaction (Core.batch): a bad line, an exception or a killed
    process leaves the file as it was, never a partial stream. Other writers wait for it."""
    return _import_batch(store, lines, progress, None)


def _import_batch(store: Store, lines: Iterable[bytes | str], progress: Callable[[int], None] | None,
                  finish: Callable[[Journal], None] | None) -> list[str]:
    """Import in one transaction; `finish(journal)` writes more in it before it commits (copy: the
    LangGraph rows)."""
    created: dict[str, int] = {}  # stream -> its last imported version (its fork version at first)
    # Versions are committed through a core of their own on the store's connections whose codec writes
    # values, metadata and the snapshots it makes exactly as they were exported: the Store's codec would
    # turn an enum or object whose class it was not given into plain data (and NaN may not be allowed).
    core = Core(store.core.backend, StoredCodec(), store.core.policy)
    try:
        with store.core.session(), core.batch() as journal:
            _import(core, lines, progress, created)
            if finish is not None:
                finish(journal)
    except BaseException:
        store.core.forget_all()  # it may have cached rows of streams the rollback took away
        raise
    return list(created)


def _import(core: Core, lines: Iterable[bytes | str], progress: Callable[[int], None] | None, created: dict[str, int]) -> None:
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
            seen["events"] += _import_version(core, record, number, created)
            seen["versions"] += 1
        else:
            _import_stream(core, record, number, created)
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
    """The line's created_at in the store's form (UTC, microseconds, Z; a time without an offset is UTC, as
    the store reads its own): a hand-written line may give another offset, and stored times are compared
    as text (expire, log's order)."""
    created_at = _field(record, "created_at", (str,), number)
    try:
        return format_time(parse_time(created_at))
    except (ValueError, OverflowError):
        raise InvalidArgumentError("line", number, f"created_at {created_at!r} is not an ISO-8601 time") from None


def _import_stream(core: Core, record: dict[str, Any], number: int, created: dict[str, int]) -> None:
    name = _field(record, "stream", (str,), number)
    parent = _field(record, "parent", (str, type(None)), number)
    created_at = _time(record, number)
    removed = _field(record, "removed_head", (int, type(None)), number)
    if removed is not None and removed < 1:
        raise InvalidArgumentError("line", number, f"removed_head {removed} is not a version number")
    with core.session() as journal:  # the import's batch: one transaction
        if journal.stream(name) is not None:
            raise StreamExistsError(name)
        if name in created:
            raise InvalidArgumentError("line", number, f"stream {name!r} comes twice")
        row = _create(journal, core, name, parent, record, number, created, created_at)
        if removed is not None:  # before its versions: the next version after the import is numbered above it
            journal.set_removed_head(row, removed)


def _create(journal: Journal, core: Core, name: str, parent: str | None, record: dict[str, Any], number: int,
            created: dict[str, int], created_at: str) -> StreamRow:
    if parent is None:
        row = journal.create_stream(check_new_name(name), created_at)
        created[name] = 0
    elif parent not in created:
        raise InvalidArgumentError("line", number, f"stream {name!r} forks from {parent!r}, which this import has not created")
    else:
        at = _field(record, "fork_version", (int,), number)
        found = journal.stream_and_head(parent)
        assert found is not None, "this import created it"
        above, head = found
        owner = core.owner(journal, above, at) if 0 < at <= head else None
        if not (at == 0 or owner is not None and journal.version_row(owner, at) is not None):
            raise InvalidArgumentError("line", number, f"stream {name!r} forks from version {at} of {parent!r},"
                                       " which the import has not given it")
        row = journal.create_stream(check_new_name(name), created_at, above, at)  # its time, not the import's
        created[name] = at
    return row


def _import_version(core: Core, record: dict[str, Any], number: int, created: dict[str, int]) -> int:
    """Import one version line; returns its number of events."""
    name = _field(record, "stream", (str,), number)
    if name not in created:
        raise InvalidArgumentError("line", number, f"a version of {name!r} comes before its stream line")
    version = _field(record, "version", (int,), number)
    if version <= created[name]:  # holes are fine (retention leaves them); going back is not
        raise InvalidArgumentError("line", number, f"version {version} of {name!r} does not come after version {created[name]}")
    codec = core.codec
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
    created_at = _time(record, number)
    commit(
        core, name, lambda head: recorded, True, lambda prev: usage,
        metadata=codec.decode(orjson.dumps(metadata)) if metadata is not None else None,
        name=_field(record, "name", (str, type(None)), number), auto=_field(record, "auto", (bool,), number),
        expected_version=None, at=version, checkpoint_id=_field(record, "checkpoint_id", (str, type(None)), number),
        created_at=created_at, tool_rows=tool_rows,
    )
    created[name] = version
    if checksum is not None:  # it chains over every version before: a missing one shows here
        with core.session() as journal:
            row = journal.stream(name)
            vrow = journal.version_row(row, version) if row else None
        if vrow is None or vrow.checksum.hex() != checksum:
            raise InvalidArgumentError("line", number, f"version {version} of {name!r} does not match its checksum"
                                       " (a damaged export, or a version missing before it)")
    return len(recorded)


@dataclass(frozen=True)
class Copied:
    """What `copy` moved: the streams (roots with their forks) and the versions."""

    streams: tuple[str, ...]
    versions: int


def copy(source: Store, target: Store, progress: Callable[[int, int], None] | None = None) -> Copied:
    """See eventckpt.copy.

    The whole copy is one transaction of the target, as an import is: every stream with its versions, and
    the LangGraph saver's rows (a thread's tree, pending writes, moved checkpoint ids) with them, so an
    error, a killed process or a dropped connection leaves the target as it was and the copy can simply
    be run again. (Copied a tree at a time, a copy cut short left trees whose threads the saver could not
    find, and names a re-run refused.) Streams are created in the source's order, so `streams()` and
    `summaries()` list them as the source does. Other writers of the target wait for it."""
    # One snapshot of the source for the whole copy (see export): held until the target's transaction ends.
    with source.core.session() as journal, journal.read():
        return _copy(source, journal, target, progress)


def _copy(source: Store, read: Journal, target: Store, progress: Callable[[int, int], None] | None) -> Copied:
    """The copy, reading the source through `read` (inside its read transaction; the target is another
    store, so its sessions are other journals)."""
    rows = read.streams_all()  # oldest first
    heads = {r.id: read.stream_and_head(r.name)[1] for r in rows}
    removed = {r.id: read.removed_head(r) or None for r in rows}
    total = read.totals()["versions"]
    namespaces = read.langgraph_namespaces()
    writes = {(t, ns): read.langgraph_all_writes(t, ns) for t, ns, _ in namespaces}
    moved = [m for r in rows if r.parent_id is None for m in read.langgraph_moved_ids(r.tree_id)]
    names = [r.name for r in rows]
    with target.core.session() as journal:
        taken = [n for n in names if journal.stream(n) is not None]
        if taken:  # refuse before anything is written
            raise StreamExistsError(taken[0])
        clash = [(t, ns) for t, ns, _ in namespaces if journal.langgraph_tree(t, ns) is not None]
        if clash:
            raise InvalidArgumentError("target", target.path, f"already has the LangGraph thread {clash[0][0]!r}")
    lines_total = total + len(rows) + 2  # a header, a line per stream and per version, an end
    done = 0

    def counted(lines: Iterator[bytes]) -> Iterator[bytes]:
        nonlocal done
        for line in lines:
            done += 1
            if progress:
                progress(done, lines_total)
            yield line

    def threads(journal: Journal) -> None:
        """The LangGraph rows, in the transaction of the streams they point at."""
        for thread_id, ns, root_name in namespaces:
            root = journal.stream(root_name)
            assert root is not None, "copied just before"
            journal.langgraph_set_tree(thread_id, ns, root.tree_id)
            for checkpoint_id, task_id, task_path, text in writes[(thread_id, ns)]:
                journal.langgraph_set_writes(thread_id, ns, checkpoint_id, task_id, task_path, text, replace=True)
        for name, version, checkpoint_id in moved:  # ids a later put of the same id took away
            row = journal.stream(name)
            assert row is not None, "copied just before"
            journal.langgraph_set_moved(row, version, checkpoint_id)

    todo = [(r, heads[r.id], r if r.parent_id is not None else None) for r in rows]
    copied = _import_batch(target, counted(_lines(source.core, lambda: nullcontext(read), todo, removed)), None, threads)
    return Copied(tuple(copied), done - len(rows) - 2)
