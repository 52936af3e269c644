"""Parts of a state at a version, without restoring the rest: its top-level keys, the value at one
path, the length of a list, and a window of a long list's items.

A restore costs O(state). Someone who looks at one key, or at the newest messages of a conversation of
100k, should not pay that:

- the top-level keys come from the nearest snapshot's manifest and the top-level events after it (a
  key is only ever created and removed by an event at its own top-level path);
- a value is read as diff reads one (diffing.value_at): from its last event when that set it, else from
  the nearest snapshot and its top-level key's own events;
- a list's length is counted on the path index without reading its items (diffing.list_length);
- a window of items of a top-level list that was only appended to since it was last set (the common
  shape of a conversation) reads the items of the window alone: the last set (or delete) of the list is
  its base, and item i past the base is the i-th append after it, found on the covering path index.
  Any other shape (extends, truncations, edited or deleted items) reads the key and slices it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .diffing import MISSING, descend, key_at, list_length, value_at
from .errors import InvalidArgumentError, PathError, VersionNotFoundError
from .journal import Journal, Segment
from .ops import APPEND, DELETE, SET
from .paths import Path, from_text, normalize, to_text
from .snapshot import parse_manifest

if TYPE_CHECKING:
    from .codec import Codec
    from .core import Core


def keys(core: Core, task_id: str, version: int | None) -> list[str]:
    """See CheckpointStore.keys."""
    with core.session() as journal, journal.read():
        segments, version = _lineage(core, task_id, journal, version)
        snap = journal.latest_snapshot(segments)
        since, present = 0, {}
        if snap is not None:
            since, present = snap[0], dict.fromkeys(parse_manifest(snap[2]))
        for _, _, op, text, _ in journal.tail(segments, since):
            path = from_text(text)
            if len(path) == 1:
                if op == DELETE:
                    present.pop(path[0], None)
                else:
                    present.setdefault(path[0], None)
        return list(present)


def length(core: Core, task_id: str, path: Any, version: int | None) -> int | None:
    """See CheckpointStore.length."""
    parts = normalize(path)
    with core.session() as journal, journal.read():
        segments, version = _lineage(core, task_id, journal, version)
        if any(type(key) is int and key < 0 for key in parts):  # counted from the end: read the value
            found = _read(journal, core.codec, segments, parts, version, None, None)
            return len(found) if type(found) is list else None
        return list_length(journal, core.codec, segments, parts, version)


def value(core: Core, task_id: str, path: Any, version: int | None, start: int | None, stop: int | None) -> Any:
    """See CheckpointStore.value."""
    parts = normalize(path)
    if start is not None and (type(start) is not int or (start < 0 and stop is not None)):
        raise InvalidArgumentError("start", start, "must be None or an int (negative: from the end, with no stop)")
    if stop is not None and (type(stop) is not int or stop < 0):
        raise InvalidArgumentError("stop", stop, "must be None or an int >= 0")
    sliced = start is not None or stop is not None
    codec = core.codec
    with core.session() as journal, journal.read():
        segments, version = _lineage(core, task_id, journal, version)
        found = _read(journal, codec, segments, parts, version, start, stop)
    if found is MISSING:
        raise PathError(parts, f"no value there at version {version} of {task_id!r}")
    if sliced and (len(parts) > 1 or type(found) is not list):
        if type(found) is not list:
            raise PathError(parts, f"start and stop need a list there, not a {type(found).__name__}")
        found = found[start:stop]
    return found


def _read(journal: Journal, codec: Codec, segments: list[Segment], parts: Path, version: int, start: int | None,
          stop: int | None) -> Any:
    """The value at `parts` (only items start..stop of a top-level list when one is given; MISSING when
    absent): through a window of a top-level list when the path lies in one, else as diff reads it."""
    if len(parts) == 1 and (start is not None or stop is not None):
        items = _window(journal, codec, segments, parts[0], version, start or 0, stop)
        if items is not None:
            return items
    elif len(parts) >= 2 and type(parts[1]) is int:  # inside an item of a top-level list
        items = _window(journal, codec, segments, parts[0], version, parts[1], parts[1] + 1)
        if items is not None:  # a negative index gets the last -index items, fewer when the list is shorter
            return descend(items[0], parts[2:]) if len(items) == max(-parts[1], 1) else MISSING
    negative = next((i for i, key in enumerate(parts) if type(key) is int and key < 0), None)
    if negative is not None:  # counted from the end, as in a transaction: read the list, then index it
        return descend(_read(journal, codec, segments, parts[:negative], version, None, None), parts[negative:])
    found = value_at(journal, codec, segments, parts, version) if len(parts) > 1 else \
        key_at(journal, codec, segments, parts[0], version)
    if type(found) is list and len(parts) == 1 and (start is not None or stop is not None):
        return found[start:stop]
    return found


def _lineage(core: Core, task_id: str, journal: Journal, version: int | None) -> tuple[list[Segment], int]:
    """The lineage's segments up to `version` (the head when None) and that version; raises when the
    stream or the version does not exist (version 0, a stream's state before its first version, names no
    checkpoint: VersionNotFoundError, as for state())."""
    row, head = core.existing(journal, task_id)
    if version is None:
        version = head
    if type(version) is not int:
        raise InvalidArgumentError("version", version, "must be None or an int")
    if not 1 <= version <= head:
        raise VersionNotFoundError(task_id, version, head)
    segments = core.segments(journal, row, version)
    if not any(s.lo <= version <= s.hi and journal.version_row(s, version) for s in segments):
        raise VersionNotFoundError(task_id, version, head)
    return segments, version


def _window(journal: Journal, codec: Codec, segments: list[Segment], key: str, version: int, start: int,
            stop: int | None) -> list[Any] | None:
    """Items start..stop of the list at top-level `key` at `version` (a negative start: the last -start
    items), reading only those, when the list was only appended to since its last set or delete; [] past
    its end; None for any other shape (or no list there), which the caller reads in full."""
    text = to_text((key,))
    newest = journal.newest_event(segments, text, version)
    reset = journal.newest_event(segments, text, version, reset=True)  # the last set, delete or truncate
    if newest is None or (newest[2] != APPEND and (reset is None or newest[:2] != reset[:2])):
        return None  # absent, or last changed otherwise (an extend, a set of something else)
    if reset is None:
        base: Any = []  # created by an append
        after = (0, -1)
    elif reset[2] == SET:
        base, after = codec.decode(reset[4]), (reset[0], reset[1])
    elif reset[2] == DELETE and newest[2] == APPEND:
        base, after = [], (reset[0], reset[1])
    else:
        return None  # truncated, or deleted for good
    if type(base) is not list or journal.touched_below(segments, text, after, version):
        return None  # items edited or deleted since
    if start < 0:
        values = journal.appended(segments, text, after, version, start, -start)
        if values is None:
            return None
        missing = -start - len(values)
        return (base[max(len(base) - missing, 0):] if missing else []) + codec.decode_many(values)
    items = base[start:stop]
    if stop is None or stop > len(base):
        skip = max(start - len(base), 0)
        values = journal.appended(segments, text, after, version, skip, -1 if stop is None else max(stop - len(base) - skip, 0))
        if values is None:
            return None  # extends since: an event is not one item
        items += codec.decode_many(values)
    return items
