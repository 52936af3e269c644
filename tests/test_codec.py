"""Values: every supported type round-trips exactly; anything else is refused before a write; stored
data never chooses code."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import io
import threading
import uuid
import zoneinfo
from collections import OrderedDict
from decimal import Decimal
from pathlib import Path
from typing import Any

import apsw
import attrs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

import eventckpt
from eventckpt.codec import Codec, StoredCodec

from .conftest import RawSQL, journal_rows, strict_equal


class Color(enum.Enum):
    RED = "red"
    BLUE = 2


class Level(enum.IntEnum):
    LOW = 1


@dataclasses.dataclass
class Point:
    x: int
    y: float
    tags: tuple[str, ...] = ()


@attrs.define
class Span:
    start: dt.datetime
    end: dt.datetime
    _secret: str = "s"


@dataclasses.dataclass(frozen=True)
class Frozen:
    name: str
    where: Point


NEW_YORK = zoneinfo.ZoneInfo("America/New_York")

EXACT = {
    "null": None,
    "bools": [True, False],
    "ints": [0, -1, 2**63 - 1, -(2**63), 2**64, -(2**100)],
    "floats": [0.1, -0.0, 1e308, 5e-324],
    "text": "héllo \u2603 \"quoted\" \\ {\"$tuple\": 1}",
    "tuple": (1, "a", (2, 3)),
    "set": {1, 2, 3},
    "frozenset": frozenset({"a", "b"}),
    "datetime_utc": dt.datetime(2026, 11, 21, 14, 5, 1, 123456, tzinfo=dt.timezone.utc),
    "datetime_offset": dt.datetime(2026, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
    "datetime_zone": dt.datetime(2026, 7, 1, 12, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")),
    "datetime_naive": dt.datetime(2026, 1, 1, 0, 0),
    "datetime_zone_repeated_hour": dt.datetime(2024, 11, 3, 1, 30, tzinfo=NEW_YORK, fold=1),  # -05:00, not -04:00
    "datetime_zone_skipped_hour": dt.datetime(2024, 3, 10, 2, 30, tzinfo=NEW_YORK, fold=1),
    "datetime_naive_fold": dt.datetime(2024, 11, 3, 1, 30, fold=1),
    "date": dt.date(2026, 2, 28),
    "time": dt.time(23, 59, 59, 999),
    "time_offset": dt.time(23, 59, tzinfo=dt.timezone(dt.timedelta(hours=-3))),
    "time_zone": dt.time(1, 2, tzinfo=NEW_YORK),
    "time_fold": dt.time(1, 30, fold=1),
    "time_zone_fold": dt.time(1, 30, tzinfo=NEW_YORK, fold=1),
    "timedelta": dt.timedelta(days=-2, seconds=5, microseconds=7),
    "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "decimal": Decimal("3.14159265358979323846264338327950288"),
    "bytes": b"\x00\xffbinary",
    "bytearray": bytearray(b"mutable"),
    "int_keys": {1: "one", 2: "two"},
    "tuple_keys": {(1, 2): "pair"},
    "dollar_keys": {"$tuple": [1, 2], "$dict": "not a tag"},
    "enum": Color.RED,
    "int_enum": Level.LOW,
    "dataclass": Point(1, 2.5, ("a",)),
    "attrs": Span(dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc), dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)),
    "nested_object": Frozen("f", Point(0, 0.0)),
    "deep": [[[[{"a": [1, {"b": (None,)}]}]]]],
}


@pytest.mark.parametrize("key", sorted(EXACT))
def test_round_trip_exact(store: eventckpt.Store, key: str) -> None:
    """Each supported type comes back equal and of the same type, in the same process."""
    store.stream("t").save({key: EXACT[key]})
    got = store.stream("t").state()[key]
    assert strict_equal(got, EXACT[key]), (got, EXACT[key])


def test_round_trip_after_reopen_with_registered_types(store_target: str) -> None:
    """After reopening, enums and classes registered with types= decode into their classes."""
    with eventckpt.open(store_target) as store:
        store.stream("t").save(dict(EXACT))
    with eventckpt.open(store_target, types=[Color, Level, Point, Span, Frozen]) as store:
        got = store.stream("t").state()
    for key, value in EXACT.items():
        assert strict_equal(got[key], value), key


@pytest.mark.parametrize("text, offset, fold", [
    ('["2024-11-03T01:30:00-04:00", "America/New_York"]', -4, 0),
    ('["2024-11-03T01:30:00-05:00", "America/New_York"]', -5, 1),
    ('["2024-07-01T12:00:00-04:00", "America/New_York"]', -4, 0),
    ('"2024-11-03T01:30:00-05:00"', -5, 0),
])
def test_datetimes_older_versions_wrote_restore_as_the_instant_they_were(store_target: str, text: str, offset: int,
                                                                         fold: int) -> None:
    """A zoneinfo datetime stored without its fold (as older versions wrote it) restores as the instant its
    offset says: in the repeated hour, the offset tells which of the two it was."""
    with eventckpt.open(store_target) as store:
        store.stream("t").save({"x": 1})
    with RawSQL(store_target) as raw:
        raw.execute("UPDATE events SET value = ? WHERE path = '$.x'", ('{"$datetime": %s}' % text,))
    with eventckpt.open(store_target) as store:
        value = store.stream("t").state()["x"]
    assert value.utcoffset() == dt.timedelta(hours=offset) and value.fold == fold
    stored = orjson.loads(text)
    assert value.isoformat() == (stored[0] if type(stored) is list else stored)


class NeverSaved(enum.Enum):  # no test saves these: stored data naming them must not reach them
    ONE = 1


@dataclasses.dataclass
class NeverSavedPoint:
    x: int


def test_classes_never_saved_in_this_process_decode_as_data(store_target: str) -> None:
    """Without types=, an enum or object whose class this process never saved is its value or its fields,
    though the class exists (in a module already imported): nothing is looked up or imported."""
    with eventckpt.open(store_target) as store:
        store.stream("t").save({"c": 0, "p": 0})
    with RawSQL(store_target) as raw:
        raw.execute("UPDATE events SET value = ? WHERE path = '$.c'", ('{"$enum": ["tests.test_codec.NeverSaved", 1]}',))
        raw.execute("UPDATE events SET value = ? WHERE path = '$.p'",
                    ('{"$object": ["tests.test_codec.NeverSavedPoint", {"x": 1}]}',))
    with eventckpt.open(store_target) as store:
        assert store.stream("t").state() == {"c": 1, "p": {"x": 1}}
    with eventckpt.open(store_target, types=[NeverSaved, NeverSavedPoint]) as store:
        assert store.stream("t").state() == {"c": NeverSaved.ONE, "p": NeverSavedPoint(1)}


def test_classes_saved_in_this_process_decode_in_every_store(store_target: str) -> None:
    """An enum or object saved in this process decodes into its class in any store of the process: a second
    Store on the file, while the first is open and after it is closed (README: "by saving an instance in this
    process")."""
    @dataclasses.dataclass
    class Saved:
        color: Color

    value = {"c": Color.BLUE, "p": Point(1, 2.0), "s": Saved(Color.RED)}
    with eventckpt.open(store_target) as first:
        first.stream("t").save(value)
        with eventckpt.open(store_target) as second:
            assert strict_equal(second.stream("t").state(), value)
    with eventckpt.open(store_target) as again:
        assert strict_equal(again.stream("t").state(), value)


def test_classes_saved_in_threads_decode_in_every_store(named: dict[str, str]) -> None:
    """Classes saved by many threads at once, each in its own store, all decode in one other store."""
    def make(i: int) -> type:
        return dataclasses.make_dataclass(f"Threaded{i}", [("n", int)], namespace={"__module__": __name__})

    classes = [make(i) for i in range(16)]
    targets = [named[f"t{i % 4}.db"] for i in range(16)]
    barrier = threading.Barrier(16, timeout=120)  # a thread that failed to open breaks it: no hang
    failed: list[BaseException] = []

    def work(i: int) -> None:
        try:
            with eventckpt.open(targets[i]) as store:
                barrier.wait()
                store.stream(f"s{i}").save({"v": classes[i](i)})
        except BaseException as exc:
            failed.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failed, failed
    for i in range(16):
        with eventckpt.open(targets[i]) as store:
            assert store.stream(f"s{i}").state() == {"v": classes[i](i)}


def test_typed_restore_into_callers_type(store_target: str) -> None:
    """state(as_type=...) structures into the dataclass/attrs type the caller passes, with nested types."""

    @dataclasses.dataclass
    class State:
        where: Point
        when: Span
        color: Color
        ids: list[uuid.UUID]
        notes: dict[str, int]

    value = State(Point(1, 2.0, ("t",)), EXACT["attrs"], Color.RED, [EXACT["uuid"]], {"a": 1})
    with eventckpt.open(store_target) as store:
        store.stream("t").save(value)
    with eventckpt.open(store_target) as store:  # a new process knows none of these classes
        assert store.stream("t").state(as_type=State) == value
        assert store.stream("t").get(1, as_type=State).values == value


@dataclasses.dataclass
class Doc:
    text: str
    words: int = dataclasses.field(init=False, default=0)

    def __post_init__(self) -> None:
        self.words = len(self.text.split())


@attrs.define
class Tally:
    n: int
    seen: int = attrs.field(init=False, default=0)


@dataclasses.dataclass(frozen=True)
class Stamp:
    at: int
    by: str = dataclasses.field(init=False, default="")


@dataclasses.dataclass
class Either:
    one: Point | Frozen
    maybe: Point | Frozen | None
    many: list[Point | Frozen]


def test_typed_restore_keeps_init_false_fields(store_target: str) -> None:
    """state(as_type=...) gives back the saved value of init=False fields (dataclass, frozen, attrs), not
    what the default or __post_init__ computes, from instances and from plain data alike."""
    doc, tally, stamp = Doc("one two three"), Tally(1), Stamp(7)
    doc.words, tally.seen = 42, 5
    object.__setattr__(stamp, "by", "me")
    with eventckpt.open(store_target) as store:
        for name, value in (("doc", doc), ("tally", tally), ("stamp", stamp)):
            store.stream(name).save(value)
            assert strict_equal(store.stream(name).state(as_type=type(value)), value), name
        store.stream("plain").save({"text": "a b", "words": 9})
        assert store.stream("plain").state(as_type=Doc).words == 9


def test_typed_restore_into_a_union_of_classes(store_target: str) -> None:
    """A Union of object types (and None) structures in the store that saved the value (which decodes it into
    instances), in another store on the file, and from plain data."""
    value = Either(Frozen("f", Point(1, 2.0)), None, [Point(0, 1.5), Frozen("g", Point(2, 0.0))])
    with eventckpt.open(store_target) as store:
        store.stream("t").save(value)
        assert store.stream("t").state(as_type=Either) == value
        store.stream("plain").save({"one": {"x": 1, "y": 2.0, "tags": ()}, "maybe": {"name": "n", "where":
                                    {"x": 0, "y": 0.0}}, "many": []})
        assert store.stream("plain").state(as_type=Either) == Either(Point(1, 2.0), Frozen("n", Point(0, 0.0)), [])
    with eventckpt.open(store_target) as store:
        assert store.stream("t").state(as_type=Either) == value


def test_typed_restore_mismatch_is_a_serialization_error(store: eventckpt.Store) -> None:
    """Structuring a state that does not fit the requested type raises SerializationError."""
    store.stream("t").save({"x": "not a number", "y": 1.0})
    with pytest.raises(eventckpt.SerializationError):
        store.stream("t").state(as_type=Point)


def _cycle() -> Any:
    a: list[Any] = []
    a.append(a)
    return a


def _deep(n: int) -> Any:
    value: Any = 0
    for _ in range(n):
        value = [value]
    return value


BAD = {
    "open_file": lambda: io.StringIO("x"),
    "lambda": lambda: (lambda: 1),
    "object": lambda: object(),
    "cycle": _cycle,
    "too_deep": lambda: _deep(500),
    "nan": lambda: float("nan"),
    "inf": lambda: float("-inf"),
    "lone_surrogate": lambda: "\ud800",
    "nested_bad": lambda: {"ok": [1, {"bad": {1, object}}]},
    "signaling_nan": lambda: [Decimal("1"), Decimal("sNaN")],  # raises on ==: no later save could compare it
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_unstorable_values_refused_and_nothing_written(store: eventckpt.Store, store_target: str, kind: str) -> None:
    """Unstorable values raise SerializationError naming where they are, and the file is unchanged."""
    task = store.stream("t")
    task.save({"keep": 1})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.SerializationError) as info:
        task.save({"keep": 1, "bad": BAD[kind]()})
    assert info.value.path[:1] == ("bad",)
    assert journal_rows(store_target) == before
    assert task.state() == {"keep": 1} and task.version == 1


def test_nested_path_in_error(store: eventckpt.Store) -> None:
    """The error names the full path of the bad value."""
    with pytest.raises(eventckpt.SerializationError) as info:
        store.stream("t").save({"a": {"b": [0, 1, {"c": object()}]}})
    assert info.value.path == ("a", "b", 2, "c")
    assert "['a']['b'][2]['c']" in str(info.value)


def test_nan_allowed_when_asked(named: dict[str, str]) -> None:
    """allow_nan=True stores NaN and infinities."""
    with eventckpt.open(named["n.db"], allow_nan=True) as store:
        store.stream("t").save({"x": float("nan"), "y": float("inf")})
        state = store.stream("t").state()
    assert state["x"] != state["x"] and state["y"] == float("inf")


class Tag(str):
    pass


class Score(int):
    pass


Pair = collections.namedtuple("Pair", "a b")

SUBCLASSES = {
    "namedtuple": lambda: Pair(1, 2),
    "OrderedDict": lambda: OrderedDict(a=1),
    "defaultdict": lambda: collections.defaultdict(list, a=[1]),
    "Counter": lambda: collections.Counter("aab"),
    "str subclass": lambda: Tag("x"),
    "int subclass": lambda: Score(3),
    "float subclass": lambda: type("Ratio", (float,), {})(0.5),
    "list subclass": lambda: type("Items", (list,), {})([1]),
    "set subclass": lambda: type("Members", (set,), {})({1}),
    "dict key": lambda: {Tag("k"): 1},
}


@pytest.mark.parametrize("kind", sorted(SUBCLASSES))
def test_subclasses_of_builtin_types_are_refused(store: eventckpt.Store, store_target: str, kind: str) -> None:
    """A namedtuple, OrderedDict, defaultdict, Counter or str/int/float subclass (which would come back as
    its base type) raises SerializationError naming where it is and its base type; nothing is written."""
    task = store.stream("t")
    task.save({"keep": 1})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.SerializationError, match="subclass of") as info:
        task.save({"keep": 1, "bad": [SUBCLASSES[kind]()]})
    assert info.value.path[:2] == ("bad", 0)
    assert journal_rows(store_target) == before


