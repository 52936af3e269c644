"""diff: what changed between two versions, answered from the events between them.

The two versions' lineages meet at a common version c (the older version itself when both lie on one
lineage, the fork point across a fork and its parent, 0 for unrelated streams). Only the paths touched
by events after c on either side can differ, so the diff is built from those paths alone (one SQL
query per lineage segment lists them with their last event), never by materializing both states:

- a touched path whose ancestors were not touched is a root; each root is compared on its own;
- a root that is a list only appended to since c (the common case: a conversation) is answered by
  counting: its length at c comes from the path index without reading the items, and the appended
  items become `added` paths whose values are read on first access;
- any other root is read at each version from its last event when that event set it, else rebuilt
  from the nearest snapshot and the key's own events (materialize's per-key path), and the two values
  are compared structurally: dicts by key, lists by position, everything else by type and value.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from .checkpoint import Checkpoint
from .errors import InvalidArgumentError, VersionNotFoundError
from .gcpause import quiet_gc
from .journal import EventRow, Journal, Segment
from .materialize import appended_items, rebuild_key, replay
from .ops import APPEND, DELETE, EXTEND, SET, TRUNCATE, same
from .paths import Path, addressable, child_ranges, from_text, to_text
from .snapshot import parse_manifest
from .states import state_dict

if TYPE_CHECKING:
    from .codec import Codec
    from .core import Core

ADDED, REMOVED, CHANGED = "added", "removed", "changed"


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class VersionRef(NamedTuple):
    """One side of a diff: a stream and a version of its lineage."""

    task_id: str
    version: int


class Change:
    """One path that differs: `kind` is "added" (only `new`), "removed" (only `old`) or "changed".

    Items appended to a list over a long range are read on first access of `old`/`new`, all at once.
    """

    __slots__ = ("kind", "path", "_old", "_new")

    def __init__(self, kind: str, path: Path, old: Any = MISSING, new: Any = MISSING) -> None:
        self.kind = kind
        self.path = path
        self._old = old
        self._new = new

    @property
    def old(self) -> Any:
        return None if self._old is MISSING else self._old

    @property
    def new(self) -> Any:
        return None if self._new is MISSING else self._new

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Change):
            return NotImplemented
        return (self.kind, self.path) == (other.kind, other.path) and same(self.old, other.old) and same(self.new, other.new)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = {ADDED: f"new={self.new!r}", REMOVED: f"old={self.old!r}"}.get(self.kind, f"old={self.old!r}, new={self.new!r}")
        return f"Change({self.kind}, {to_text(self.path) if self.path else '$'}, {shown})"


@dataclass(frozen=True)
class Diff:
    """The changes from `old` to `new` (`new` is None when compared with a live state), by path."""

    old: VersionRef
    new: VersionRef | None
    changes: tuple[Change, ...]

    @property
    def added(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == ADDED)

    @property
    def removed(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == REMOVED)

    @property
    def changed(self) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.kind == CHANGED)

    def __iter__(self) -> Iterator[Change]:
        return iter(self.changes)

    def __len__(self) -> int:
        return len(self.changes)

    def __bool__(self) -> bool:
        return bool(self.changes)


# -- entry point ------------------------------------------------------------------------------------


def diff(core: Core, task_id: str, a: Any, b: Any = None, *, live: Any = None) -> Diff:
    """See CheckpointStore.diff."""
    with core.session() as journal, journal.read():
        side_a = _Side.resolve(core, journal, task_id, a, "a")
        if live is not None:
            if b is not None:
                raise InvalidArgumentError("b", b, "compare with a version (b) or a live state (live=), not both")
            old = core.state_at(journal, side_a.row, side_a.version)
            new = {key: core.codec.encode_copy(value)[1] for key, value in state_dict(live).items()}
            changes: list[Change] = []
            for key in {**old, **new}:  # top-level keys are always compared one by one, "$" or not
                _compare((key,), old.get(key, MISSING), new.get(key, MISSING), changes)
            return Diff(side_a.ref, None, tuple(changes))
        side_b = _Side.resolve(core, journal, task_id, b, "b")
        with quiet_gc():  # a long range makes thousands of Change objects, none of them cyclic
            changes = _Differ(core, journal, side_a, side_b).changes()
        return Diff(side_a.ref, side_b.ref, tuple(changes))


@dataclass
class _Side:
    task_id: str
    row: Any
    version: int
    segments: list[Segment]

    @property
    def ref(self) -> VersionRef:
        return VersionRef(self.task_id, self.version)

    @classmethod
    def resolve(cls, core: Core, journal: Journal, task_id: str, spec: Any, argument: str) -> _Side:
        """A version of this stream (int; None: the head), (task_id, version), or a Checkpoint."""
        if isinstance(spec, Checkpoint):
            task_id, version = spec.task_id, spec.version
        elif isinstance(spec, tuple) and len(spec) == 2 and type(spec[0]) is str:
            task_id, version = spec
        elif spec is None or type(spec) is int:
            version = spec
        else:
            raise InvalidArgumentError(argument, spec, "a version is an int, a (task_id, version) pair or a Checkpoint")
        if version is not None and type(version) is not int:  # a pair's "2", 2.0 or True names no version
            raise InvalidArgumentError(argument, spec, "a version is an int, a (task_id, version) pair or a Checkpoint")
        row, head = core.existing(journal, task_id)
        if version is None:
            version = head
        if type(version) is not int or not 1 <= version <= head:  # 0 names no checkpoint, as in get()
            raise VersionNotFoundError(task_id, version, head)
        segments = core.segments(journal, row, version)
        if not any(s.lo <= version <= s.hi and journal.version_row(s, version) for s in segments):
            raise VersionNotFoundError(task_id, version, head)
        return cls(task_id, row, version, segments)


def common_version(a: Sequence[Segment], b: Sequence[Segment]) -> int:
    """The last version two lineages share (0 when they share none)."""
    common = 0
    for x, y in zip(a, b):
        if x.stream_id != y.stream_id:
            break
        common = min(x.hi, y.hi)
        if x.hi != y.hi:
            break
    return common


# -- the diff from events ---------------------------------------------------------------------------


class _Differ:
    def __init__(self, core: Core, journal: Journal, a: _Side, b: _Side) -> None:
        self.core, self.journal, self.codec = core, journal, core.codec
        self.a, self.b = a, b
        self.common = common_version(a.segments, b.segments)
        self.base = [s for s in (Segment(s.tree_id, s.stream_id, s.lo, min(s.hi, self.common)) for s in a.segments) if s.lo <= s.hi]

    def changes(self) -> list[Change]:
        touched_a, touched_b = self._touched(self.a), self._touched(self.b)
        for side, touched in ((self.a, touched_a), (self.b, touched_b)):
            self._promote_shifted_lists(side, touched)
        paths = {text: _lift(from_text(text)) for text in touched_a.keys() | touched_b.keys()}
        opaque = [a for a in map(self._opaque_ancestor, _roots(set(paths.values()))) if a is not None]
        if opaque:  # an event below a dict that save() keeps as one value: compare that dict whole
            paths = {t: next((a for a in opaque if p[:len(a)] == a), p) for t, p in paths.items()}
        roots = _roots(set(paths.values()))
        root_set = set(roots)
        # per side, the roots with a touched path strictly below them (or lifted into them)
        below = {side: {p[:i] for t in touched for p in [paths[t]] for i in range(1, len(p) + 1)
                        if p[:i] in root_set and (i < len(p) or p != from_text(t))}
                 for side, touched in (("a", touched_a), ("b", touched_b))}
        out: list[Change] = []
        for path in roots:
            text = to_text(path)
            grown_a = self._grown(self.a, path, text, touched_a, path in below["a"])
            grown_b = self._grown(self.b, path, text, touched_b, path in below["b"])
            if grown_a is not None and grown_b is not None:
                self._compare_growth(path, text, (grown_a, text in touched_a), (grown_b, text in touched_b), out)
            else:
                _compare(path, self._value_at(self.a, path), self._value_at(self.b, path), out)
        return out

    def _opaque_ancestor(self, path: Path) -> Path | None:
        """The outermost ancestor of `path` that is, on either side, a dict whose keys cannot all be paths
        (a "$" key, a non-str key): one value to save() and to a diff. Looked for only when the newest
        event at an ancestor wrote a tagged value (such a dict is stored as {"$dict": ...})."""
        if len(path) < 2:
            return None
        for side in (self.a, self.b):
            row, _ = _newest(self.journal, side.segments, path[:-1], side.version)
            if row is not None and row[4] is not None and _TAGGED in row[4]:
                for i in range(1, len(path)):
                    value = value_at(self.journal, self.codec, side.segments, path[:i], side.version)
                    if type(value) is dict and not _recursable(value):
                        return path[:i]
        return None

    def _touched(self, side: _Side) -> dict[str, tuple[int, int]]:
        """Paths with an event after the common version on this side -> (version, seq) of the last."""
        out: dict[str, tuple[int, int]] = {}
        for seg in side.segments:
            out.update(self.journal.touched(seg, self.common, side.version))
        return out

    def _promote_shifted_lists(self, side: _Side, touched: dict[str, tuple[int, int]]) -> None:
        """Deleting a list item shifts every later position: such a list counts as touched itself."""
        lists = {p[:-1] for p in map(from_text, touched) if type(p[-1]) is int}
        for parent in lists:
            text = to_text(parent)
            if text not in touched and _deletes_items(self.journal, side.segments, parent, (self.common + 1, -1), side.version):
                touched[text] = max(pos for t, pos in touched.items() if from_text(t)[: len(parent)] == parent)

    def _grown(self, side: _Side, path: Path, text: str, touched: dict[str, tuple[int, int]], below: bool) -> int | None:
        """How many items this side only appended to the list at `path` since the common version (0 when
        it did not touch it), or None when it changed it otherwise."""
        last = touched.get(text)
        if last is None:
            return None if below else 0
        if below or self._event(side, last)[0] not in (APPEND, EXTEND):
            return None
        reset = self.journal.newest_event(side.segments, text, side.version, reset=True)
        if reset is not None and reset[0] > self.common:
            return None
        return self.journal.growth(side.segments, text, (self.common + 1, -1), side.version)

    def _compare_growth(self, path: Path, text: str, side_a: tuple[int, bool], side_b: tuple[int, bool],
                        out: list[Change]) -> None:
        """Compare a list each side only appended to (`side_*`: items appended, whether it touched it)."""
        (grown_a, touched_a), (grown_b, touched_b) = side_a, side_b
        length = list_length(self.journal, self.codec, self.base, path, self.common) if self.common else None
        run_a, run_b = (_Run(self.core, s, path, self.common, length or 0, self.journal.generation(s.row))
                        for s in (self.a, self.b))
        if length is None:  # the list did not exist at the common version: the runs are the whole lists
            _compare(path, run_a.items() if touched_a else MISSING, run_b.items() if touched_b else MISSING, out)
        elif not grown_a:
            out.extend([_Appended(ADDED, path + (length + i,), run_b, i) for i in range(grown_b)])
        elif not grown_b:
            out.extend([_Appended(REMOVED, path + (length + i,), run_a, i) for i in range(grown_a)])
        else:  # items both sides appended are compared; the rest of the longer run is read when asked
            shared = min(grown_a, grown_b)
            for i in range(shared):
                _compare(path + (length + i,), run_a.item(i), run_b.item(i), out)
            out.extend([_Appended(REMOVED, path + (length + i,), run_a, i) for i in range(shared, grown_a)])
            out.extend([_Appended(ADDED, path + (length + i,), run_b, i) for i in range(shared, grown_b)])

    def _event(self, side: _Side, pos: tuple[int, int]) -> tuple[str, str, str | None]:
        owner = next(s for s in side.segments if s.lo <= pos[0] <= s.hi)
        return self.journal.event_at(owner, *pos)

    def _value_at(self, side: _Side, path: Path) -> Any:
        return value_at(self.journal, self.codec, side.segments, path, side.version)


# -- a path's value or a list's length at a version, without the rest of the state ------------------


def _newest(journal: Journal, segments: Sequence[Segment], path: Path, version: int) -> tuple[EventRow | None, int]:
    """The newest event at `path` or at any of its ancestors with version <= `version`, and how many
    leading parts of `path` its own path has."""
    best, depth = None, 0
    for i in range(len(path), 0, -1):
        row = journal.newest_event(segments, to_text(path[:i]), version)
        if row is not None and (best is None or (row[0], row[1]) > (best[0], best[1])):
            best, depth = row, i
    return best, depth


def value_at(journal: Journal, codec: Codec, segments: Sequence[Segment], path: Path, version: int) -> Any:
    """The value at `path` at `version` (MISSING when absent), from its last event when that event set it
    (or an ancestor that contains it) and nothing below it changed since; else rebuilt from the nearest
    snapshot and the top-level key's own events."""
    if not version:
        return MISSING
    row, depth = _newest(journal, segments, path, version)
    if row is None:
        return MISSING
    v, seq, op, where, value = row
    if _shifted(journal, segments, path, (v, seq), version) or (op == DELETE and where.endswith("]")):
        pass  # an item deleted before this position moved another item here: rebuild below
    elif op == DELETE:
        return MISSING  # nothing can live below a deleted path until something sets it again
    elif op == SET:
        if depth == len(path) and value is not None and value[:1] not in ("{", "["):
            return codec.decode(value)  # a scalar: nothing can have changed below it since
        if not _tag_like(path[depth:]) and not journal.touched_below(segments, to_text(path), (v, seq), version):
            kind, _, text, tagged = journal.json_at(segments, v, seq, to_text(path[depth:]), text=True)
            if kind is not None:
                return codec.decode(text)
            if not tagged:
                return MISSING
    return descend(key_at(journal, codec, segments, path[0], version), path[1:])


