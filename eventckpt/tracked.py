"""Tracked state: a stream's head as live dicts and lists that record their own in-place changes.

    state = stream.checkout()             # the head, as TrackedDict / TrackedList nodes
    state["messages"].append(message)     # recorded as an append
    state["scratch"]["k1"] = 3            # recorded as a set of ("scratch", "k1")
    stream.save(state)                    # commits exactly the recorded changes; nothing is compared

Nodes are subclasses of `dict` and `list`: reading them is plain dict/list speed, and `isinstance`,
`json.dumps` and `orjson.dumps` treat them as ordinary data. Every mutating method records the event it
makes (as the commit module's Recorded tuples, as a transaction does), and the save hands them to the
commit path, which checks and folds them: a save costs the size of the change, not of the state.

What is recorded as what:
  - `d[k] = v`, `update`, `|=`, `setdefault`: a set per key; `del d[k]`, `pop`, `popitem`: a delete;
    `clear()`: a set of `{}` (at the top level, a delete per key).
  - `append`, `extend`, `+=`, `insert` at the end: append/extend; `l[i] = v`: a set of that item;
    `pop(i)`, `remove`, `del l[i]`: a delete of that item (later items shift, as they do in the list);
    `clear()`, `del l[i:]`: a truncate; `l[i:] = xs`: a truncate then an extend; `*=`: an extend.
  - What has no exact event is a whole-value set of the nearest container that can be addressed:
    `sort`, `reverse`, `insert` before the end, other slice assignments, any change inside a dict whose
    keys cannot all be paths (not str, starting with "$", or holding quotes: such a dict is one value,
    as it is to `save()`). Consecutive such changes inside one container are one set, encoded when
    something else is recorded or at the save.
  - Values of other mutable types (sets, bytearrays, dataclass and attrs instances, tuples holding
    lists) cannot tell anyone they changed: each save compares their encoding with the one they had at
    the last save, or in a later whole-value set of a container holding them (cost: their size), and
    records a set of the ones that differ.

A value put into the state is copied (its encoding is recorded and the state holds tracked copies):
mutating the caller's object afterwards changes neither the state nor what is saved, and putting one
object at two places gives two independent copies. A node removed from the state (popped, deleted,
replaced) is detached: mutating it afterwards is not recorded, because it is no longer in the state.

What cannot be seen: calling the base class's methods unbound (`dict.__setitem__(node, k, v)`,
`list.append(node, x)`) and C functions that write into a list directly (`heapq.heappush`) bypass the
recording. Use the methods (or a plain save of `state.plain()`, which compares everything).
"""

from __future__ import annotations

import copy as copy_module
import datetime as dt
import enum
import threading
import uuid
from collections.abc import Callable, Iterable
from decimal import Decimal
from operator import index as as_index
from typing import TYPE_CHECKING, Any

import orjson

from .codec import PlainData
from .commit import Recorded
from .errors import InvalidArgumentError, SerializationError
from .gcpause import quiet_gc
from .ops import APPEND, DELETE, EXTEND, SET, TRUNCATE
from .paths import Path, addressable
from .prepared import PreparedSave

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .codec import Codec
    from .core import Core
    from .stream import CheckpointStore

_MISSING: Any = object()
_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes, Decimal, dt.datetime, dt.date, dt.time,
                        dt.timedelta, uuid.UUID})
_MAX_ITEM_EVENTS = 64  # past this many item events, one set of the whole list is smaller

Where = tuple["Recording", list[Any], Path]


_KEYS_SEEN: dict[str, bool] = {}  # dict keys repeat (every message has "role"): skip the regex


def _good_key(key: Any) -> bool:
    """Whether a dict key can appear in a stored path (as in ops: str, no leading "$", addressable)."""
    if type(key) is not str:
        return False
    good = _KEYS_SEEN.get(key)
    if good is None:
        good = key[:1] != "$" and addressable(key)
        if len(_KEYS_SEEN) < 50_000:
            _KEYS_SEEN[key] = good
    return good


def _immutable(value: Any) -> bool:
    t = type(value)
    if t in _IMMUTABLE:
        return True
    if t is tuple or t is frozenset:
        return all(map(_immutable, value))
    return isinstance(value, enum.Enum)


