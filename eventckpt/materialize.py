"""Restore: the state of a lineage at a version, from the nearest snapshot, shared keys and the tail (and
lists that a later version holds and that only grew since, as prefixes of that)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .codec import Codec
from .errors import CorruptStoreError, SerializationError
from .gcpause import quiet_gc
from .journal import EventRow, Journal, Segment, StreamRow, segments_for
from .ops import APPEND, DELETE, EXTEND, SET, apply
from .paths import child_ranges, from_text, to_text
from .snapshot import SnapshotPolicy, Tracker, parse_manifest


def materialize(
    journal: Journal, codec: Codec, chain: Sequence[StreamRow], version: int, policy: SnapshotPolicy,
    *, track: bool = True, upto: int | None = None, lists: Mapping[str, LaterList] | None = None,
) -> tuple[dict[str, Any], Tracker, list[EventRow]]:
    """The state at `version` of the lineage ending with `chain[-1]`, the snapshot tracker there, and
    the lineage's events after `version` through `upto` (read with the tail, for a caller that goes on
    to later versions; empty without `upto`).

    Cost: one snapshot, each shared key's appends before it (bulk-decoded, after the snapshot value it
    is based on, when it has one), and one tail query. The state's keys are in the order it gave them:
    a snapshot's manifest lists them in that order (its literal keys and the shared ones).
    `track=False` (a read that will not write after it) skips the snapshot bookkeeping a writer needs,
    which also lets runs of appends replay in bulk; the tracker returned is then only the snapshot's.

    `lists` (with track=False): top-level lists as a later version of the lineage holds them. Such a
    list that only grew since `version` is taken as a prefix of the later one (`later_prefixes`),
    neither rebuilt nor replayed, when the snapshot names its key and the tail does not delete the key
    before `version` (its place among the keys is then the snapshot's, as a replay would leave it).
    """
    segments = segments_for(chain, version)
    later: list[EventRow] = []
    with journal.read(), quiet_gc():
        snap = journal.latest_snapshot(segments)
        since = snap[0] if snap is not None else 0
        # one tail query, folded in order: a key deleted and set again moves to the end among the others
        rest = []
        for row in journal.tail(segments_for(chain, upto) if upto is not None and upto > version else segments, since):
            (later if row[0] > version else rest).append(row)
        if snap is None:
            state: dict[str, Any] = {}
            tracker = Tracker(policy)
        else:
            _, state_text, manifest_text = snap
            state = codec.decode(state_text)
            manifest = parse_manifest(manifest_text)
            tracker = Tracker.from_manifest(policy, since, manifest)
            shared = {key: base for key, (base, _) in manifest.items() if base != since}
            missing = [key for key, (base, _) in manifest.items() if base == since and key not in state]
            if missing or type(state) is not dict:
                raise CorruptStoreError(f"snapshot at version {since} lacks keys {missing!r} its manifest names")
            taken = _prefixes(journal, chain, version, lists, manifest, rest) if lists and not track else {}
            if taken:
                rest = [row for row in rest if from_text(row[3])[0] not in taken]
            for key, base in shared.items():
                if key not in taken:
                    rebuild_key(journal, codec, segments, state, key, base, since, None, [])
            state.update(taken)
            if list(state) != list(manifest):  # the state's order is the manifest's, not literal keys first
                state = {key: state[key] for key in manifest if key in state}
        replay(codec, state, rest, tracker if track else None)
    return state, tracker, later


def _prefixes(journal: Journal, chain: Sequence[StreamRow], version: int, lists: Mapping[str, LaterList],
              manifest: Mapping[str, Any], rest: list[EventRow]) -> dict[str, list[Any]]:
    """The later lists' prefixes at `version` for the keys the snapshot names and the tail does not delete,
    of later versions this read sees (a version committed since the read began, by another connection,
    would add appends the read cannot count)."""
    deleted = {path[0] for path in (from_text(row[3]) for row in rest if row[2] == DELETE) if len(path) == 1}
    wanted = {key: later for key, later in lists.items() if key in manifest and key not in deleted}
    if not wanted:
        return {}
    reach = segments_for(chain, max(later.version for later in wanted.values()))
    wanted = {key: later for key, later in wanted.items() if _sees(journal, reach, later.version)}
    return {key: later.take(count) for key, (later, count) in later_prefixes(journal, reach, version, wanted).items()}


def _sees(journal: Journal, segments: Sequence[Segment], version: int) -> bool:
    """Whether this read sees `version` of the lineage."""
    owner = next((seg for seg in segments if seg.lo <= version <= seg.hi), None)
    return owner is not None and journal.version_row(owner, version) is not None


@dataclass(frozen=True, slots=True)
class LaterList:
    """A top-level list as a later version of the same stream holds it: its `length` there, and `take(n)`,
    a fresh list of its first n items."""

    version: int
    length: int
    take: Callable[[int], list[Any]]


def later_prefixes(journal: Journal, segments: Sequence[Segment], version: int,
                   lists: Mapping[str, LaterList]) -> dict[str, tuple[LaterList, int]]:
    """Those `lists` that only grew since `version` (nothing but appends and extends at the key itself
    after `version` through the later version), each with its length at `version`: the list there is the
    later list's first that many items. Counted in the indexes, without reading any item; `segments` reach
    the later versions, which the caller has checked this read sees. A list that would be empty is left
    out: it may as well not have existed at `version` (appends create the list they extend)."""
    out = {}
    for key, later in lists.items():
        if later.version < version:
            continue
        grown = journal.only_grown(segments, to_text((key,)), version, later.version)
        if grown is not None and 0 < later.length - grown:
            out[key] = (later, later.length - grown)
    return out


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