def _tag_like(rel: Path) -> bool:
    """Whether a JSON path could run into a tagged form's body ("$dict" and friends) instead of a key."""
    return any(type(k) is str and k.startswith("$") for k in rel)


def _deletes_items(journal: Journal, segments: Sequence[Segment], parent: Path, after: tuple[int, int], upto: int,
                   below: int | None = None) -> bool:
    """Whether an item of the list at `parent` (with index <= `below`, if given) was deleted after event
    `after` through version `upto`."""
    for text in journal.item_deletes(segments, to_text(parent), after, upto):
        deleted = from_text(text)
        if len(deleted) == len(parent) + 1 and (below is None or deleted[-1] <= below):
            return True
    return False


def _shifted(journal: Journal, segments: Sequence[Segment], path: Path, after: tuple[int, int], upto: int) -> bool:
    """Whether a list index in `path` may name another item than at event `after`: an earlier (or the
    same) item of that list was deleted since."""
    return any(type(key) is int and _deletes_items(journal, segments, path[:i], after, upto, key)
               for i, key in enumerate(path) if i)


def key_at(journal: Journal, codec: Codec, segments: Sequence[Segment], key: str, version: int) -> Any:
    """One top-level key at `version`: the nearest snapshot's entry for it (literal, or rebuilt from its
    base and appends as restore does) plus the key's own events after that snapshot."""
    segs = segments_for_version(segments, version)
    holder: dict[str, Any] = {}
    path = to_text((key,))
    snap = journal.latest_snapshot(segs)
    since = 0
    if snap is not None:
        since, _, manifest_text = snap
        entry = parse_manifest(manifest_text).get(key)
        if entry is not None:
            rebuild_key(journal, codec, segs, holder, key, entry[0], since, None)  # type: ignore[arg-type]
            return holder.get(key, MISSING)
    replay(codec, holder, journal.key_events(segs, path, child_ranges(path), since), None)
    return holder.get(key, MISSING)