class Recording:
    """What one tracked state has recorded since its base version; shared by all of its nodes."""

    __slots__ = ("stream", "codec", "version", "stream_id", "ops", "open", "watched", "spent", "handed", "last",
                 "epoch", "lock", "closes")

    def __init__(self, stream: CheckpointStore, version: int, stream_id: int | None) -> None:
        self.stream = stream
        self.codec: Codec = stream.core.codec
        self.version = version
        self.stream_id = stream_id  # the stream's row: a stream deleted and saved again is a new row
        self.ops: list[Recorded] = []
        self.open: tuple[Any, Path] | None = None  # a container whose whole value is set when closed
        self.watched: list[list[Any]] = []  # [value, container, key, its encoding as saved or set, `closes` then]
        self.spent = False  # a commit failed after folding our copies: use fresh ones from the JSON
        # Prepared saves not finished yet (see eventckpt.prepared): ops[:handed] are theirs, `last` is the
        # newest (the next one builds on the version it makes), and `epoch` counts the failures that gave
        # their edits back (a save prepared before one can no longer commit).
        self.handed = 0
        self.last: PreparedSave | None = None
        self.epoch = 0
        # prepared on one thread (the event loop), committed on another; a save waits on it for the one before
        self.lock = threading.Condition(threading.Lock())
        self.closes = 0  # whole-value sets closed so far: a commit must not undo a baseline one set since

    # -- building nodes ---------------------------------------------------------------------------

    def build(self, value: Any, up: Any, key: Any) -> Any:
        """A tracked copy of `value` (data the codec produced) placed at `up[key]`: new nodes for dicts
        and lists, immutable leaves shared, other values copied and watched."""
        t = type(value)
        if t is dict:
            node: Any = TrackedDict(value)
            node._up, node._key = up, key
            bad = 0
            for k, item in value.items():
                if not _good_key(k):
                    bad += 1
                if type(item) is not str:
                    child = self.build(item, node, k)
                    if child is not item:
                        dict.__setitem__(node, k, child)
            node._bad = bad
            return node
        if t is list:
            node = TrackedList(value)
            node._up, node._key = up, key
            for i, item in enumerate(value):
                if type(item) is not str:
                    child = self.build(item, node, i)
                    if child is not item:
                        list.__setitem__(node, i, child)
            return node
        if _immutable(value):
            return value
        value = self.codec.copy(value)
        self.watched.append([value, up, key, self.codec.encode(value), self.closes])
        return value

    def ingest(self, value: Any, up: Any, key: Any, path: Path) -> tuple[Any, bytes, Any]:
        """A caller's value going into the state at `up[key]` (`up` is at `path`): (the state's tracked
        copy, its JSON, the head's copy). Raises SerializationError naming where in the state (nothing
        changed yet) when it cannot be stored."""
        t = type(value)
        if t is str or t is bool or value is None:  # the common scalars: their JSON is all there is to make
            try:
                return value, orjson.dumps(value), value
            except orjson.JSONEncodeError:
                pass  # a lone surrogate: the codec says so with a SerializationError
        try:
            raw, head_copy = self.codec.encode_copy(value)
        except SerializationError as exc:  # its path is inside the value: name the place in the state
            raise SerializationError(path + (key,) + exc.path, exc.reason, exc.type_name) from None
        if type(head_copy) is str or _immutable(head_copy):
            return head_copy, raw, head_copy
        return self.build(head_copy, up, key), raw, head_copy

    # -- recording --------------------------------------------------------------------------------

    def begin(self, chain: list[Any]) -> bool:
        """Called before a node in `chain` (root first) changes. True when the change falls inside the
        open whole-value set (it will be in the value encoded at the close); otherwise the open set is
        closed first, while its container still holds the value it had before this change."""
        if self.open is None:
            return False
        node = self.open[0]
        for n in chain:
            if n is node:
                return True
        self.close()
        return False

    def emit(self, absorbed: bool, chain: list[Any], path: Path, events: Iterable[Recorded], whole: bool) -> None:
        """Record the events of a change of chain[-1] (already applied), or open a whole-value set of the
        nearest container that can express it."""
        if absorbed:
            return
        for depth in range(1, len(chain) - 1):  # the root's keys are always addressable
            n = chain[depth]
            if type(n) is TrackedDict and n._bad:
                self.open = (n, path[:depth])
                return
        if whole:
            self.open = (chain[-1], path)
            return
        self.ops.extend(events)

    def close(self) -> None:
        """Encode the open container's current value as one set."""
        assert self.open is not None
        node, path = self.open
        value = plain(node, self.codec)
        try:
            raw = self.codec.encode(value)
        except SerializationError as exc:
            raise SerializationError(path + exc.path, exc.reason, exc.type_name) from None
        self.open = None
        self.ops.append((SET, path, value, raw))
        if self.watched:
            self._rebase(node)

    def _rebase(self, node: Any) -> None:
        """Watched values inside `node` are in the set just recorded as they are now: a save compares them
        with that (by the last save's, one changed back since would look unchanged, and stay as set)."""
        self.closes += 1
        for entry in self.watched:
            value, up, key = entry[0], entry[1], entry[2]
            n = up
            while n is not None and n is not node:  # parent links only: cheaper than locate() per entry
                n = n._up
            if n is node and _holds(up, key, value, entry):  # (one no longer in the state goes at the save)
                entry[3], entry[4] = self.codec.encode(value), self.closes

    # -- saving -----------------------------------------------------------------------------------

    def prepare(self) -> PreparedSave:
        """Take the edits recorded since the last prepared save (with sets of watched values that changed):
        they build on that save's version when it has not committed yet, else on ours."""
        with self.lock:
            if self.open is not None:
                self.close()
            if self.spent:  # a failed commit may have folded (and changed) the copies: decode them again
                decode = self.codec.decode
                self.ops = [(op, path, decode(raw) if raw is not None else value, raw)
                            for op, path, value, raw in self.ops]
                self.spent = False
            events = self.ops[self.handed:]
            taken = len(events)
            renewed = self._renewed(events)
            prepared = PreparedSave(self, self.last, (self.version, self.stream_id), events, taken, renewed)
            self.handed += taken
            self.last = prepared
            return prepared

    def _renewed(self, events: list[Recorded]) -> list[tuple[list[Any], bytes, int]]:
        """Append to `events` a set of each watched value whose encoding changed since the last commit;
        returns the encodings to keep once they are committed (with `closes` now)."""
        renewed: list[tuple[list[Any], bytes, int]] = []
        kept = []
        for entry in self.watched:
            value, up, key, raw = entry[:4]
            where = locate(up)
            if where is None or not _holds(up, key, value, entry):
                continue
            kept.append(entry)
            key = entry[2]
            recording, chain, path = where
            try:
                now = self.codec.encode(value)
            except SerializationError as exc:
                raise SerializationError(path + (key,) + exc.path, exc.reason, exc.type_name) from None
            if now == raw:
                continue
            renewed.append((entry, now, self.closes))
            target = next((d for d in range(1, len(chain)) if type(chain[d]) is TrackedDict and chain[d]._bad), None)
            if target is None:
                events.append((SET, path + (key,), self.codec.decode(now), now))
            else:
                value = plain(chain[target], self.codec)
                events.append((SET, path[:target], value, self.codec.encode(value)))
        self.watched = kept
        return renewed

