"""save() sees every change the store keeps, also the ones `==` cannot see (a float zero's sign, a decimal's
exponent, a datetime's zone, the types of a set's members and of a dict's keys, an object's fields), in a
dict, in a list item and deep inside a growing conversation; and equal values saved again cost nothing."""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import enum
import zoneinfo
from decimal import Decimal
from typing import Any

import pytest

import eventckpt
from eventckpt import ops

from .conftest import RawSQL, strict_equal

pytestmark = pytest.mark.usefixtures("comparison")  # each test with the C extension and with Python alone

UTC = dt.timezone.utc
PLUS_ONE = dt.timezone(dt.timedelta(hours=1))
NOON = dt.datetime(2024, 1, 1, 12, tzinfo=UTC)
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


@dataclasses.dataclass
class Note:
    text: Any
    score: Any = dataclasses.field(default=0, compare=False)  # its == leaves this field out


# before -> after: equal by ==, stored differently
LOOKALIKE_CHANGES = {
    "float zero's sign": (0.0, -0.0),
    "decimal exponent": (Decimal("1.0"), Decimal("1.00")),
    "decimal zero's sign": (Decimal("0"), Decimal("-0")),
    "datetime zone": (NOON, NOON.astimezone(PLUS_ONE)),
    "time zone": (dt.time(12, tzinfo=UTC), dt.time(13, tzinfo=PLUS_ONE)),
    "datetime fold, zoneinfo's repeated hour": (dt.datetime(2024, 11, 3, 1, 30, tzinfo=NEW_YORK),
                                                dt.datetime(2024, 11, 3, 1, 30, tzinfo=NEW_YORK, fold=1)),
    "datetime fold, naive": (dt.datetime(2024, 11, 3, 1, 30), dt.datetime(2024, 11, 3, 1, 30, fold=1)),
    "datetime fold, fixed zone": (NOON, NOON.replace(fold=1)),
    "time fold": (dt.time(1, 30), dt.time(1, 30, fold=1)),
    "time zone, zoneinfo": (dt.time(1, 30, tzinfo=NEW_YORK), dt.time(1, 30, tzinfo=zoneinfo.ZoneInfo("Europe/Paris"))),
    "set member type": ({1, 2}, {1.0, 2}),
    "frozenset member type": (frozenset({1}), frozenset({True})),
    "frozenset member inside": (frozenset({(1, "a")}), frozenset({(1.0, "a")})),
    "dict key type": ({1: "a"}, {1.0: "a"}),
    "dict key type, nested": ({"k": {2: [1]}}, {"k": {2.0: [1]}}),
    "object field type": (Note(1), Note(1.0)),
    "object field == leaves out": (Note("x", score=1), Note("x", score=2)),
    "tuple item type": ((1, "x"), (True, "x")),
}