def list_length(journal: Journal, codec: Codec, segments: Sequence[Segment], path: Path, version: int) -> int | None:
    """The length of the list at `path` at `version` (None when there is no list there), counted from
    where the list was last reset (set, deleted, truncated, or replaced with an ancestor) plus the
    appends since: the appended items themselves are never read. Rare shapes (list indices or "$" keys
    in the path, truncations, tagged values on the way) read the value instead."""
    last, depth = _newest(journal, segments, path, version)
    if last is None:
        return None
    op = last[2]
    if not (any(type(k) is int for k in path) or _tag_like(path) or op == TRUNCATE
            or (depth == len(path) and op not in (SET, APPEND, EXTEND))):
        if op in (SET, DELETE) or depth < len(path):
            length = _length_in(journal, segments, last, to_text(path[depth:]))
            if length is None:
                return None
            if length is not _UNSURE:  # items deleted since the list was set are events below it
                return length - _item_deletes(journal, segments, path, (last[0], last[1]), version)
        else:
            counted = _counted_length(journal, segments, path, version)
            if counted is not _UNSURE:
                return counted
    value = value_at(journal, codec, segments, path, version)
    return len(value) if type(value) is list else None


def _counted_length(journal: Journal, segments: Sequence[Segment], path: Path, version: int) -> Any:
    """The length of a list whose last event appended to it: the newest reset of the list itself or a
    newer replacement of an ancestor, plus the items appended since, minus the items deleted since."""
    text = to_text(path)
    start, depth = journal.newest_event(segments, text, version, reset=True), len(path)
    for i in range(1, len(path)):
        row = journal.newest_event(segments, to_text(path[:i]), version)
        if row is not None and (start is None or (row[0], row[1]) > (start[0], start[1])):
            start, depth = row, i
    if start is None:
        base, after = 0, (0, -1)
    elif start[2] == TRUNCATE:
        return _UNSURE
    else:
        base, after = _length_in(journal, segments, start, to_text(path[depth:])), (start[0], start[1])
        if base is _UNSURE:
            return _UNSURE
    return (base or 0) + journal.growth(segments, text, after, version) - _item_deletes(journal, segments, path, after, version)