def _holds(up: Any, key: Any, value: Any, entry: list[Any]) -> bool:
    """Whether container `up` still holds `value` at `key` (a list index is found again if it moved)."""
    if type(up) is TrackedList:
        if 0 <= key < len(up) and list.__getitem__(up, key) is value:
            return True
        for i, item in enumerate(up):
            if item is value:
                entry[2] = i
                return True
        return False
    return dict.get(up, key, _MISSING) is value


def locate(node: Any) -> Where | None:
    """The recording, the nodes from the root down to `node`, and `node`'s path; None when `node` is not
    (or no longer) in a tracked state."""
    chain = [node]
    keys: list[Any] = []
    n = node
    while True:
        up = n._up
        if up is None:
            if type(n) is TrackedState and n._recording is not None:
                chain.reverse()
                keys.reverse()
                return n._recording, chain, tuple(keys)
            return None
        key = n._key
        if type(up) is TrackedList:
            if not (0 <= key < len(up) and list.__getitem__(up, key) is n):
                key = next((i for i, item in enumerate(up) if item is n), None)
                if key is None:
                    n._up = None  # detached: remember it, so the next change does not search again
                    return None
                n._key = key
        elif dict.get(up, key, _MISSING) is not n:
            n._up = None
            return None
        keys.append(key)
        chain.append(up)
        n = up


def _detach(value: Any) -> None:
    if isinstance(value, (TrackedDict, TrackedList)):
        value._up = None


