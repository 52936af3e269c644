"""Pure functions over states: the events between two states, and folding events onto a state. No SQL.

An event is `(op, path, value)`:
  set       path value   the dict key or list item at path becomes value
  delete    path         the dict key is removed, or the list item is removed (later items shift)
  append    path value   value is appended to the list at path (created when the key is missing)
  extend    path values  values are appended in order (created when the key is missing)
  incr      path n       the number at path grows by n (created as n when the key is missing)
  truncate  path n       the list at path keeps its first n items
"""

from __future__ import annotations

import datetime as dt
import gc
from collections.abc import Iterable
from decimal import Decimal
from itertools import chain, compress, islice
from math import copysign
from operator import attrgetter, ne, not_
from typing import Any, NamedTuple

import orjson

from .codec import MAX_DEPTH, stored_clock, stored_fields, text_enums_known, zone_name
from .errors import PathError
from .paths import Path, addressable

try:  # the C-speed core of `same`, built when the installing machine has a C compiler
    from .exactcompare import same as native_same
except ImportError:  # pragma: no cover - covered by the tests that turn it off
    native_same = None

SET, DELETE, APPEND, EXTEND, INCR, TRUNCATE = "set", "delete", "append", "extend", "incr", "truncate"
OPS = (SET, DELETE, APPEND, EXTEND, INCR, TRUNCATE)
_MISSING: Any = object()
_NAN: Any = object()  # stands for every NaN in `_nan_free`

# Item types whose instances are == to no other type the codec decodes into (unlike int, float and bool),
# and str too while no codec can make a str enum (codec.text_enums_known): one is == to its text.
_EQUAL_ONLY_TO_ITSELF = frozenset({dict, list, str, tuple, type(None)})
_SCALARS_EQUAL_ONLY_TO_THEMSELVES = _TEXT_OR_NONE = frozenset({str, type(None)})
_EQUAL_ONLY_TO_ITSELF_NOT_TEXT = _EQUAL_ONLY_TO_ITSELF - {str}
_NONE = frozenset({type(None)})
_DICT = frozenset({dict})
_TEXT = frozenset({str})
_SEQUENCES = frozenset({list, tuple})
_NESTED = _DICT | _SEQUENCES
_JSON_KINDS = frozenset({dict, list, str, int, float, bool, type(None)})
_NUMBERS = frozenset({int, float, bool})
# Types whose `==` between two values of that very type sees every difference the store keeps.
_EXACT_BY_EQUALITY = frozenset({str, int, bool, type(None), dict, list, tuple})
_ZONE = attrgetter("tzinfo")
_ZONE_AND_FOLD = attrgetter("tzinfo", "fold")
_FOLD = attrgetter("fold")

# Beyond these, rewriting the whole list is smaller than describing the edit.
_MAX_FRONT_DROP = 64
_MAX_ITEM_EDITS = 64


class Event(NamedTuple):
    op: str
    path: Path
    value: Any = None