def test_enums_and_tracked_nodes_are_not_refused_subclasses(store: eventckpt.Store) -> None:
    """Enums built on str or int, and bools, round-trip as themselves; a tracked state's dicts and lists saved
    into another stream (or a transaction) are stored as plain dicts and lists."""
    class Mood(str, enum.Enum):
        HAPPY = "happy"

    values = {"mood": Mood.HAPPY, "level": Level.LOW, "flags": [True, False], "keys": {Level.LOW: Mood.HAPPY}}
    store.stream("t").save(values)
    assert strict_equal(store.stream("t").state(), values)
    store.stream("t").save({"messages": [{"role": "user"}], "scratch": {"k": [1]}})
    state = store.stream("t").checkout()
    store.stream("other").save({"copy": state["messages"], "deep": [state["scratch"]]})
    with store.stream("other").transaction() as tx:
        tx.set("scratch", state["scratch"])
    got = store.stream("other").state()
    assert strict_equal(got, {"copy": [{"role": "user"}], "deep": [{"k": [1]}], "scratch": {"k": [1]}})


@pytest.mark.parametrize(
    "crafted",
    [
        '{"$object": ["os.system", {"command": "echo pwned"}]}',
        '{"$enum": ["builtins.eval", "1+1"]}',
        '{"$object": ["subprocess.Popen", {"args": ["true"]}]}',
        '{"$unknown": {"module": "os", "name": "system"}}',
    ],
)
def test_crafted_rows_load_as_data(store_target: str, crafted: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored row naming a class or module loads as data: nothing is imported or called."""
    with eventckpt.open(store_target) as store:
        store.stream("t").save({"x": 1})
    with RawSQL(store_target) as raw:
        raw.execute("UPDATE events SET value = ? WHERE path = '$.x'", (crafted,))
    import builtins

    real_import = builtins.__import__
    imported: list[str] = []

    def spy(name: str, *args: Any, **kwargs: Any) -> Any:
        imported.append(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", spy)
    with eventckpt.open(store_target) as store:
        value = store.stream("t").state()["x"]
    monkeypatch.setattr(builtins, "__import__", real_import)
    assert isinstance(value, (dict, str))
    assert not {"os", "subprocess"} & set(imported)


def test_codec_registry_refuses_clashing_names() -> None:
    """Two different classes with one qualified name cannot both be registered."""
    codec = Codec()

    def make() -> type:
        @dataclasses.dataclass
        class Twin:
            a: int

        return Twin

    codec.register(make())
    with pytest.raises(eventckpt.SerializationError):
        codec.register(make())
    with pytest.raises(eventckpt.SerializationError):
        codec.register(int)


def test_sets_encode_canonically() -> None:
    """A set's encoding does not depend on iteration order (diffs stay quiet)."""
    codec = Codec()
    assert codec.encode({3, 1, 2}) == codec.encode({2, 3, 1}) == b'{"$set":[1,2,3]}'


def test_plain_json_is_stored_as_itself(store: eventckpt.Store, store_target: str) -> None:
    """Plain JSON values are stored untagged, readable by sqlite3's JSON functions."""
    store.stream("t").save({"msg": {"role": "user", "n": [1, 2.5, None, True]}})
    with RawSQL(store_target) as raw:
        assert raw.one("SELECT value FROM events") == '{"role":"user","n":[1,2.5,null,true]}'
        extract = "json_extract(value, '$.role')" if raw.kind == "sqlite" else "value::json ->> 'role'"
        assert raw.one(f"SELECT {extract} FROM events") == "user"


def test_stored_codec_writes_back_exactly_what_was_stored() -> None:
    """StoredCodec (what copy, import and retention write with) encodes a decoded stored value back to the
    same JSON bytes whatever classes it knows, while dicts (pairs ones too), lists and numbers stay editable."""
    from eventckpt.codec import Stored, StoredCodec

    stored = Codec([Color, Level, Point, Span, Frozen], allow_nan=True).encode({**EXACT, "nan": float("nan")})
    codec = StoredCodec()
    value = codec.decode(stored)
    assert codec.encode(value) == stored and codec.encode(codec.copy(value)) == stored
    assert type(value["enum"]) is Stored and type(value["int_keys"]) is dict and value["ints"][4] == 2**64
    value["int_keys"]["three"] = 3  # an event's set through a dict stored as pairs
    assert orjson.loads(codec.encode(value["int_keys"])) == {"$dict": [[1, "one"], [2, "two"], ["three", 3]]}


def test_unknown_classes_kept_by_name_round_trip_exactly() -> None:
    """With unknown_types="keep", an enum or object of an unknown class decodes to an Unregistered showing its
    class name, nested ones too, and encodes back to the same bytes (and `same`) however often it is copied."""
    from eventckpt.codec import Unregistered
    from eventckpt.ops import same

    stored = (b'{"c":{"$enum":["gone.Color",1]},"p":{"$object":["gone.Pt",{"x":1,"at":{"$tuple":[1,2]},'
              b'"inner":{"$enum":["gone.Level",[1.0]]}}]},"s":{"$set":[{"$enum":["gone.Color",2]},'
              b'{"$object":["gone.Frozen",{"a":"b"}]}]},"k":{"$dict":[[{"$enum":["gone.Color",1]},"red"]]}}')
    codec = Codec(unknown_types="keep")
    value = codec.decode(stored)
    assert value["c"] == Unregistered("enum", "gone.Color", 1) and repr(value["c"]) == "gone.Color(1)"
    assert repr(value["p"]) == "gone.Pt(x=1, at=(1, 2), inner=gone.Level([1.0]))"
    assert value["s"] == {Unregistered("enum", "gone.Color", 2), Unregistered("object", "gone.Frozen", {"a": "b"})}
    assert value["k"] == {Unregistered("enum", "gone.Color", 1): "red"}
    assert codec.encode(value) == stored and codec.encode(codec.copy(value)) == stored
    assert same(codec.copy(value), value) and codec.encode_copy(value)[0] == stored
    assert Codec().decode(b'{"$enum":["gone.Color",1]}') == 1  # the default is unchanged: plain data


def test_unregistered_values_equal_only_the_same_class_and_value() -> None:
    """An Unregistered is never equal (or `same`) to plain data, to another class with equal fields or value,
    or to a value of another type (1.0 for 1); equal ones hash alike."""
    from eventckpt.codec import Unregistered
    from eventckpt.ops import same

    red, pt = Unregistered("enum", "m.Color", 1), Unregistered("object", "m.Pt", {"x": 1})
    for other in (1, Unregistered("enum", "m.Level", 1), Unregistered("object", "m.Color", {"value": 1})):
        assert red != other and not same(red, other)
    for other in ({"x": 1}, Unregistered("object", "m.Qt", {"x": 1}), Unregistered("enum", "m.Pt", {"x": 1})):
        assert pt != other and not same(pt, other)
    assert not same(red, Unregistered("enum", "m.Color", 1.0)) and not same(pt, Unregistered("object", "m.Pt", {"x": True}))
    assert same(pt, Unregistered("object", "m.Pt", {"x": 1})) and hash(pt) == hash(Unregistered("object", "m.Pt", {"x": 1}))
    assert hash(Unregistered("enum", "m.E", {1})) == hash(Unregistered("enum", "m.E", frozenset({1})))
    with pytest.raises(ValueError):
        Unregistered("object", "m.Pt", [1])
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.open(":memory:", unknown_types="strict")


_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, -0.0]),
                    st.sampled_from(["", "a", '{"$tuple":[1]}', "$", '"{\\"$']),
                    st.sampled_from([dt.date(2026, 1, 2), Decimal("1.50"), b"\x00$"]))
_TAGGED = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple), st.frozensets(st.integers(0, 3), max_size=2),
    st.dictionaries(st.sampled_from(["k", "$k", "$tuple", "a b"]), inner, max_size=3)), max_leaves=8)


@given(st.lists(_TAGGED, max_size=6), st.booleans(), st.booleans())
def test_decode_many_equals_decoding_each_text(items: list[Any], as_run: bool, stored: bool) -> None:
    """Decoding many stored texts at once gives exactly what decoding each gives (a top-level tuple is
    untagged without a walk below it only when its text holds no other tag), runs of items included, also
    with the codec that keeps tagged forms as stored (import, copy, retention)."""
    codec = StoredCodec() if stored else Codec()
    texts = [codec.encode_text(item) for item in items]
    expected = [codec.decode(text) for text in texts]
    if as_run and texts:  # the first two texts as one run of array items, as an extend's value is stored
        texts[:2] = [",".join(texts[:2])]
    got = codec.decode_many(texts)
    assert [type(x) for x in got] == [type(x) for x in expected]
    assert strict_equal(got, expected) if not stored else got == expected
