"""The saver's cache of each thread's newest checkpoint, serialized so that a fresh copy is one C call.

`get_tuple` of a thread's newest checkpoint is what LangGraph calls at the start of every invoke. Its
channel values must be fresh objects (nothing returned may alias what the saver keeps), and building
them from the store's decoded state would walk every message in Python. The cache keeps each channel
as the bytes one parser call turns into a fresh value: msgpack, unpacked by ormsgpack for a plain JSON
value and by the serde for anything else (exactly what SqliteSaver hands the serde for its whole
checkpoint). A list keeps its items' bytes joined, so a put that appends to it extends the bytes instead
of serializing the list again.

A plain list whose items are all flat dicts (text keys, scalar values: a conversation of plain JSON
messages) is kept as the saver's own copies of the items instead: a fresh value is then one `dict.copy`
per item (C speed, and the scalars are shared, being immutable), which costs less than unpacking every
key and text again, and less to free. The copies are made when the blob is built or extended (what was
set or appended), never handed out; the list is packed into bytes once an item that is not flat joins it.

A list of serde (msgpack) items also keeps where each item's bytes end, so that an older checkpoint
whose list only grew since is restored from a prefix of these bytes (`marks`), as SqliteSaver hands the
serde its stored blob, instead of from the journal's JSON packed back into msgpack.

An entry is keyed by stream id and version: a version's state never changes and stream ids are never
reused, so an entry is never stale; at most `size` threads are kept (least recently used first out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import accumulate, chain
from typing import Any

import ormsgpack

from ..gcpause import quiet_gc
from .values import TREE_ENCODING, PackedPrefix, array_header, pack, packed_items

PLAIN, MSGPACK = "plain", "msgpack"
_SCALARS = frozenset((str, int, float, bool, type(None)))  # immutable: a copy of an item may share them
_TEXT = frozenset((str,))


@dataclass(slots=True)
class Blob:
    """One channel's value: `kind` is "plain" (msgpack of plain JSON data), or the serde type its bytes
    are for. `count` is not None when `body` holds a list's items (msgpack items back to back), or when
    `flat` does (copies of a plain list's flat dicts; `body` is then None)."""

    kind: str
    body: bytes | bytearray | None
    count: int | None = None
    size: int = -1  # the bytes of `body` that are this blob's (a later blob may have grown it)
    flat: list[dict[str, Any]] | None = None  # its first `count` items are this blob's (a later one may grow it)
    ends: list[int] | None = None  # a msgpack list's: where each item's bytes end in `body` (the first `count`)

    def __post_init__(self) -> None:
        if self.size < 0:
            self.size = len(self.body) if self.body is not None else 0

    def value(self, serde: Any) -> Any:
        if self.flat is not None:
            return self.head(self.count or 0)
        assert self.body is not None
        if self.count is None:
            data = bytes(self.body[: self.size]) if type(self.body) is bytearray else self.body
        else:
            # One copy of a list's bytes, not two (slice, then concatenate): a fresh buffer of hundreds of
            # kilobytes costs a page fault per 4 KiB once the allocator has given memory back. A put on
            # another thread may extend the bytearray meanwhile: then cut what it added.
            header = array_header(self.count)
            data = b"".join((header, self.body))
            if len(data) != len(header) + self.size:
                data = data[: len(header) + self.size]
        if self.kind == PLAIN:
            return ormsgpack.unpackb(data)
        return serde.loads_typed((self.kind, bytes(data)))

    def head(self, count: int) -> list[dict[str, Any]]:
        """Fresh copies of the first `count` items of a list kept as flat copies (count <= self.count). A put on
        another thread may append to the copies meanwhile: the slice is taken first."""
        assert self.flat is not None and self.count is not None and 0 <= count <= self.count
        return list(map(dict.copy, self.flat[:count]))

    def marks(self, count: int) -> list[PackedPrefix]:
        """The first `count` items of a msgpack list kept with their ends, as `count` marks of one
        PackedPrefix holding their bytes (count <= self.count)."""
        assert self.ends is not None and self.body is not None and self.count is not None and 0 <= count <= self.count
        if not count:
            return []
        return [PackedPrefix(bytes(self.body[: self.ends[count - 1]]), count)] * count

    def extended(self, items: bytes, count: int, values: list[Any] | None = None,
                 sizes: list[int] | None = None) -> Blob:
        """This list with `count` items (given as their joined bytes, and for a plain list as `values`, the
        items themselves; `sizes`: each item's bytes, for a msgpack list that keeps its ends) appended.
        They are appended in place, after this blob's own: it keeps reading what it held (a reader on
        another thread may still hold it), and the appending costs what was appended.
        ormsgpack.MsgpackEncodeError when flat items that must now be packed cannot be."""
        flat, length = self.flat, self.count or 0
        if flat is not None:
            added = flat_copies(values) if values is not None and len(values) == count else None
            if added is not None:
                return Blob(self.kind, None, length + count, flat=grown(flat, length, added))
            body = bytearray(packed_items(ormsgpack.packb(flat[:length])))  # an item that is not flat joins
        else:
            assert self.body is not None
            body = self.body if type(self.body) is bytearray and len(self.body) == self.size else bytearray(
                self.body[: self.size])
        ends = None
        if (self.ends is not None and sizes is not None and len(sizes) == count and sum(sizes) == len(items)
                and len(self.ends) >= length and self.size == (self.ends[length - 1] if length else 0)):
            ends = grown(self.ends, length, list(accumulate(sizes, initial=self.size))[1:])
        body += items
        return Blob(self.kind, body, length + count, ends=ends)


def blob_of(stored: Any, encoding: list[str] | None, data: bytes | None = None) -> Blob:
    """The blob of a value as the state stores it (`data`: its serde bytes, when already known).
    ormsgpack.MsgpackEncodeError when a plain value cannot be packed (a lone surrogate)."""
    if encoding is None:
        if type(stored) is list:
            flat = flat_copies(stored)
            if flat is not None:
                return Blob(PLAIN, None, len(stored), flat=flat)
            return Blob(PLAIN, packed_items(ormsgpack.packb(stored)), len(stored))
        return Blob(PLAIN, ormsgpack.packb(stored))
    if encoding == TREE_ENCODING and type(stored) is list:
        parts = list(map(pack, stored))
        return Blob(MSGPACK, b"".join(parts), len(stored), ends=list(accumulate(map(len, parts))))
    return Blob(encoding[0], data if data is not None else (pack(stored) if encoding == TREE_ENCODING else stored))


def flat_copies(items: list[Any]) -> list[dict[str, Any]] | None:
    """Copies of the items when every one is a dict of text keys and scalar values (a few C passes over
    them), else None."""
    if set(map(type, items)) - {dict}:
        return None
    if not set(map(type, chain.from_iterable(map(dict.values, items)))) <= _SCALARS:
        return None
    if not set(map(type, chain.from_iterable(items))) <= _TEXT:
        return None
    return list(map(dict.copy, items))


def grown(old: Any, length: int, items: list[Any]) -> list[Any] | None:
    """The saver's copy of a list that had `length` items and got `items` appended: `old` extended in place
    when it holds exactly those `length` (O(change); a Channel or Blob holding it reads only its own first
    items), else a new copy (None when the old items are unknown)."""
    if type(old) is not list or len(old) < length:
        return None
    copy = old if len(old) == length else old[:length]
    copy += items
    return copy


@dataclass(slots=True)
class Entry:
    """The newest checkpoint this saver knows of one stream: its version and its channels' blobs."""

    version: int
    channels: dict[str, Blob] = field(default_factory=dict)

    def values(self, serde: Any) -> dict[str, Any]:
        with quiet_gc():  # thousands of fresh objects; the collector would rescan them as they come
            return {name: blob.value(serde) for name, blob in self.channels.items()}


class Heads:
    """At most `size` entries, by stream id (thread-safe)."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._entries: OrderedDict[int, Entry] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, stream_id: int, version: int) -> Entry | None:
        with self._lock:
            entry = self._entries.get(stream_id)
            if entry is None or entry.version != version:
                return None
            self._entries.move_to_end(stream_id)
            return entry

    def newest(self, stream_id: int) -> Entry | None:
        """The stream's entry, whichever version it is of (not counted as a use). It may be of a version
        that a read which began before it was cached does not see."""
        with self._lock:
            return self._entries.get(stream_id)

    def put(self, stream_id: int, entry: Entry) -> None:
        with self._lock:
            self._entries[stream_id] = entry
            self._entries.move_to_end(stream_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def drop(self, stream_id: int) -> None:
        with self._lock:
            self._entries.pop(stream_id, None)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


def entry_of(version: int, channels: Mapping[str, tuple[Any, list[str] | None]]) -> Entry | None:
    """An entry built from a decoded state's channels: {name: (stored value, encoding)}; None when a value
    cannot be packed."""
    try:
        return Entry(version, {name: blob_of(stored, encoding) for name, (stored, encoding) in channels.items()})
    except (ormsgpack.MsgpackEncodeError, TypeError):
        return None