# -- diff -----------------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal and stored the same: exact types all the way down (1, 1.0 and True are different values to a
    checkpoint), and what `==` does not look at too (a float zero's sign, a decimal's exponent, a time's
    zone and fold, the fields an object's `==` leaves out, the types of a set's members and of a dict's keys).

    Dicts are compared key by key: the order of their keys is not a value (see `edited_order`). `a` is
    the stored side (a codec decoded or copied it: see `_same_types`), `b` the caller's. Where the C
    extension `exactcompare` was built (`native_same`), it decides dicts with text keys, lists, tuples
    and JSON's scalars in one pass and hands every other pair of one type to `same_in_python`; without
    it, lists are compared with `==` plus `_same_types`, a few C-speed passes: a long conversation stays
    cheap to diff either way. (The C pass is the stricter where the stored side is not what a codec
    makes: a list subclass, or a str enum before any is known, is never the same as a list or a str.)
    """
    if native_same is not None:
        return native_same(a, b, same_in_python)
    return same_in_python(a, b)


def same_in_python(a: Any, b: Any) -> bool:
    """`same`, defined in Python: the whole definition, and what the C extension asks about every pair it
    does not decide itself (values inside such a pair go back through `same`)."""
    if a is b:
        return True
    t = type(a)
    if t is not type(b):
        return False
    if t is dict:
        if len(a) != len(b):
            return False
        text_keys = True
        for key, other in b.items():  # the caller's keys: one may be a str enum found by its text
            value = a.get(key, _MISSING)
            if value is _MISSING:  # a NaN key finds no other NaN: only a key that is not text can be one
                return type(key) is not str and _same_dicts_apart(a, b)
            if not same(value, other):
                return False
            if type(key) is not str:
                text_keys = False
        if text_keys and text_enums_known():  # the stored side's keys can be str enums only then
            text_keys = set(map(type, a)) <= _TEXT
        return text_keys or _same_members(a.keys(), b.keys())  # a key 1 found by 1.0 is a change
    if t is list or t is tuple:
        if len(a) != len(b):
            return False
        return _same_types(a, b) if a == b else _same_items_apart(a, b)
    if a == b:
        if t is float:  # 0.0 -> -0.0 is a change
            return a != 0.0 or copysign(1.0, a) == copysign(1.0, b)
        return t in _EXACT_BY_EQUALITY or _equal_values_same(t, [a], [b])
    return _unequal_same(t, a, b)


def _unequal_same(t: type, a: Any, b: Any) -> bool:
    """Whether two values of type `t` that are not `==` are stored the same all the same. Only reached
    when `==` says no, so what it costs is paid by values that changed (or by these few cases)."""
    if t is float:
        return a != a and b != b  # NaN (when allowed) is unchanged NaN: every NaN is stored as "nan"
    if t is dt.datetime or t is dt.time:
        # Two ZoneInfo objects of one zone (ZoneInfo.no_cache) make == compare instants, and an instant in
        # a repeated or skipped hour is then equal to nothing (PEP 495), not even the same wall clock
        return stored_clock(a) == stored_clock(b)
    if t is set or t is frozenset:  # a NaN member is == to no other NaN
        if len(a) != len(b):
            return False
        pairs = _partners(a, b)
        return pairs is not None and all(same(x, y) for x, y in pairs)
    if t is Decimal:  # a Decimal NaN is stored as its text
        return a.is_nan() and b.is_nan() and str(a) == str(b)
    fields = stored_fields(t)  # a NaN field, or an `==` that looks at less than the fields (eq=False)
    return fields is not None and same(fields(a), fields(b))


def _same_items_apart(a: list[Any] | tuple[Any, ...], b: list[Any] | tuple[Any, ...]) -> bool:
    """Two lists (or tuples) of one length that are not `==`: whether each pair of items `==` calls unequal
    is stored the same all the same (a NaN somewhere in it), and the other pairs are of the same types.
    Finding the unequal pairs is one C-speed pass; a real change stops at its first pair."""
    unequal = list(map(ne, a, b))
    if not all(map(same, compress(a, unequal), compress(b, unequal))):
        return False
    alike = list(map(not_, unequal))
    return _same_types(list(compress(a, alike)), list(compress(b, alike)))


def _same_dicts_apart(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    """Two dicts of one size, a key of `a` not found in `b`: whether each key still has a partner stored the
    same (a NaN key is == to no other NaN), holding a value stored the same."""
    pairs = _partners(a, b)
    return pairs is not None and all(same(x, y) and same(a[x], b[y]) for x, y in pairs)


def _partners(a: Any, b: Any) -> list[tuple[Any, Any]] | None:
    """Each member of `a` (a set, or a dict's keys) paired with the member of `b` stored like it: the one
    `==` to it, else one equal to it but for its NaNs (found under the key `_nan_free` gives both; `same`
    decides); None when a member has no partner."""
    found = {y: y for y in b}
    rest: dict[Any, list[Any]] = {}
    for y in b:
        if y not in a:
            rest.setdefault(_nan_free(y), []).append(y)
    pairs = []
    for x in a:
        y = found.get(x, _MISSING)
        if y is _MISSING:
            group = rest.get(_nan_free(x), [])
            i = next((i for i, y in enumerate(group) if same(x, y)), None)
            if i is None:
                return None
            y = group.pop(i)
        pairs.append((x, y))
    return pairs


def _nan_free(x: Any) -> Any:
    """`x` with every NaN in it (inside tuples, frozensets and objects too) replaced by one marker: a hashable
    key under which values stored the same find each other, though NaN is == to nothing, not even itself."""
    t = type(x)
    if t is float:
        return x if x == x else _NAN
    if t is Decimal:
        return _NAN if x.is_nan() else x
    if t is tuple:
        return tuple(map(_nan_free, x))
    if t is frozenset:
        return frozenset(map(_nan_free, x))
    fields = stored_fields(t)
    if fields is None:
        return x
    key = (t, _nan_free(fields(x)))
    try:
        hash(key)
    except TypeError:  # an object hashed by its own __hash__, over fields that are not: its type will do
        return t
    return key


def _equal_values_same(t: type, head: list[Any], caller: list[Any]) -> bool:
    """Pairwise `==` values of type `t` (outside `_EXACT_BY_EQUALITY`, and not float: its zeros are
    compared where they are met) are also stored the same, checked at C speed per type where it can be."""
    if t is Decimal:  # 1.0 -> 1.00 and 0 -> -0 are changes: compare_total is 0 only for the same digits
        return not any(map(Decimal.compare_total, head, caller))
    if t is dt.datetime or t is dt.time:  # the same instant in another zone is a change, so is another fold
        if list(map(_ZONE_AND_FOLD, head)) == list(map(_ZONE_AND_FOLD, caller)):
            return True  # with ==, the same wall clock: the same ISO text
        if list(map(_FOLD, head)) != list(map(_FOLD, caller)):  # == leaves fold out within one zone
            return False
        if list(map(t.utcoffset, head)) != list(map(t.utcoffset, caller)):
            return False
        zones_h, zones_c = list(map(_ZONE, head)), list(map(_ZONE, caller))
        return list(map(zone_name, zones_h)) == list(map(zone_name, zones_c))
    if t is set or t is frozenset:  # {1} -> {1.0} is a change
        return all(map(_same_members, head, caller))
    fields = stored_fields(t)
    if fields is None:  # dates, durations, UUIDs, bytes, enums: == is exact
        return True
    fields_h, fields_c = list(map(fields, head)), list(map(fields, caller))  # == may leave fields out
    return fields_h == fields_c and _same_types(fields_h, fields_c)


def _same_members(a: Iterable[Any], b: Iterable[Any]) -> bool:
    """Two equal sets (or dicts' keys) whose members are also pairwise the same."""
    members = {x: x for x in b}  # finds b's member equal to one of a's
    return all(same(x, members[x]) for x in a)


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[Event]:
    """The events that turn state `old` into state `new`; unchanged keys cost nothing.

    Values in the events are `new`'s own objects: callers encode them before anything else can
    mutate them.
    """
    out: list[Event] = []
    for key in old:
        if key not in new:
            out.append(Event(DELETE, (key,)))
    for key, value in new.items():
        prev = old.get(key, _MISSING)
        if prev is _MISSING:
            out.append(Event(SET, (key,), value))
        else:
            _diff_value(prev, value, (key,), out)
    return out


def _recursable(d: dict[Any, Any]) -> bool:
    """A dict whose keys can all appear in stored paths (otherwise it is stored as one value)."""
    return all(type(k) is str and not k.startswith("$") and addressable(k) for k in d)


def _diff_value(old: Any, new: Any, path: Path, out: list[Event]) -> None:
    if same(old, new):
        return
    t = type(new)
    if t is dict and type(old) is dict and _recursable(old) and _recursable(new) and list(new) == edited_order(old, new):
        for key in old:
            if key not in new:
                out.append(Event(DELETE, path + (key,)))
        for key, value in new.items():
            prev = old.get(key, _MISSING)
            if prev is _MISSING:
                out.append(Event(SET, path + (key,), value))
            else:
                _diff_value(prev, value, path + (key,), out)
    elif t is list and type(old) is list:
        _diff_list(old, new, path, out)
    else:
        out.append(Event(SET, path, new))


def edited_order(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The key order of `old` after per-key events turn it into `new` (kept keys stay, new ones go last).
    When a dict whose keys changed has another order than that, the whole dict is set instead, so the
    order it was given is what restores. (Keys that only changed order are no change: `same`.)"""
    return [k for k in old if k in new] + [k for k in new if k not in old]


def _diff_list(old: list[Any], new: list[Any], path: Path, out: list[Event]) -> None:
    lo, ln = len(old), len(new)
    if ln > lo:
        if same(old, new[:lo]):  # (same: a NaN in an item is no change)
            _grow(new[lo:], path, out)
            return
    if ln < lo:
        if same(old[:ln], new):
            out.append(Event(TRUNCATE, path, ln))
            return
    if ln and lo:
        # A window that dropped items at the front (and maybe grew at the end).
        try:
            k = old.index(new[0], 1, _MAX_FRONT_DROP + 1)
        except ValueError:
            k = 0
        if k and same(old[k:], new[: lo - k]):
            out.extend(Event(DELETE, path + (0,)) for _ in range(k))
            _grow(new[lo - k :], path, out)
            return
    if ln >= lo:  # a few items edited (in place or replaced), and maybe more appended
        # the first differences only: past the limit the whole list is written anyway
        changed = list(islice((i for i in range(lo) if not same(old[i], new[i])), _MAX_ITEM_EDITS + 1))
        if len(changed) <= _MAX_ITEM_EDITS:
            for i in changed:
                _diff_value(old[i], new[i], path + (i,), out)
            _grow(new[lo:], path, out)
            return
    out.append(Event(SET, path, new))


def _same_types(head: list[Any], caller: list[Any]) -> bool:
    """The items of two lists already equal by `==` (where 1 == 1.0 == True) have the same types pairwise,
    all the way down: 1 -> 1.0 inside a message dict is a change.

    One level at a time, each in a few C-speed passes (map, chain, compress: no Python call per item).
    Items that are str or None need no type check: `==` already proves the head's item is of that very
    type, since nothing else the codec makes equals one (dicts, lists and tuples neither: for them the
    check goes on one level down). So the caller's side is looked at first, and the head's only where a
    level holds something else (a number, say), to compare types pairwise. A last level of text (a
    conversation's message dicts of text) is found without building it: `_text_below` types what the
    garbage collector sees inside the dicts (their keys too when not all text). Otherwise the next level
    is the values of the dicts and the items of the lists and tuples, paired in order. A str enum equals
    its text, though: once a codec of this process can make one (codec.text_enums_known), the head's
    side of text is looked at too (its keys, and the types of a last level of text: all str or None,
    else a change). When a pair of dicts holds its keys in different orders, or keys other than text,
    that level is compared exactly instead (`same`, pair by pair). Items of types whose `==` misses what
    the store keeps (floats, decimals, times, sets, objects) are checked per type by
    `_equal_values_same`, still without a Python call per item where it can be."""
    text_enums = text_enums_known()
    scalars = _NONE if text_enums else _SCALARS_EQUAL_ONLY_TO_THEMSELVES
    alone = _EQUAL_ONLY_TO_ITSELF_NOT_TEXT if text_enums else _EQUAL_ONLY_TO_ITSELF
    first_level = True
    while True:
        types = list(map(type, caller))
        kinds = _DICT if types.count(dict) == len(types) else set(types)  # a conversation: counting is cheaper
        if kinds <= scalars:  # a level of text: the common end
            return True
        paired = not kinds <= alone
        if paired and list(map(type, head)) != types:
            return False
        for t in kinds - _EXACT_BY_EQUALITY:  # floats, decimals, times, sets, objects
            if t is float:  # only a zero can hide a change (of its sign) from ==: compare the few falsy items
                if not all(map(same, *_falsy(head, caller))):
                    return False
            elif not _equal_values_same(t, *_only(frozenset((t,)), types, head, caller)):
                return False
        if kinds.isdisjoint(_NESTED):
            return True
        if kinds == _DICT:  # a conversation: every item a message dict
            dicts_h, dicts_c, lists_h, lists_c = head, caller, [], []
        else:
            dicts_h, dicts_c = _only(_DICT, types, head, caller)
            lists_h, lists_c = _only(_SEQUENCES, types, head, caller)
        sample = dicts_c[::64] + dicts_c[-1:]  # a conversation that is not all text fails here, cheaply
        if _text_below(sample, lists_c[-1:]) and _text_below(dicts_c, lists_c):  # the common end
            return not text_enums or _text_below(dicts_h, lists_h)
        if first_level and _same_json(head, caller):  # messages holding numbers, lists and dicts of their own
            return True
        first_level = False
        if dicts_c and not _keys_text(dicts_c):  # keys other than text: 1 == 1.0
            return all(map(same, head, caller))
        if text_enums and dicts_h and not _keys_text(dicts_h):
            return all(map(same, head, caller))
        below = list(_below(dicts_c, lists_c))
        types_below = list(map(type, below))
        text_below = types_below.count(str) == len(types_below) or set(types_below) <= _TEXT_OR_NONE
        if text_below:  # nothing below needs the head's side, unless its text may be str enums: a change
            return not text_enums or set(map(type, _below(dicts_h, lists_h))) <= _TEXT_OR_NONE
        if list(chain.from_iterable(dicts_h)) != list(chain.from_iterable(dicts_c)):  # the keys, in order
            return all(map(same, head, caller))
        head = list(_below(dicts_h, lists_h))
        caller = below


def _text_below(dicts: list[dict[Any, Any]], lists: list[Any]) -> bool:
    """Whether every key and value of `dicts` and every item of `lists` (and tuples) is text or None: a last
    level of a conversation. Two C-speed passes over what the garbage collector sees inside them, which is a
    dict's values, and its keys too unless CPython keeps them in a table that holds only exact str (checked
    once at import: `_REFERENTS_SHOW_KEYS`). In no particular order, so only for a check of every one."""
    if not _REFERENTS_SHOW_KEYS:
        return False
    types = list(map(type, gc.get_referents(*dicts, *lists)))
    return types.count(str) == len(types) or set(types) <= _TEXT_OR_NONE


def _keys_text(dicts: list[dict[Any, Any]]) -> bool:
    """Whether every key of every one of `dicts` is exactly a str. Each key counts: a str enum or a str
    subclass is == to its text, so a set of the keys would keep whichever came first. When the garbage
    collector sees only the values (every dict keeps its keys in a table of exact str), that is the answer
    without looking at a key."""
    if _REFERENTS_SHOW_KEYS and len(gc.get_referents(*dicts)) == sum(map(len, dicts)):
        return True
    return set(map(type, chain.from_iterable(dicts))) <= _TEXT


def _same_json(head: list[Any], caller: list[Any]) -> bool:
    """True when two lists already equal by `==` are proven stored the same in a few C-speed passes: both
    hold nothing but exact dicts, lists, str, int, float, bool and None all the way down (`_json_kinds`:
    no subclass, enum, tuple or object, on either side), and then either only one kind of number other
    than float (nothing `==` could have paired with another type), or orjson writes both as the same
    bytes (it writes 1, 1.0, true and -0.0 each in its own way). False when that is not proven (keys in
    another order, a key other than text, a number past 64 bits): the caller compares level by level."""
    if not _REFERENTS_SHOW_KEYS:
        return False
    kinds = _json_kinds(caller)
    head_kinds = None if kinds is None else _json_kinds(head)  # (the store's side only when the caller's passed)
    if kinds is None or head_kinds is None:
        return False
    numbers = (kinds | head_kinds) & _NUMBERS
    if len(numbers) <= 1 and float not in numbers:
        return True
    try:
        return orjson.dumps(head) == orjson.dumps(caller)
    except orjson.JSONEncodeError:
        return False


def _json_kinds(values: list[Any]) -> set[type] | None:
    """The types of the items of `values` and of everything inside them (a dict's keys too, where they are
    not all exact str: see `_text_below`), or None unless each is exactly a dict, list, str, int, float,
    bool or None. Level by level over what the garbage collector sees inside the containers."""
    found: set[type] = set()
    level = values
    for _ in range(MAX_DEPTH + 2):  # a deeper value (or a cycle) is not stored data: not proven
        if not level:
            return found
        kinds = set(map(type, level))
        if not kinds <= _JSON_KINDS:
            return None
        found |= kinds
        level = gc.get_referents(*level)  # (str, numbers, bool and None have nothing inside for it to see)
    return None


def _referents_show_keys() -> bool:
    """Whether gc.get_referents shows what `_text_below` relies on: a list's items, a tuple's, a dict's values
    and the keys of a dict whose keys are not all str."""
    key, value, item = object(), object(), object()
    return all(any(x is wanted for x in gc.get_referents(container))
               for container, wanted in (({key: 1}, key), ({1: value}, value), ({"k": value}, value), ([item], item),
                                         ((item,), item)))


_REFERENTS_SHOW_KEYS = _referents_show_keys()


def _below(dicts: list[dict[Any, Any]], lists: list[Any]) -> Iterable[Any]:
    """The next level down: the values of `dicts`, then the items of `lists` (and tuples)."""
    return chain(chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(lists))


def _only(wanted: frozenset[type], types: list[type], head: list[Any], caller: list[Any]) -> tuple[list[Any], list[Any]]:
    """The items of both lists whose caller-side type is in `wanted` (the same on the head side, by `==`)."""
    picks = list(map(wanted.__contains__, types))
    return list(compress(head, picks)), list(compress(caller, picks))


def _falsy(head: list[Any], caller: list[Any]) -> tuple[list[Any], list[Any]]:
    """The items of both lists whose caller-side item is falsy (zeros, empty text and containers, None)."""
    picks = list(map(not_, caller))
    return list(compress(head, picks)), list(compress(caller, picks))


def _grow(items: list[Any], path: Path, out: list[Event]) -> None:
    if len(items) == 1:
        out.append(Event(APPEND, path, items[0]))
    elif items:
        out.append(Event(EXTEND, path, items))


# -- fold -----------------------------------------------------------------------------------------


def resolve(state: dict[str, Any], op: str, path: Path) -> Path:
    """Check that `op` fits `state` at `path` and return the path with negative indices made absolute.

    Raises PathError naming what does not fit; never changes `state`.
    """
    if len(path) <= 2:  # a top-level key or a key inside a top-level dict: the common cases
        parent = state if len(path) == 1 else state.get(path[0])
        key = path[-1]
        if type(parent) is dict and type(key) is str:
            if key not in parent:
                if op in (SET, APPEND, EXTEND, INCR):
                    return path
            elif op == SET or op == DELETE:
                return path
            else:
                t = type(parent[key])
                if t is list if op in (APPEND, EXTEND, TRUNCATE) else (op == INCR and (t is int or t is float)):
                    return path
    parent = state
    out: list[Any] = []
    for depth, key in enumerate(path):
        last = depth == len(path) - 1
        if type(parent) is dict:
            if type(key) is not str:
                raise PathError(path, f"{_show(out)} is a dict; its keys are strings, not {key!r}")
            if key not in parent:
                if last and op in (SET, APPEND, EXTEND, INCR):
                    out.append(key)
                    return tuple(out)
                raise PathError(path, f"{_show(out + [key])} does not exist")
        elif type(parent) is list:
            if type(key) is not int:
                raise PathError(path, f"{_show(out)} is a list; index it with an int, not {key!r}")
            if key < 0:
                key += len(parent)
            if not 0 <= key < len(parent):
                raise PathError(path, f"index {key} is out of range for {_show(out)} (length {len(parent)})")
        else:
            raise PathError(path, f"{_show(out)} is a {type(parent).__name__}, not a dict or list")
        out.append(key)
        parent = parent[key]
    target = parent
    if op in (APPEND, EXTEND, TRUNCATE) and type(target) is not list:
        raise PathError(path, f"{op} needs a list at {_show(out)}, found {type(target).__name__}")
    if op == INCR and (type(target) not in (int, float)):
        raise PathError(path, f"incr needs a number at {_show(out)}, found {type(target).__name__}")
    return tuple(out)


def _show(path: list[Any]) -> str:
    return "the state" if not path else "".join(f"[{p!r}]" for p in path)


def apply(state: dict[str, Any], op: str, path: Path, value: Any) -> None:
    """Fold one event onto `state` in place. Values are used as given: pass copies you own."""
    parent: Any = state
    for key in path[:-1]:
        parent = parent[key]
    key = path[-1]
    if op == SET:
        parent[key] = value
    elif op == APPEND:
        if type(parent) is dict and key not in parent:
            parent[key] = [value]
        else:
            parent[key].append(value)
    elif op == EXTEND:
        if type(parent) is dict and key not in parent:
            parent[key] = list(value)
        else:
            parent[key].extend(value)
    elif op == DELETE:
        del parent[key]
    elif op == INCR:
        parent[key] = (parent.get(key, 0) if type(parent) is dict else parent[key]) + value
    elif op == TRUNCATE:
        del parent[key][value:]
    else:
        raise ValueError(f"unknown op {op!r}")
