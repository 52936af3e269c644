"""The rows the journal returns, its private conflict signals, and lineage segments."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

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


@dataclass(frozen=True, slots=True)
class VersionRow:
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
    """Versions lo..hi of a lineage, owned by one stream."""

    stream_id: int
    lo: int
    hi: int


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
class MetaFilter:
    """metadata[key] == value: `path` is the key's JSON path, `json` the value's JSON text, `indexed` the
    (key, value) to look up in metadata_index when the value is a str or an int."""

    path: str
    json: str
    indexed: tuple[str, Any] | None

STREAM_COLS = "id, name, parent_id, fork_version, root_id, created_at"
VERSION_COLS = "stream_id, version, created_at, name, auto, metadata, usage, event_count, event_bytes, checksum"
INSERT_STREAM = (
    "INSERT INTO streams (name, parent_id, fork_version, root_id, created_at) VALUES (?, ?, ?, ?, ?)"
    " RETURNING " + STREAM_COLS
)
INSERT_VERSION = "INSERT INTO versions (" + VERSION_COLS + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
S_COLS = ", ".join("s." + c for c in STREAM_COLS.split(", "))

class _VersionTaken(Exception):
    """Internal: another writer created this version first (the primary key refused ours)."""


class _CheckpointIdTaken(Exception):
    """Internal: the checkpoint id is already used in the tree."""


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
            out.append(Segment(row.id, lo, limit))
        if row.fork_version is not None:
            limit = min(limit, row.fork_version)
    out.reverse()
    return out


def json_list(values: Sequence[Any]) -> str:
    """A JSON array of ints/strs, bound as one parameter (for `IN (SELECT value FROM json_each(?))`)."""
    return orjson.dumps(list(values)).decode()