def _item_deletes(journal: Journal, segments: Sequence[Segment], path: Path, after: tuple[int, int], upto: int) -> int:
    """How many items of the list at `path` were deleted after event `after` through version `upto`."""
    return sum(1 for p in journal.item_deletes(segments, to_text(path), after, upto) if len(from_text(p)) == len(path) + 1)


_UNSURE: Any = object()


def _length_in(journal: Journal, segments: Sequence[Segment], row: EventRow, rel: str) -> Any:
    """The length of the list at `rel` inside the value an event set: None when it set no list there,
    _UNSURE when a tagged form in the value may hide it from JSON paths."""
    if row[2] != SET:
        return None
    kind, length, _, tagged = journal.json_at(segments, row[0], row[1], rel)
    return length if kind == "array" else _UNSURE if tagged else None


def segments_for_version(segments: Sequence[Segment], version: int) -> list[Segment]:
    return [Segment(s.tree_id, s.stream_id, s.lo, min(s.hi, version)) for s in segments if s.lo <= version]


def descend(value: Any, rest: Path) -> Any:
    """The part of `value` at the relative path `rest` (MISSING when absent)."""
    for key in rest:
        if type(value) is dict and type(key) is str and key in value:
            value = value[key]
        elif type(value) is list and type(key) is int and -len(value) <= key < len(value):  # a caller's -1: the last
            value = value[key]
        else:
            return MISSING
    return value


