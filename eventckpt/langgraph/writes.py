"""LangGraph's pending writes: one row per (checkpoint, task) in `langgraph_writes`, stored once.

A row's `writes` is a JSON array of `[idx, channel, encoding, value]` by idx, where encoding is null for
a plain JSON value, `[serde type, form]` for a value the serde encoded (values.py), or a reference:

    [idx, channel, ["@", child checkpoint id, length, offset, count, single, encoding], null]

A task's write to a list channel (a node returning `{"messages": [message]}`) is usually exactly what
the next checkpoint appends to that channel. When the saver stores that checkpoint it verifies this
(the items it appends are the written ones, with equal stored forms) and replaces the written value by
the reference, in the same transaction: the message is then stored once, in the child's `append`
event, and read back from there. `length` is the list's length before the child appended to it,
`offset` and `count` where the write's items sit among the appended ones, `single` whether the write
was one item rather than a list of them, and `encoding` the items' encoding.

A reference needs its child checkpoint: the saver's maintenance (delete_for_runs, prune, an overwriting
put) turns references to checkpoints it removes back into values first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from langgraph.checkpoint.base import WRITES_IDX_MAP

from ..codec import Codec
from ..errors import CorruptStoreError
from ..ops import APPEND, EXTEND
from ..paths import to_text
from .layout import channel_key
from .replay import states_at
from .values import Values

if TYPE_CHECKING:
    from ..store import Store

MARK = "@"
_NOT_LIVE: Any = object()  # a write read back from the file: its live object is not known


@dataclass(slots=True)
class Write:
    """One stored write: its channel, encoding (or reference) and stored form, and, for a write this
    saver made in this process, the object the task wrote (`live`)."""

    channel: str
    encoding: Any
    stored: Any
    live: Any = _NOT_LIVE

    @property
    def is_live(self) -> bool:
        return self.live is not _NOT_LIVE


@dataclass(slots=True)
class TaskWrites:
    """What one task's row holds: its task path, its JSON text, and its writes by idx."""

    path: str
    text: str
    writes: dict[int, Write]


def encode_writes(values: Values, writes: Sequence[tuple[str, Any]]) -> dict[int, Write]:
    """A task's writes by idx (LangGraph's special channels have fixed negative idx)."""
    out = {}
    plain = values.codec.is_plain([value for _, value in writes])  # the common case, in one walk
    for idx, (channel, value) in enumerate(writes):
        stored, encoding = (value, None) if plain else values.encode(value, channel)
        out[WRITES_IDX_MAP.get(channel, idx)] = Write(channel, encoding, stored, value)
    return out


def replaces(writes: Sequence[tuple[str, Any]]) -> bool:
    """Whether these writes replace a task's stored ones (all of them special) instead of adding."""
    return all(channel in WRITES_IDX_MAP for channel, _ in writes)


def parse_row(codec: Codec, text: str) -> dict[int, Write]:
    return {entry[0]: Write(entry[1], entry[2], entry[3]) for entry in codec.decode(text)}


def row_text(codec: Codec, writes: dict[int, Write]) -> str:
    """[[idx, channel, encoding, value], ...] by idx, as JSON; plain values are written as they are."""
    if all(w.encoding is None or is_reference(w.encoding) for w in writes.values()):  # one orjson call
        return orjson.dumps([[idx, w.channel, w.encoding, w.stored] for idx, w in sorted(writes.items())]).decode()
    parts = []
    for idx in sorted(writes):
        w = writes[idx]
        value = orjson.dumps(w.stored) if w.encoding is None else codec.encode(w.stored)
        parts.append(b"[%d,%b,%b,%b]" % (idx, orjson.dumps(w.channel), orjson.dumps(w.encoding), value))
    return (b"[" + b",".join(parts) + b"]").decode()


def is_reference(encoding: Any) -> bool:
    return type(encoding) is list and len(encoding) == 7 and encoding[0] == MARK


def reference(child: str, length: int, offset: int, count: int, single: bool, encoding: Any) -> list[Any]:
    return [MARK, child, length, offset, count, int(single), encoding]


# -- reading references back ------------------------------------------------------------------------


def referred(state: dict[str, Any], channel: str, ref: list[Any]) -> list[Any] | None:
    """The stored items a reference names, taken from the referred checkpoint's state (None when the
    state does not hold them)."""
    _, _, length, offset, count, _, _ = ref
    key = channel_key(channel)
    whole = state.get(key) if key is not None else None
    if type(whole) is not list or len(whole) < length + offset + count:
        return None
    return whole[length + offset : length + offset + count]


def resolve(store: Store, values: Values, wanted: Iterable[tuple[str, str, str, list[Any]]], *,
            decode: bool = True) -> dict[int, Any]:
    """The values of references: `wanted` holds (thread_id, checkpoint_ns, channel, reference); the
    result maps id(reference) to the decoded value (with `decode=False`, to (stored form, encoding)).
    One query per namespace reads the children's events at the channels; a child whose events no
    longer show its own plain append (a file edited by hand) is restored instead."""
    by_ns: dict[tuple[str, str], list[tuple[str, list[Any]]]] = defaultdict(list)
    for thread_id, ns, channel, ref in wanted:
        by_ns[(thread_id, ns)].append((channel, ref))
    out: dict[int, Any] = {}
    for (thread_id, ns), refs in by_ns.items():
        paths = {to_text((channel_key(ch) or ch,)) for ch, _ in refs}
        with store.core.session() as journal:
            rows = journal.langgraph_child_events(thread_id, ns, sorted({r[1] for _, r in refs}), sorted(paths))
        where: dict[str, tuple[str, int]] = {}
        events: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for child, stream, version, op, path, value in rows:
            where[child] = (stream, version)
            if op is not None:
                events[(child, path)].append((op, value))
        for channel, ref in refs:
            items = _items(store, thread_id, ns, channel, ref, where, events)
            stored = items[0] if ref[5] else items
            out[id(ref)] = values.decode(stored, ref[6]) if decode else (stored, ref[6])
    return out


def _items(store: Store, thread_id: str, ns: str, channel: str, ref: list[Any], where: dict[str, tuple[str, int]],
           events: dict[tuple[str, str], list[tuple[str, str]]]) -> list[Any]:
    """The stored items a reference names."""
    _, child, length, offset, count, _, _ = ref
    key = channel_key(channel)
    if child not in where or key is None:
        raise CorruptStoreError(f"a pending write of thread {thread_id!r} (namespace {ns!r}) refers to checkpoint "
                                f"{child!r}, which the thread no longer holds")
    found = events.get((child, to_text((key,))), [])
    items: list[Any] | None = None
    if len(found) == 1 and found[0][0] in (APPEND, EXTEND):
        op, text = found[0]
        decoded = store.codec.decode(text)
        items = [decoded] if op == APPEND else decoded
        if type(items) is not list or len(items) < offset + count:
            items = None
        else:
            items = items[offset : offset + count]
    if items is None:  # not the child's own plain append: read the child's state
        stream, version = where[child]
        items = referred(states_at(store, stream, [version])[version], channel, ref)
        if items is None:
            raise CorruptStoreError(f"checkpoint {child!r} of thread {thread_id!r} lacks the items a pending "
                                    f"write refers to in {channel!r}")
    return items
