"""Restore: the state of a lineage at a version, from the nearest snapshot, shared keys and the tail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .codec import Codec, quiet_gc
from .errors import CorruptStoreError, SerializationError
from .journal import EventRow, Journal, Segment, StreamRow, segments_for
from .ops import APPEND, EXTEND, SET, apply
from .paths import child_ranges, from_text, to_text
from .snapshot import SnapshotPolicy, Tracker, parse_manifest


def materialize(
    journal: Journal, codec: Codec, chain: Sequence[StreamRow], version: int, policy: SnapshotPolicy,
    *, track: bool = True, upto: int | None = None,
) -> tuple[dict[str, Any], Tracker, list[EventRow]]:
    """The state at `version` of the lineage ending with `chain[-1]`, the snapshot tracker there, and
    the lineage's events after `version` through `upto` (read with the tail, for a caller that goes on
    to later versions; empty without `upto`).

    Cost: one snapshot, each shared key's appends before it (bulk-decoded, after the snapshot value it
    is based on, when it has one), and one tail query. The state's keys are in the order it gave them:
    a snapshot's manifest lists them in that order (its literal keys and the shared ones).
    `track=False` (a read that will not write after it) skips the snapshot bookkeeping a writer needs,
    which also lets runs of appends replay in bulk; the tracker returned is then only the snapshot's.
    """
    segments = segments_for(chain, version)
    later: list[EventRow] = []
    with journal.read(), quiet_gc():
        snap = journal.latest_snapshot(segments)
        if snap is None:
            state: dict[str, Any] = {}
            tracker = Tracker(policy)
            since = 0
        else:
            since, state_text, manifest_text = snap
            state = codec.decode(state_text)
            manifest = parse_manifest(manifest_text)
            tracker = Tracker.from_manifest(policy, since, manifest)
            shared = {key: base for key, (base, _) in manifest.items() if base != since}
            missing = [key for key, (base, _) in manifest.items() if base == since and key not in state]
            if missing or type(state) is not dict:
                raise CorruptStoreError(f"snapshot at version {since} lacks keys {missing!r} its manifest names")
            for key, base in shared.items():
                rebuild_key(journal, codec, segments, state, key, base, since, None, [])
            if list(state) != list(manifest):  # the state's order is the manifest's, not literal keys first
                state = {key: state[key] for key in manifest if key in state}
        observer = tracker if track else None
        # one tail query, folded in order: a key deleted and set again moves to the end among the others
        rest = []
        for row in journal.tail(segments_for(chain, upto) if upto is not None and upto > version else segments, since):
            (later if row[0] > version else rest).append(row)
        replay(codec, state, rest, observer)
    return state, tracker, later


def rebuild_key(
    journal: Journal,
    codec: Codec,
    segments: Sequence[Segment],
    state: dict[str, Any],
    key: str,
    base: Any,
    since: int,
    tracker: Tracker | None,
    after: list[EventRow] | None = None,
) -> None:
    """Rebuild one shared key: where it was last written (or nothing), its appends up to the snapshot in
    bulk, then its own events after the snapshot (`after`, when the caller already read them)."""
    path = to_text((key,))
    holder: dict[str, Any] = {}
    if type(base) is int:
        owner = next((s for s in segments if s.lo <= base <= s.hi), None)
        text = journal.snapshot_value(owner, base, key) if owner else None
        if text is None:
            raise CorruptStoreError(f"key {key!r} refers to a snapshot at version {base} that does not hold it")
        holder[key] = codec.decode(text)
        start = (base + 1, 0)
    else:
        start = base
    bulk = journal.key_values(segments, path, start, since)
    if bulk:
        items = appended_items(codec, key, bulk, creates=type(base) is not int)
        if key in holder:
            if type(holder[key]) is not list:
                raise CorruptStoreError(f"key {key!r} is appended to but its base is not a list")
            holder[key].extend(items)
        else:
            holder[key] = items
    if after is None:
        after = journal.key_events(segments, path, child_ranges(path), since)
    replay(codec, holder, after, tracker)
    if key in holder:
        state[key] = holder[key]


def appended_items(codec: Codec, key: str, rows: list[tuple[str, str]], creates: bool) -> list[Any]:
    """The items of a run of appends/extends (led by the creating set when `creates`), decoded at once.

    The manifest vouches that nothing else touched the key in this range; a row that disagrees means the
    file was damaged or edited.
    """
    first = 1 if creates and rows[0][0] == SET else 0  # a key created as a list, then grown item by item
    if all(op == APPEND for op, _ in rows[first:]):  # the common case
        parts = [value for _, value in rows[first:]]
        if first:
            parts[:0] = _items(key, rows[:1], creates)
    else:
        parts = _items(key, rows, creates)
    try:
        return codec.decode_many(parts)
    except (SerializationError, CorruptStoreError) as exc:
        raise CorruptStoreError(f"an appended value of {key!r} is damaged: {exc}") from None


def _items(key: str, rows: list[tuple[str, str]], creates: bool) -> list[str]:
    parts = []
    for i, (op, value) in enumerate(rows):
        if op == APPEND:
            parts.append(value)
        elif op == EXTEND or (op == SET and i == 0 and creates):
            if not (value.startswith("[") and value.endswith("]")):
                raise CorruptStoreError(f"{op} of {key!r} does not hold a JSON array")
            if value != "[]":
                parts.append(value[1:-1])
        else:
            raise CorruptStoreError(f"a {op} of {key!r} lies where its snapshot manifest allows only appends")
    return parts


def replay(codec: Codec, state: dict[str, Any], rows: list[EventRow], tracker: Tracker | None) -> None:
    """Fold journal rows onto `state`; runs of appends to one list are decoded and applied in bulk."""
    if not rows:
        return
    try:
        values = codec.decode_many([r[4] if r[4] is not None else "null" for r in rows])
    except (SerializationError, CorruptStoreError) as exc:
        raise CorruptStoreError(f"an event value is damaged: {exc}") from None
    i, n = 0, len(rows)
    try:
        while i < n:
            version, seq, op, text, raw = rows[i]
            path = from_text(text)
            if tracker is None and (op == APPEND or op == EXTEND) and len(path) == 1:
                j = i + 1
                while j < n and rows[j][3] == text and rows[j][2] == op:
                    j += 1
                if j - i > 1:
                    items = values[i:j] if op == APPEND else [x for chunk in values[i:j] for x in chunk]
                    apply(state, EXTEND, path, items)
                    i = j
                    continue
            apply(state, op, path, values[i])
            if tracker is not None:
                tracker.observe(version, seq, op, path, len(raw) if raw is not None else 0, values[i])
            i += 1
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise CorruptStoreError(f"event {op} {text} at version {version} does not fit the state: {exc!r}") from None