# -- lazily read appended items ----------------------------------------------------------------------


class _Appended(Change):
    """An item appended on one side of a diff; its value is read with the whole run on first access."""

    __slots__ = ("_run", "_index")

    def __init__(self, kind: str, path: Path, run: _Run, index: int) -> None:
        self.kind, self.path, self._run, self._index = kind, path, run, index
        self._old = self._new = MISSING

    @property
    def old(self) -> Any:
        return self._run.item(self._index) if self.kind == REMOVED else None

    @property
    def new(self) -> Any:
        return self._run.item(self._index) if self.kind == ADDED else None


class _Run:
    """The items appended at one list path in versions (after, upto] of a side's lineage, read on first use.

    They are read from the appends in that range, which retention may rewrite (a removed version's
    events fold into the next) after the diff was answered: a read then takes the item from the state
    at `upto` instead (retention keeps it), or raises VersionNotFoundError when `upto` went too."""

    def __init__(self, core: Core, side: _Side, path: Path, after: int, offset: int, generation: int) -> None:
        self.core, self.side, self.path, self.after = core, side, path, after
        self.text = to_text(path)
        self.offset = offset  # the list's length at `after`: the run's first item is at this index
        self.generation = generation
        self._items: list[Any] | None = None
        self._windows: dict[int, list[Any]] = {}

    WINDOW = 256  # items read at once by item(): a page of a long diff reads its own items, not the run

    def item(self, index: int) -> Any:
        """One item of the run, read with the window of items around it (the whole run when the run
        holds extends, whose events are not one item each)."""
        if self._items is not None:
            return self._items[index]
        first = index - index % self.WINDOW
        window = self._windows.get(first)
        if window is None:
            side = self.side
            with self.core.session() as journal, journal.read():
                if not self._unchanged(journal):
                    return self._from_state(journal, self.path + (self.offset + index,))
                values = journal.appended(side.segments, self.text, (self.after, 2**62), side.version, first, self.WINDOW)
            if values is None:
                return self.items()[index]
            window = self._windows[first] = self.core.codec.decode_many(values)
        return window[index - first]

    def items(self) -> list[Any]:
        if self._items is None:
            side = self.side
            with self.core.session() as journal, journal.read():
                if not self._unchanged(journal):
                    whole = self._from_state(journal, self.path)
                    return whole[self.offset:] if type(whole) is list else []
                rows = journal.key_values(side.segments, self.text, (self.after + 1, 0), side.version)
            self._items = appended_items(self.core.codec, self.text, rows, creates=False) if rows else []
        return self._items

    def _unchanged(self, journal: Journal) -> bool:
        """Whether the side's stream is still the one diffed, its history as it was."""
        found = journal.stream(self.side.row.name)
        return found is not None and found.id == self.side.row.id and not journal.rewritten_since(
            self.side.row, self.generation)

    def _from_state(self, journal: Journal, path: Path) -> Any:
        side, core = self.side, self.core
        row, _ = core.existing(journal, side.task_id)
        if row.id != side.row.id:  # deleted and made again: the diffed versions are gone
            raise VersionNotFoundError(side.task_id, side.version, journal.stream_and_head(side.task_id)[1])
        core.version_row(journal, row, side.version)  # VersionNotFoundError when retention removed it
        return value_at(journal, core.codec, core.segments(journal, row, side.version), path, side.version)


