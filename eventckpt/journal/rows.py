"""The rows the journal takes and returns, the signals its writes raise, and lineage segments.

Every row that belongs to a stream tree can name it: `StreamRow` and `Segment` carry `tree_id` and
`stream_id`, so an engine that distributes tables by tree (PostgreSQL) can route every statement to one
tree. Engines ignore what they do not need."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import orjson

# -- rows -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamRow:
    id: int
    name: str
    parent_id: int | None
    fork_version: int | None
    root_id: int | None
    created_at: str

    @property
    def tree_id(self) -> int:
        return self.root_id if self.root_id is not None else self.id

    @property
    def stream_id(self) -> int:
        return self.id


class VersionRow(NamedTuple):  # a tuple: every commit builds one, at a fifth of a frozen dataclass's cost
    stream_id: int
    version: int
    created_at: str
    name: str | None
    auto: int
    metadata: str | None
    usage: str | None
    event_count: int
    event_bytes: int
    checksum: bytes


@dataclass(frozen=True, slots=True)
class Segment:
    """Versions lo..hi of a lineage, owned by one stream of tree `tree_id`."""

    tree_id: int
    stream_id: int
    lo: int
    hi: int


class StreamKey(NamedTuple):
    """A stream known by its ids only (a StreamRef)."""

    tree_id: int
    stream_id: int


class StreamRef(Protocol):
    """What names a stream's rows: its tree and its id (a StreamRow or a Segment)."""

    @property
    def tree_id(self) -> int: ...

    @property
    def stream_id(self) -> int: ...


@dataclass(slots=True)
class Commit:
    """One version, whole: what `Journal.append` writes atomically.

    `events` are (op, JSON path, JSON bytes or None); `snapshot` is (state JSON, manifest JSON) when the
    version triggers one; `generation` is the history generation the writer's head state was built
    under: the engine refuses the commit (HistoryRewritten) when retention rewrote the tree since."""

    stream: StreamRow
    row: VersionRow
    events: Sequence[tuple[str, str, bytes | None]]
    generation: int
    checkpoint_id: str | None = None
    tool_rows: Sequence[Sequence[Any]] = ()
    snapshot: tuple[str, str] | None = None


EventRow = tuple[int, int, str, str, "str | None"]  # version, seq, op, path, value


class LogRow(NamedTuple):
    stream_id: int
    version: int
    created_at: str
    name: str | None
    auto: int
    metadata: str | None
    usage: str | None
    checkpoint_id: str | None
    tree_id: int = 0  # set by search_rows (log_rows' caller knows the tree)


class HistoryRow(NamedTuple):
    stream_id: int
    version: int
    seq: int
    op: str
    path: str
    value: str | None
    created_at: str


class SummaryRow(NamedTuple):
    """A stream with its fork origin's and tree root's names, and its own newest version row (head,
    created_at, usage; None when the stream has no version of its own)."""

    stream: StreamRow
    parent_name: str | None
    root_name: str
    head: int | None
    head_created_at: str | None
    head_usage: str | None


@dataclass(frozen=True, slots=True)
class MetaTerm:
    """One test of a metadata filter's value taken apart: the metadata at `parts` (`path`, its SQLite
    JSON path) is an object of `size` keys (kind "object"), an array of `size` items ("array"), or
    equals the JSON text `json` ("value")."""

    path: str
    parts: tuple[str | int, ...]
    kind: str
    size: int = 0
    json: str = ""


@dataclass(frozen=True, slots=True)
class MetaFilter:
    """metadata[key] == value: `key` the top-level key, `path` its JSON path, `json` the value's JSON
    text, `indexed` the (key, value) to look up in metadata_index when the value is a str or an int.
    `terms`, when not empty, replace the comparison of the whole JSON text: the value holds an object
    of several keys, whose stored key order must not matter (two dicts that differ only in key order
    are equal everywhere else in eventckpt), so it is compared key by key."""

    key: str
    path: str
    json: str
    indexed: tuple[str, Any] | None
    terms: tuple[MetaTerm, ...] = ()


class LangGraphRow(NamedTuple):
    """A LangGraph checkpoint as the saver lists it: where its state lives and what LangGraph adds (a
    tuple: a listing builds one per checkpoint, at a fifth of a frozen dataclass's cost)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    stream: str  # the name of the stream holding its version
    version: int
    metadata: str | None
    parent_id: str | None  # the parent the put named, else the checkpoint id of the lineage's previous version
    writes: str | None  # JSON array of [task id, [[idx, channel, encoding, value], ...]] in writes order
    stream_id: int
    created_at: str
    child_id: str | None = None  # asked for with `child=True`: the id of the stream's next version, if any


class VersionTaken(Exception):
    """Signal, not an error for callers: another writer created this version first (the primary key
    refused ours), or the stream is gone; nothing of the commit was written."""


class CheckpointIdTaken(Exception):
    """Signal: the checkpoint id is already used in the tree; nothing of the commit was written."""


class HistoryRewritten(Exception):
    """Signal: retention rewrote the tree's history since the writer's head state was built (its
    generation moved); nothing of the commit was written."""


def clip(segments: Sequence[Segment], after: int, upto: int) -> Iterator[tuple[Segment, int, int]]:
    """(segment, lo, hi) for the parts of the segments within versions (after, upto]."""
    for seg in segments:
        lo, hi = max(seg.lo, after + 1), min(seg.hi, upto)
        if lo <= hi:
            yield seg, lo, hi


def segments_for(chain: Sequence[StreamRow], upto: int) -> list[Segment]:
    """The lineage of the last stream in `chain` (root first) as segments, clipped to versions <= upto.

    Walking up from the leaf, each ancestor contributes its own versions only up to the lowest fork
    point below it: a fork of a fork may branch below the middle stream's own versions.
    """
    out = []
    limit = upto
    for row in reversed(chain):
        lo = (row.fork_version or 0) + 1
        if lo <= limit:
            out.append(Segment(row.tree_id, row.id, lo, limit))
        if row.fork_version is not None:
            limit = min(limit, row.fork_version)
    out.reverse()
    return out
