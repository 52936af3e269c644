"""The saver's cache of each thread's newest checkpoint, serialized so that a fresh copy is one C call.

`get_tuple` of a thread's newest checkpoint is what LangGraph calls at the start of every invoke. Its
channel values must be fresh objects (nothing returned may alias what the saver keeps), and building
them from the store's decoded state would walk every message in Python. The cache keeps each channel
as the bytes one parser call turns into a fresh value: plain JSON for orjson, the serde's msgpack for
the serde (exactly what SqliteSaver hands the serde for its whole checkpoint). A list keeps its items'
bytes joined, so a put that appends to it extends the bytes instead of serializing the list again.

An entry is keyed by stream id and version: a version's state never changes and stream ids are never
reused, so an entry is never stale; at most `size` threads are kept (least recently used first out).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..codec import quiet_gc
from .values import TREE_ENCODING, array_header, pack

JSON, MSGPACK = "json", "msgpack"


@dataclass(slots=True)
class Blob:
    """One channel's value: `kind` is "json", or the serde type its bytes are for. `count` is not None
    when `body` holds a list's items (JSON items joined by commas, or msgpack items back to back)."""

    kind: str
    body: bytes | bytearray
    count: int | None = None

    def value(self, serde: Any) -> Any:
        if self.kind == JSON:
            return orjson.loads(self.body if self.count is None else b"[" + self.body + b"]")
        if self.count is None:
            return serde.loads_typed((self.kind, bytes(self.body)))
        return serde.loads_typed((MSGPACK, array_header(self.count) + self.body))

    def extended(self, items: bytes, count: int) -> Blob:
        """This list with `count` items (given as their joined bytes) appended. The body is grown in
        place: the entry holding this blob is replaced by the one holding the result."""
        body = self.body if type(self.body) is bytearray else bytearray(self.body)
        if self.kind == JSON and self.count and count:
            body += b","
        body += items
        return Blob(self.kind, body, (self.count or 0) + count)


def blob_of(stored: Any, encoding: list[str] | None, data: bytes | None = None) -> Blob:
    """The blob of a value as the state stores it (`data`: its serde bytes, when already known)."""
    if encoding is None:
        if type(stored) is list:
            return Blob(JSON, orjson.dumps(stored)[1:-1], len(stored))
        return Blob(JSON, orjson.dumps(stored))
    if encoding == TREE_ENCODING and type(stored) is list:
        return Blob(MSGPACK, b"".join(map(pack, stored)), len(stored))
    return Blob(encoding[0], data if data is not None else (pack(stored) if encoding == TREE_ENCODING else stored))


@dataclass(slots=True)
class Entry:
    """The newest checkpoint this saver knows of one stream: its version and its channels' blobs."""

    version: int
    channels: dict[str, Blob] = field(default_factory=dict)

    def values(self, serde: Any) -> dict[str, Any]:
        with quiet_gc():  # thousands of fresh objects; the collector would rescan them as they come
            return {name: blob.value(serde) for name, blob in self.channels.items()}


class Heads:
    """At most `size` entries, by stream id."""

    def __init__(self, size: int = 64) -> None:
        self.size = size
        self._entries: OrderedDict[int, Entry] = OrderedDict()

    def get(self, stream_id: int, version: int) -> Entry | None:
        entry = self._entries.get(stream_id)
        if entry is None or entry.version != version:
            return None
        self._entries.move_to_end(stream_id)
        return entry

    def put(self, stream_id: int, entry: Entry) -> None:
        self._entries[stream_id] = entry
        self._entries.move_to_end(stream_id)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def drop(self, stream_id: int) -> None:
        self._entries.pop(stream_id, None)

    def clear(self) -> None:
        self._entries.clear()


def entry_of(version: int, channels: Mapping[str, tuple[Any, list[str] | None]]) -> Entry:
    """An entry built from a decoded state's channels: {name: (stored value, encoding)}."""
    return Entry(version, {name: blob_of(stored, encoding) for name, (stored, encoding) in channels.items()})