# -- structural comparison -----------------------------------------------------------------------------


def _recursable(d: dict[Any, Any]) -> bool:
    return all(type(k) is str and not k.startswith("$") and addressable(k) for k in d)


def _compare(path: Path, old: Any, new: Any, out: list[Change]) -> None:
    """Append the changes from `old` to `new` at `path`: dicts by key, lists by position."""
    if old is MISSING or new is MISSING:
        if old is not new:
            out.append(Change(ADDED, path, new=new) if old is MISSING else Change(REMOVED, path, old=old))
        return
    if type(old) is dict and type(new) is dict and _recursable(old) and _recursable(new):
        for key in old:
            if key not in new:
                out.append(Change(REMOVED, path + (key,), old=old[key]))
        for key, value in new.items():
            _compare(path + (key,), old.get(key, MISSING), value, out)
    elif type(old) is list and type(new) is list:
        for i in range(max(len(old), len(new))):
            _compare(path + (i,), old[i] if i < len(old) else MISSING, new[i] if i < len(new) else MISSING, out)
    elif not same(old, new):  # exact, and NaN equals NaN (ops.same)
        out.append(Change(CHANGED, path, old, new))


_TAGGED = '{"$'  # in a value's JSON text: it holds a tagged form


def _roots(present: set[Path]) -> list[Path]:
    """The paths with no ancestor among them, in order."""
    return sorted((p for p in present if not any(p[:i] in present for i in range(1, len(p)))), key=_path_key)


def _lift(path: Path) -> Path:
    """A dict with "$" keys is one value to a diff (and to save()), as it is one tagged value in the
    journal: a path into it is compared from that dict."""
    for i, key in enumerate(path[1:], 1):
        if type(key) is str and key.startswith("$"):
            return path[:i]
    return path


def _path_key(path: Path) -> list[tuple[bool, Any]]:
    """Orders paths whose parts mix keys and indices (a key that was a dict and later a list)."""
    return [(type(k) is int, k) for k in path]