PLACES = {
    "dict value": lambda x: {"v": x, "other": "same"},
    "list item": lambda x: {"v": ["a", x, None]},
    "message in a conversation": lambda x: {"v": [{"role": "user", "content": "hi"}, {"role": "tool", "x": x}]},
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize("case", LOOKALIKE_CHANGES)
def test_a_change_equality_cannot_see_is_saved(store: eventckpt.Store, case: str, place: str) -> None:
    """Replacing a value by one that is == to it but stored differently is a change: the new version
    restores the new value exactly, and diff names it."""
    before, after = LOOKALIKE_CHANGES[case]
    assert before == after and not strict_equal(before, after)  # the case is what it says
    task = store.stream("task-1")
    task.save(PLACES[place](copy.deepcopy(before)))
    task.save(PLACES[place](copy.deepcopy(after)))
    assert strict_equal(task.state(2), PLACES[place](after)) and strict_equal(task.state(1), PLACES[place](before))
    assert len(task.diff(1, 2).changed) == 1


@pytest.mark.parametrize("case", LOOKALIKE_CHANGES)
def test_a_lookalike_inside_a_long_conversation_is_an_edit_of_that_item(store: eventckpt.Store, store_target: str,
                                                                         case: str) -> None:
    """In a conversation that also grows, the lookalike change is one event at the edited message, next
    to the append (not a rewrite of the whole list)."""
    before, after = LOOKALIKE_CHANGES[case]
    messages = [{"role": "user", "content": f"m{i}", "n": i} for i in range(200)]
    messages[150]["x"] = copy.deepcopy(before)
    task = store.stream("task-1")
    task.save({"messages": messages})
    messages[150]["x"] = copy.deepcopy(after)
    messages.append({"role": "assistant", "content": "next"})
    task.save({"messages": messages})
    with RawSQL(store_target) as raw:
        paths = raw.execute("SELECT op, path FROM changes WHERE stream = 'task-1' AND version = 2 ORDER BY seq")
    assert [op for op, _ in paths] == ["set", "append"] and paths[1][1] == "$.messages"
    assert paths[0][1] in ("$.messages[150].x", "$.messages[150].x.k")  # the value, or the key inside it
    assert strict_equal(task.state()["messages"], messages)


def test_equal_values_saved_again_cost_nothing(store: eventckpt.Store, store_target: str) -> None:
    """Saving fresh copies of values that are stored the same (sets built in another order, equal
    datetimes, decimals, objects, dicts with number keys, zeros, a repeated hour's datetime in another
    ZoneInfo object of its zone) stores no event."""
    def state() -> dict[str, Any]:
        values = [0.0, -0.0, Decimal("1.10"), Decimal("-0"), NOON, NOON.astimezone(PLUS_ONE), dt.time(1, tzinfo=UTC),
                  {3, 1.5, True}, frozenset({(1, 2.0), "a"}), {1: "a", 2.0: "b"}, Note(1.0, score=0.0), (0.0, -0.0)]
        return {"top": values, "d": {f"k{i}": v for i, v in enumerate(values)},
                "late": dt.datetime(2024, 11, 3, 1, 30, tzinfo=NEW_YORK, fold=1),  # == to nothing in another zone
                "messages": [{"role": "user", "v": v, "i": i} for i, v in enumerate(values * 20)]}

    task = store.stream("task-1")
    task.save(state())
    again = state()
    again["top"][7] = {True, 1.5, 3}
    again["d"]["k4"] = dt.datetime(2024, 1, 1, 12, tzinfo=UTC)
    again["late"] = dt.datetime(2024, 11, 3, 1, 30, tzinfo=zoneinfo.ZoneInfo.no_cache("America/New_York"), fold=1)
    task.save(again)
    task.save(copy.deepcopy(again))
    assert task.version == 3
    with RawSQL(store_target) as raw:
        assert raw.one("SELECT count(*) FROM changes WHERE stream = 'task-1' AND version > 1") == 0


@pytest.mark.parametrize("case", LOOKALIKE_CHANGES)
def test_same_tells_lookalikes_apart(case: str) -> None:
    """ops.same is False for each lookalike pair, alone and as the item of a list, and True for a copy."""
    before, after = LOOKALIKE_CHANGES[case]
    assert not ops.same(before, after) and not ops.same([before], [after])
    assert not ops.same([{"x": before}], [{"x": after}]) and not ops.same({"x": before}, {"x": after})
    assert ops.same(before, copy.deepcopy(before)) and ops.same([{"x": before}], [{"x": copy.deepcopy(before)}])



class Role(str, enum.Enum):
    USER = "user"


@dataclasses.dataclass
class Said:
    role: Any
    content: str = "hi"


# where a value sits, for a str enum and its text (each == to the other, stored differently)
TEXT_ENUM_PLACES = {
    "dict value": lambda x: {"v": x},
    "list item": lambda x: {"v": ["a", x, None]},
    "tuple item": lambda x: {"v": ("a", x)},
    "message in a conversation": lambda x: {"v": [{"role": "user", "content": "hi"}, {"role": x, "content": "yo"}]},
    "message in a list of lists": lambda x: {"v": [[{"role": x}], ["b"]]},
    "object field": lambda x: {"v": Said(x)},
    "object field in a list": lambda x: {"v": [Said(x)]},
    "dict key": lambda x: {"v": {x: 1}},
    "dict key, nested": lambda x: {"v": {"k": {x: [1]}}},
    "dict key in a message": lambda x: {"v": [{"role": "user"}, {x: "yo"}]},
    "dict key in a later message, its text a key before": lambda x: {"v": [{"user": [1]}, {x: [2]}]},
}


@pytest.mark.parametrize("place", TEXT_ENUM_PLACES)
@pytest.mark.parametrize("before, after", [(Role.USER, "user"), ("user", Role.USER)], ids=["enum to text", "text to enum"])
def test_a_str_enum_replaced_by_its_text_is_saved(store: eventckpt.Store, place: str, before: Any, after: Any) -> None:
    """A str enum replaced by its text (or the other way), in any place, is a change that save and diff see."""
    task = store.stream("task-1")
    task.save(TEXT_ENUM_PLACES[place](before))
    task.save(TEXT_ENUM_PLACES[place](after))
    assert strict_equal(task.state(2), TEXT_ENUM_PLACES[place](after))
    assert strict_equal(task.state(1), TEXT_ENUM_PLACES[place](before)) and len(task.diff(1, 2).changed) == 1
    task.save(TEXT_ENUM_PLACES[place](after))
    assert len(task.diff(2, 3)) == 0 and task.events(3) == []  # and the same again is no change


@pytest.mark.parametrize("place", TEXT_ENUM_PLACES)
def test_a_str_enum_of_a_class_no_codec_knows_yet_is_saved(store: eventckpt.Store, place: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A str enum replacing its text is a change even when no codec of the process has met a str enum yet."""
    task = store.stream("task-1")
    task.save(TEXT_ENUM_PLACES[place]("user"))
    monkeypatch.setattr(eventckpt.codec, "_text_enums", False)  # as in a process that never saw one
    task.save(TEXT_ENUM_PLACES[place](Role.USER))
    assert strict_equal(task.state(2), TEXT_ENUM_PLACES[place](Role.USER)) and task.events(2)


class Text(str):
    """A str subclass: == to its text, and refused by save."""


def test_a_str_subclass_key_after_the_same_text_as_a_key_is_refused(store: eventckpt.Store) -> None:
    """A str subclass as a key of a later message, after a message holding that text as a key, is refused as
    anywhere else (every key is type-checked, not one key per text) and nothing is written."""
    task = store.stream("task-1")
    task.save({"m": [{"n": [1]}, {"n": [2]}]})
    with pytest.raises(eventckpt.SerializationError):
        task.save({"m": [{"n": [1]}, {Text("n"): [2]}]})
    assert task.version == 1


def test_same_tells_a_str_enum_from_its_text_once_a_codec_knows_its_class() -> None:
    """ops.same tells a str enum (on the stored side, made by a codec that knows its class) from its text."""
    eventckpt.codec.Codec(types=[Role])
    for make in TEXT_ENUM_PLACES.values():
        assert not ops.same(make(Role.USER), make("user")) and not ops.same(make("user"), make(Role.USER))
        assert ops.same(make(Role.USER), make(Role.USER)) and ops.same(make("user"), make("user"))


def test_a_dict_whose_keys_change_keeps_the_order_it_was_given(store: eventckpt.Store, store_target: str) -> None:
    """A new key placed first (or a key removed while others move) restores in the order saved, the
    dict set whole; new keys at the end stay one event each; keys that only changed order are no change."""
    task = store.stream("task-1")
    task.save({"d": {"b": 1, "a": 2}})
    task.save({"d": {"b": 1, "a": 2, "c": 3}})  # new key last: one event
    task.save({"d": {"first": 0, "b": 1, "a": 2, "c": 3}})  # new key first: the dict, whole
    task.save({"d": {"c": 3, "first": 0, "b": 1, "a": 2}})  # only the order: no change
    assert [list(task.state(v)["d"]) for v in (2, 3, 4)] == [["b", "a", "c"], ["first", "b", "a", "c"], ["first", "b", "a", "c"]]
    with RawSQL(store_target) as raw:
        rows = raw.execute("SELECT version, op, path FROM changes WHERE stream = 'task-1' AND version > 1 ORDER BY version, seq")
    assert [tuple(r) for r in rows] == [(2, "set", "$.d.c"), (3, "set", "$.d")]


def nan_state() -> dict[str, Any]:
    """A state with NaNs in every place a value can hold one; each call makes new NaN objects."""
    def nan() -> float:
        return float("nan")

    return {"x": nan(), "list": [nan(), 1], "set": {nan(), 1}, "frozenset": frozenset({(nan(), "a")}),
            "key": {nan(): 1, 2: "b"}, "tuple": (nan(), (nan(),)), "object": Note(nan(), score=nan()),
            "decimal": Decimal("NaN"), "deep": {"in": [{nan(): {nan()}}]},
            "messages": [{"role": "user", "v": nan(), "i": i} for i in range(50)]}


def test_nan_saved_again_costs_nothing_and_diff_agrees(named: dict[str, str]) -> None:
    """With allow_nan=True, fresh NaNs where NaNs were (in a list, a set, a dict key, a tuple, an object, a
    conversation) are no change to save() or diff(); a real change next to them is exactly that change."""
    with eventckpt.open(named["n.db"], allow_nan=True) as store, RawSQL(named["n.db"]) as raw:
        task = store.stream("t")
        task.save(nan_state())
        task.save(nan_state())
        assert raw.one("SELECT count(*) FROM changes WHERE stream = 't' AND version = 2") == 0
        assert list(task.diff(1, 2)) == [] and list(task.diff(2, live=nan_state())) == []
        changed = nan_state()
        changed["set"] = {float("nan"), 2}
        changed["key"][2] = "c"
        changed["messages"].append({"role": "assistant", "v": float("nan")})
        task.save(changed)
        rows = raw.execute("SELECT op, path FROM changes WHERE stream = 't' AND version = 3 ORDER BY seq")
        assert sorted(tuple(r) for r in rows) == [("append", "$.messages"), ("set", "$.key"), ("set", "$.set")]
        assert [(c.kind, c.path) for c in task.diff(2, 3)] == [("changed", ("key",)), ("added", ("messages", 50)),
                                                               ("changed", ("set",))]
        assert strict_equal(task.state(), changed)


@pytest.mark.parametrize("key", sorted(nan_state()))
def test_same_finds_nan_stored_the_same(key: str) -> None:
    """ops.same holds NaN equal to NaN wherever it is (what the store keeps is the same), alone and inside a
    list, and still sees a change of anything next to it."""
    a, b = nan_state()[key], nan_state()[key]
    assert ops.same(a, b) and ops.same([a, 1], [b, 1]) and not ops.same([a, 1], [b, 1.0])
    assert not ops.same({"v": a, "w": 0.0}, {"v": b, "w": -0.0})


@pytest.mark.parametrize("before, after", [
    ({float("nan")}, {1.0}), ({float("nan"), 1}, {float("nan"), True}), ({float("nan"): 1}, {float("nan"): 2}),
    ((float("nan"), 1), (float("nan"), 1.0)), (frozenset({(float("nan"), 1)}), frozenset({(float("nan"), 1.0)})),
    (Decimal("NaN"), Decimal("-NaN")), (Note(float("nan"), score=1), Note(float("nan"), score=2)),
])
def test_same_sees_a_change_beside_a_nan(before: Any, after: Any) -> None:
    """ops.same is False for values that hold NaN and differ in what is stored beside it."""
    assert not ops.same(before, after) and not ops.same([before], [after])