def plain(value: Any, codec: Codec | None = None) -> Any:
    """A plain deep copy of a tracked value: dicts and lists, immutable leaves shared, other values copied
    (through `codec` when given, else with copy.deepcopy)."""
    if isinstance(value, dict):
        return {k: v if type(v) is str else plain(v, codec) for k, v in dict.items(value)}
    if isinstance(value, list):
        return [v if type(v) is str else plain(v, codec) for v in list.__iter__(value)]
    if _immutable(value):
        return value
    return codec.copy(value) if codec is not None else copy_module.deepcopy(value)


class _Plain(PlainData):
    """Copies of nodes are plain data: a copy is not in the state, so it must not look as if it were (and the
    codec stores a node as its plain dict or list)."""

    __slots__ = ()

    def __copy__(self) -> Any:
        return dict(self) if isinstance(self, dict) else list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        return plain(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        return (dict, (dict(self),)) if isinstance(self, dict) else (list, (list(self),))

    def plain(self) -> Any:
        """A plain deep copy (dicts and lists), independent of the state."""
        return plain(self)


class TrackedDict(_Plain, dict):
    """A dict in a tracked state: every change is recorded (see eventckpt.tracked)."""

    __slots__ = ("_up", "_key", "_bad")

    def __new__(cls, *args: Any, **kwargs: Any) -> TrackedDict:
        self = dict.__new__(cls)
        self._up, self._key, self._bad = None, None, 0
        return self

    def _bad_key(self, key: Any) -> bool:
        """Whether `key` keeps this dict from being addressed key by key (as in ops: it is one value)."""
        return not _good_key(key)

    def _check_key(self, key: Any, where: Where) -> None:
        if self._bad_key(key):
            try:
                where[0].codec.encode([key])  # an unstorable key fails here, before anything changes
            except SerializationError as exc:
                raise SerializationError(where[2] + (key,), exc.reason, exc.type_name) from None

    def _held(self, key: Any) -> Any:
        """The key this dict holds equal to `key` (present), the one a path may name: a dict keeps its own
        key when an equal one of another type sets or pops it (a str enum and its text)."""
        if type(key) is str and not self._bad:
            return key
        return next(k for k in dict.keys(self) if k is key or k == key)

    def __setitem__(self, key: Any, value: Any) -> None:
        old = dict.get(self, key, _MISSING)
        if old is value:
            return  # `d[k] += [x]` and `d[k] |= {...}` assign the node they changed back to itself
        where = locate(self)
        if where is None:
            return dict.__setitem__(self, key, value)
        self._put(where, [self._take(where, key, old, value)])

    def _take(self, where: Where, key: Any, old: Any, value: Any) -> tuple[Any, Any, Any, bytes, Any]:
        """Check a set of `key` (holding `old`, or _MISSING) to `value`, changing nothing yet: (key, old,
        the state's copy of value, its JSON, the head's copy). Raises when it cannot be stored."""
        recording, _, path = where
        if old is _MISSING:
            self._check_key(key, where)
        else:
            key = self._held(key)
        live, raw, head_copy = recording.ingest(value, self, key, path)
        return key, old, live, raw, head_copy

    def _put(self, where: Where, taken: list[tuple[Any, Any, Any, bytes, Any]]) -> None:
        """Make the sets `_take` checked, and record them as one change of this dict."""
        recording, chain, path = where
        bad_before = self._bad
        absorbed = recording.begin(chain)
        events: list[Recorded] = []
        for key, old, live, raw, head_copy in taken:
            dict.__setitem__(self, key, live)
            if old is _MISSING:
                self._bad += self._bad_key(key)
            else:
                _detach(old)
            events.append((SET, path + (key,), head_copy, raw))
        recording.emit(absorbed, chain, path, events, bool(bad_before or self._bad))

    def __delitem__(self, key: Any) -> None:
        self.pop(key)

    def pop(self, key: Any, *default: Any) -> Any:
        """Remove `key` and return its value (recorded as a delete)."""
        if len(default) > 1:
            raise TypeError(f"pop expected at most 2 arguments, got {1 + len(default)}")
        if key not in self:
            return dict.pop(self, key, *default)
        where = locate(self)
        if where is None:
            return dict.pop(self, key)
        recording, chain, path = where
        key = self._held(key)
        bad_before = self._bad
        absorbed = recording.begin(chain)
        value = dict.pop(self, key)
        self._bad -= self._bad_key(key)
        _detach(value)
        recording.emit(absorbed, chain, path, [(DELETE, path + (key,), None, None)], bool(bad_before))
        return value

    def popitem(self) -> tuple[Any, Any]:
        """Remove and return the last (key, value) pair (recorded as a delete)."""
        if not self:
            return dict.popitem(self)
        key = next(reversed(dict.keys(self)))
        return key, self.pop(key)

    def clear(self) -> None:
        """Remove every key (recorded as one set of {}; at the top level, a delete per key)."""
        if not self:
            return
        where = locate(self)
        if where is None:
            return dict.clear(self)
        recording, chain, path = where
        bad_before = self._bad
        absorbed = recording.begin(chain)
        if type(self) is TrackedState:
            events: list[Recorded] = [(DELETE, (key,), None, None) for key in self]
        else:
            events = [(SET, path, {}, b"{}")]
        values = list(dict.values(self))
        dict.clear(self)
        self._bad = 0
        for value in values:
            _detach(value)
        recording.emit(absorbed, chain, path, events, bool(bad_before))

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Set each key (recorded as a set per key). All or nothing: when one key or value cannot be
        stored, nothing changes (as for a list's extend)."""
        items = dict(*args, **kwargs)
        where = locate(self)
        if where is None:
            for key, value in items.items():
                self[key] = value
            return
        taken = []
        for key, value in items.items():
            old = dict.get(self, key, _MISSING)
            if old is not value:
                taken.append(self._take(where, key, old, value))
        if taken:
            self._put(where, taken)

    def __ior__(self, other: Any) -> TrackedDict:
        self.update(other)
        return self

    def setdefault(self, key: Any, default: Any = None) -> Any:
        """The value at `key`; when missing, `default` is set there first (the state's copy is returned)."""
        if key not in self:
            self[key] = default
        return dict.__getitem__(self, key)

    @classmethod
    def fromkeys(cls, iterable: Iterable[Any], value: Any = None) -> dict[Any, Any]:  # type: ignore[override]
        return dict.fromkeys(iterable, value)


class TrackedList(_Plain, list):
    """A list in a tracked state: every change is recorded (see eventckpt.tracked)."""

    __slots__ = ("_up", "_key")

    def __new__(cls, *args: Any, **kwargs: Any) -> TrackedList:
        self = list.__new__(cls)
        self._up, self._key = None, None
        return self

    def _items(self, recording: Recording, path: Path, values: list[Any],
               positions: Iterable[int]) -> tuple[list[Any], list[Recorded]]:
        """Ingest `values` going to `positions` of this list (at `path`): their live copies, and a set of
        each (by position)."""
        lives, sets = [], []
        for at, value in zip(positions, values):
            live, raw, head_copy = recording.ingest(value, self, at, path)
            lives.append(live)
            sets.append((SET, at, head_copy, raw))
        return lives, sets

    def _grow(self, values: list[Any]) -> None:
        where = locate(self)
        if where is None:
            return list.extend(self, values)
        recording, chain, path = where
        lives, sets = self._items(recording, path, values, range(len(self), len(self) + len(values)))
        absorbed = recording.begin(chain)
        list.extend(self, lives)
        recording.emit(absorbed, chain, path, _growth(path, sets), False)

    def append(self, value: Any) -> None:
        """Append `value` (recorded as an append)."""
        self._grow([value])

    def extend(self, values: Iterable[Any]) -> None:
        """Append every item of `values` (recorded as one extend)."""
        values = list(values)
        if values:
            self._grow(values)

    def __iadd__(self, values: Iterable[Any]) -> TrackedList:  # type: ignore[override]
        self.extend(values)
        return self

    def __imul__(self, n: Any) -> TrackedList:  # type: ignore[override]
        n = as_index(n)
        if n <= 0:
            self.clear()
        elif n > 1 and self:
            self.extend(list(self) * (n - 1))
        return self

    def insert(self, i: Any, value: Any) -> None:
        """Insert `value` before position `i` (an append at the end; before that, a set of the list)."""
        n = len(self)
        i = as_index(i)
        i = max(0, i + n) if i < 0 else min(i, n)
        if i == n:
            return self._grow([value])
        self._replace(slice(i, i), [value])

    def pop(self, i: Any = -1) -> Any:
        """Remove and return the item at `i` (recorded as a delete of that item)."""
        n = len(self)
        i = as_index(i)
        at = i + n if i < 0 else i
        if not 0 <= at < n:
            return list.pop(self, i)  # raises IndexError
        where = locate(self)
        if where is None:
            return list.pop(self, at)
        recording, chain, path = where
        absorbed = recording.begin(chain)
        value = list.pop(self, at)
        _detach(value)
        recording.emit(absorbed, chain, path, [(DELETE, path + (at,), None, None)], False)
        return value

    def remove(self, value: Any) -> None:
        """Remove the first item equal to `value` (recorded as a delete of that item)."""
        self.pop(list.index(self, value))

    def clear(self) -> None:
        """Remove every item (recorded as a truncate to 0)."""
        if self:
            self._cut(0)

    def _cut(self, length: int) -> None:
        where = locate(self)
        if where is None:
            return list.__delitem__(self, slice(length, None))
        recording, chain, path = where
        absorbed = recording.begin(chain)
        list.__delitem__(self, slice(length, None))
        recording.emit(absorbed, chain, path, [(TRUNCATE, path, length, None)], False)

    def sort(self, *, key: Callable[[Any], Any] | None = None, reverse: bool = False) -> None:
        """Sort in place (recorded as a set of the whole list)."""
        self._reorder(lambda: list.sort(self, key=key, reverse=reverse))

    def reverse(self) -> None:
        """Reverse in place (recorded as a set of the whole list)."""
        self._reorder(lambda: list.reverse(self))

    def _reorder(self, change: Callable[[], None]) -> None:
        where = locate(self)
        if where is None or len(self) < 2:
            return change()
        recording, chain, path = where
        absorbed = recording.begin(chain)
        try:
            change()
        finally:  # a failed sort may still have moved items
            recording.emit(absorbed, chain, path, (), True)

    def __setitem__(self, i: Any, value: Any) -> None:
        if isinstance(i, slice):
            return self._replace(i, list(value))
        n = len(self)
        at = as_index(i)
        at = at + n if at < 0 else at
        if not 0 <= at < n:
            return list.__setitem__(self, i, value)  # raises IndexError
        old = list.__getitem__(self, at)
        if old is value:
            return
        where = locate(self)
        if where is None:
            return list.__setitem__(self, at, value)
        recording, chain, path = where
        live, raw, head_copy = recording.ingest(value, self, at, path)
        absorbed = recording.begin(chain)
        list.__setitem__(self, at, live)
        _detach(old)
        recording.emit(absorbed, chain, path, [(SET, path + (at,), head_copy, raw)], False)

    def __delitem__(self, i: Any) -> None:
        if isinstance(i, slice):
            return self._replace(i, None)
        self.pop(i)

    def _replace(self, s: slice, values: list[Any] | None) -> None:
        """Slice assignment (`values`) and deletion (None): exact events where a short exact form
        exists, else a set of the whole list."""
        where = locate(self)
        if where is None:
            return list.__delitem__(self, s) if values is None else list.__setitem__(self, s, values)
        recording, chain, path = where
        n = len(self)
        start, stop, step = s.indices(n)
        positions = range(start, max(stop, start)) if step == 1 else range(start, stop, step)
        if values is not None and step != 1 and len(values) != len(positions):
            return list.__setitem__(self, s, values)  # raises ValueError
        values = values or []
        lives, sets = self._items(recording, path, values, positions if step != 1 else range(start, start + len(values)))
        events, whole = _slice_events(path, n, positions, step, sets)
        if not events and not whole:
            return
        removed = [list.__getitem__(self, at) for at in positions]
        absorbed = recording.begin(chain)
        if lives or step == 1:
            list.__setitem__(self, s, lives)
        else:
            list.__delitem__(self, s)  # an extended slice takes no list of another length
        for value in removed:
            _detach(value)
        recording.emit(absorbed, chain, path, events, whole)


def _growth(path: Path, sets: list[Recorded]) -> list[Recorded]:
    """An append (one item) or an extend (several) of the items in `sets`."""
    if len(sets) == 1:
        _, _, value, raw = sets[0]
        return [(APPEND, path, value, raw)]
    return [(EXTEND, path, [s[2] for s in sets], b"[" + b",".join(s[3] for s in sets) + b"]")]


def _slice_events(path: Path, n: int, positions: range, step: int, sets: list[Recorded]) -> tuple[list[Recorded], bool]:
    """The events of replacing the items at `positions` (of a list of length n) by the items in `sets`
    (already numbered from positions' start), or whole=True when no short exact form exists."""
    removed, added = len(positions), len(sets)
    if not removed and not added:
        return [], False
    if step != 1:
        if not added and removed <= _MAX_ITEM_EVENTS:  # delete from the highest index down
            return [(DELETE, path + (at,), None, None) for at in sorted(positions, reverse=True)], False
        if added == removed and added <= _MAX_ITEM_EVENTS:
            return [(SET, path + (s[1],), s[2], s[3]) for s in sets], False
        return [], True
    start, stop = positions.start, positions.stop
    if stop == n:  # the tail: cut it, then add the new items
        events: list[Recorded] = [(TRUNCATE, path, start, None)] if removed else []
        return events + (_growth(path, sets) if added else []), False
    if not added and removed <= _MAX_ITEM_EVENTS:
        return [(DELETE, path + (start,), None, None)] * removed, False
    if added == removed and added <= _MAX_ITEM_EVENTS:
        return [(SET, path + (s[1],), s[2], s[3]) for s in sets], False
    return [], True


class TrackedState(TrackedDict):
    """The root of a tracked state (from `CheckpointStore.checkout()`): a dict of top-level keys."""

    __slots__ = ("_recording",)

    def __new__(cls, *args: Any, **kwargs: Any) -> TrackedState:
        self = super().__new__(cls)
        self._recording = None
        return self

    @classmethod
    def checkout(cls, stream: CheckpointStore, state: dict[str, Any], version: int,
                 stream_id: int | None) -> TrackedState:
        """A tracked copy of `state` (the head of `stream`, row `stream_id`, at `version`; not kept)."""
        root = cls()
        with quiet_gc():  # many new containers at once: the collector would rescan the heap many times
            root._adopt(Recording(stream, version, stream_id), state)
        return root

    def _adopt(self, recording: Recording, state: dict[str, Any]) -> None:
        dict.clear(self)
        self._recording = recording
        for key, value in state.items():
            dict.__setitem__(self, key, value if type(value) is str else recording.build(value, self, key))

    def _bad_key(self, key: Any) -> bool:
        return False  # top-level keys are checked when set: every one can be addressed

    def _check_key(self, key: Any, where: Where | None = None) -> None:
        if type(key) is not str or not addressable(key):
            raise InvalidArgumentError(
                "key", key, "a top-level key is a str without quotes, backslashes, control characters or lone surrogates")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._check_key(key)
        super().__setitem__(key, value)

    @property
    def version(self) -> int:
        """The version this state was checked out at or last saved as (0 for an empty stream)."""
        return self._recording.version if self._recording is not None else 0

    @property
    def task_id(self) -> str | None:
        """The stream this state belongs to."""
        return self._recording.stream.task_id if self._recording is not None else None

    def belongs_to(self, stream: CheckpointStore) -> bool:
        """Whether this state was checked out from `stream` (the same stream of the same Store object)."""
        mine = self._recording.stream if self._recording is not None else None
        return mine is not None and mine.store is stream.store and mine.task_id == stream.task_id

    def refresh(self) -> TrackedState:
        """Start again from the stream's head: unsaved changes are dropped, nodes taken out before
        are detached. Returns this same object."""
        if self._recording is None:
            raise InvalidArgumentError("state", None, "this TrackedState was not checked out from a stream")
        fresh = self._recording.stream.checkout()
        recording = fresh._recording
        for value in dict.values(fresh):
            if isinstance(value, (TrackedDict, TrackedList)):
                value._up = self
        for entry in recording.watched:
            if entry[1] is fresh:
                entry[1] = self
        dict.clear(self)
        dict.update(self, fresh)
        dict.clear(fresh)
        fresh._recording = None
        self._recording = recording
        return self

    def prepare(self) -> PreparedSave:
        """For CheckpointStore.save: the edits to commit now, and the save they build on."""
        assert self._recording is not None
        return self._recording.prepare()

    @property
    def base(self) -> tuple[int, int | None]:
        """The head the recorded changes apply to: (version, the stream's row id; None at version 0)."""
        assert self._recording is not None
        return self._recording.version, self._recording.stream_id
