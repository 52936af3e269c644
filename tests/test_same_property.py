"""ops.same (what save() uses to find changes) agrees with an independent exact comparison on a stored
value and a caller's edited copy of it: conversations of text with lookalikes hidden anywhere in them
(1, 1.0 and True, as values and as keys; a str subclass and a str enum, as values and as keys; a None key; an instance's own
__dict__; a dict that once held a key other than text), whether or not this process knows a str enum class yet."""

from __future__ import annotations

import copy
import enum
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eventckpt.codec
from eventckpt import ops
from eventckpt.codec import Codec

from .conftest import strict_equal

pytestmark = pytest.mark.usefixtures("comparison")  # each test with the C extension and with Python alone

WORDS = ["user", "hi", "tool", ""]
KEYS = ["role", "content", "id", "n"]


class Word(str, enum.Enum):
    USER = "user"
    HI = "hi"
    TOOL = "tool"
    EMPTY = ""


class Text(str):
    """A str subclass: == to its text, stored as nothing (save refuses it)."""


class Holder:
    """An instance whose __dict__ is a dict of its own kind in CPython (split keys, in its own order)."""


leaves = st.one_of(st.sampled_from(WORDS), st.none(), st.sampled_from([0, 1, 2, 0.0, -0.0, 1.0, True, False]))
values = st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.lists(inner, max_size=2).map(tuple),
                                                      st.dictionaries(st.sampled_from(KEYS), inner, max_size=3)),
                      max_leaves=6)
messages = st.dictionaries(st.sampled_from(KEYS) | st.none() | st.sampled_from([0, 1, 1.0, True]), st.one_of(st.sampled_from(WORDS), st.none(), values), max_size=4)
conversations = st.lists(messages, max_size=8)


def lookalikes(value: Any) -> list[Any]:
    """Values == to `value` that may be stored differently (or the same: a new object of equal text)."""
    t = type(value)
    if t is Word:
        return [value.value, Text(value.value)]
    if t is str:
        found = [Text(value), "".join(list(value)) + ""]
        found += [w for w in Word if w.value == value]
        return found
    if t in (int, float, bool):
        return [x for x in (int(value), float(value), -float(value), bool(value)) if x == value]
    if t is dict:
        general = dict(value)
        general[0] = 0  # the dict's keys no longer fit a table of text only, and stay that way
        del general[0]
        if not all(type(key) is str for key in value):  # a number key by one == to it: 1 -> 1.0 -> True
            return [general] + [{(kind(key) if type(key) in (int, float, bool) else key): item
                                 for key, item in value.items()} for kind in (int, float, bool)]
        texts = [key for key in value if type(key) is str]
        renamed = [{(new_key if key == texts[0] else key): item for key, item in value.items()}
                   for new_key in (Text(texts[0]), *(w for w in Word if w.value == texts[0]))] if texts else []
        holder = Holder()
        for key in reversed(list(value)):  # the instance's keys in another order than the dict's
            setattr(holder, key, value[key])
        return [holder.__dict__, general, *renamed]
    return []


def spots(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path inside `value` (to a list item or a dict value), `value` itself first."""
    found = [path]
    if type(value) is dict:
        for key, item in value.items():
            found += spots(item, path + (key,))
    elif type(value) is list:  # (a tuple is replaced whole, by a lookalike of it: none)
        for i, item in enumerate(value):
            found += spots(item, path + (i,))
    return found


def edited(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    parent = value
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = new
    return value


@st.composite
def stored_and_caller(draw: st.DrawFn, enums_in_store: bool) -> tuple[Any, Any]:
    """A conversation as the store keeps it (the codec's copy, sharing text with the caller's objects, or
    decoded from its JSON) and the caller's copy of it with up to three edits that `==` cannot see."""
    caller = draw(conversations)
    if enums_in_store and caller:
        caller[-1]["role"] = Word.USER
    codec = Codec([Word] if enums_in_store else [])
    raw, shared = codec.encode_copy(caller)
    stored = shared if draw(st.booleans()) else codec.decode(raw)
    caller = copy.copy(caller) if draw(st.booleans()) else copy.deepcopy(caller)
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(spots(caller)))
        parent = caller
        for key in path[:-1]:
            parent = parent[key]
        current = parent[path[-1]] if path else caller
        choices = lookalikes(current)
        if choices:
            caller = edited(copy.deepcopy(caller) if not path else caller, path, draw(st.sampled_from(choices)))
    return stored, caller


@settings(max_examples=400)
@given(pair=stored_and_caller(enums_in_store=False))
def test_same_agrees_with_an_exact_comparison_before_any_str_enum_is_known(pair: tuple[Any, Any]) -> None:
    """Before a codec of the process knows a str enum class (so the store holds none), same() is True exactly
    when the caller's conversation is stored the same, whatever lookalikes the caller put in it."""
    stored, caller = pair
    with mock.patch.object(eventckpt.codec, "_text_enums", False):
        assert ops.same(stored, caller) is strict_equal(stored, caller)


@settings(max_examples=400)
@given(pair=stored_and_caller(enums_in_store=True))
def test_same_agrees_with_an_exact_comparison_once_a_str_enum_is_known(pair: tuple[Any, Any]) -> None:
    """Once the store may hold str enums, same() still is True exactly when the two are stored the same: an
    enum in the store where the caller has its text is a change, and so is the other way round."""
    stored, caller = pair
    assert eventckpt.codec.text_enums_known()
    assert ops.same(stored, caller) is strict_equal(stored, caller)
