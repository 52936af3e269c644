"""Invariant 6: bad input raises a typed eventckpt error before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import eventckpt

from .conftest import RawSQL, journal_rows

BAD_SAVES: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "values not a mapping": (([1, 2],), {}),
    "values a string": (("state",), {}),
    "int top-level key": (({1: "a"},), {}),
    "quote in top-level key": (({'a"b': 1},), {}),
    "metadata not a mapping": (({"a": 1},), {"metadata": ["x"]}),
    "metadata int key": (({"a": 1},), {"metadata": {1: "x"}}),
    "metadata unstorable": (({"a": 1},), {"metadata": {"f": object()}}),
    "usage not a mapping": (({"a": 1}, 5), {}),
    "usage str count": (({"a": 1}, {"input_tokens": "5"}), {}),
    "usage bool count": (({"a": 1}, {"input_tokens": True}), {}),
    "usage nan": (({"a": 1}, {"input_tokens": float("nan")}), {}),
    "name not str": (({"a": 1},), {"name": 5}),
    "name too long": (({"a": 1},), {"name": "n" * 5000}),
    "auto not bool": (({"a": 1},), {"auto": "yes"}),
    "expected negative": (({"a": 1},), {"expected_version": -1}),
    "expected float": (({"a": 1},), {"expected_version": 1.0}),
    "expected future": (({"a": 1},), {"expected_version": 10}),
    "checkpoint id empty": (({"a": 1},), {"checkpoint_id": ""}),
    "checkpoint id int": (({"a": 1},), {"checkpoint_id": 7}),
}


@pytest.mark.parametrize("case", sorted(BAD_SAVES))
def test_bad_save_arguments_write_nothing(store: eventckpt.Store, store_target: str, case: str) -> None:
    """Each bad save argument raises an eventckpt error and leaves every row of the file unchanged."""
    task = store.stream("t")
    task.save({"a": 0}, {"input_tokens": 1})
    before = journal_rows(store_target)
    args, kwargs = BAD_SAVES[case]
    with pytest.raises(eventckpt.EventCkptError):
        task.save(*args, **kwargs)
    assert journal_rows(store_target) == before
    assert task.version == 1 and task.state() == {"a": 0}


@pytest.mark.parametrize("name", ["", "x" * 1025, "nul\x00byte", None, 5, b"bytes"])
def test_bad_stream_names(store: eventckpt.Store, name: Any) -> None:
    """Empty, huge, NUL-holding and non-str stream names are refused."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        store.stream(name)


def test_sql_in_names_is_data(store: eventckpt.Store) -> None:
    """Stream names, metadata keys and state keys holding SQL are stored and read back as data."""
    name = "t'); DROP TABLE events; --"
    task = store.stream(name)
    task.save({"x') OR 1=1 --": 1}, metadata={"'; DELETE FROM versions; --": "v"})
    assert store.streams() == [name]
    assert task.state() == {"x') OR 1=1 --": 1}
    assert task.latest.metadata == {"'; DELETE FROM versions; --": "v"}


SURROGATE = "bad\ud800text"
SURROGATE_CALLS = {
    "task_id": lambda store: store.stream(SURROGATE),
    "fork task_id": lambda store: store.stream("t").fork(task_id=SURROGATE),
    "delete_stream": lambda store: store.delete_stream(SURROGATE),
    "top-level key": lambda store: store.stream("t").save({SURROGATE: 1}),
    "nested key": lambda store: store.stream("t").save({"a": {SURROGATE: 1}}),
    "value": lambda store: store.stream("t").save({"a": SURROGATE}),
    "name": lambda store: store.stream("t").save({"a": 1}, name=SURROGATE),
    "checkpoint_id": lambda store: store.stream("t").save({"a": 1}, checkpoint_id=SURROGATE),
    "find": lambda store: store.stream("t").find(SURROGATE),
    "usage key": lambda store: store.stream("t").save({"a": 1}, {SURROGATE: 1}),
    "metadata key": lambda store: store.stream("t").save({"a": 1}, metadata={SURROGATE: 1}),
    "transaction path": lambda store: _tx(store, lambda tx: tx.set(("a", SURROGATE), 1)),
    "transaction usage": lambda store: _tx(store, lambda tx: tx.add_usage(**{SURROGATE: 1})),
}


def _tx(store: eventckpt.Store, record: Any) -> None:
    _commit(store.stream("t"), record)


def _commit(task: eventckpt.CheckpointStore, record: Any, **options: Any) -> None:
    with task.transaction(**options) as tx:
        record(tx)


@pytest.mark.parametrize("case", sorted(SURROGATE_CALLS))
def test_lone_surrogates_refused(store: eventckpt.Store, store_target: str, case: str) -> None:
    """A str with a lone surrogate (no UTF-8 form) in any argument raises an eventckpt error, not the driver's."""
    store.stream("t").save({"a": {"b": 1}})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.EventCkptError):
        SURROGATE_CALLS[case](store)
    assert journal_rows(store_target) == before


@pytest.mark.parametrize("path", ["", "a\x00b.db", "bad\ud800.db"])
def test_bad_file_paths_refused(tmp_path: Path, path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty path (SQLite's private temp database), a NUL or a lone surrogate in the path is refused."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.open(path)
    assert list(tmp_path.iterdir()) == []


NUMBER_OVERFLOWS = {
    "usage int past 64 bits": lambda task: task.save({"a": 1}, {"tokens": 2**64}),
    "incr by int past 64 bits": lambda task: _commit(task, lambda tx: tx.incr("n", 2**70)),
    "usage sum past 64 bits": lambda task: _commit(task, lambda tx: tx.add_usage(tokens=2**63 - 1)),
    "usage sum to inf": lambda task: _commit(task, lambda tx: tx.add_usage(cost=1.5e308)),
    "incr to inf": lambda task: _commit(task, lambda tx: tx.incr("f", 1.5e308)),
}


@pytest.mark.parametrize("case", sorted(NUMBER_OVERFLOWS))
def test_numbers_that_json_cannot_hold_are_refused(store: eventckpt.Store, store_target: str, case: str) -> None:
    """Counters and increments beyond 64-bit ints or finite floats raise an eventckpt error and write nothing."""
    task = store.stream("t")
    task.save({"n": 1, "f": 1.5e308}, {"tokens": 1, "cost": 1.5e308})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.EventCkptError):
        NUMBER_OVERFLOWS[case](task)
    assert journal_rows(store_target) == before
    assert task.state() == {"n": 1, "f": 1.5e308} and task.latest.token_usage == {"tokens": 1, "cost": 1.5e308}
    _commit(task, lambda tx: tx.incr("n"))  # the stream stays writable
    assert task.state()["n"] == 2


# Every argument of every public method, with the test that says which candidate values are of a valid
# type for it; every other candidate must raise an eventckpt error and write nothing.
def _any_int(v: Any) -> bool:
    return type(v) is int


def _opt(pred: Any) -> Any:
    return lambda v: v is None or pred(v)


def _text(v: Any) -> bool:
    return type(v) is str and v != "" and "\ud800" not in v


def _mapping(v: Any) -> bool:
    return type(v) is dict and all(type(k) is str for k in v)


CANDIDATES: list[Any] = [
    None, True, 0, 1, -1, 2**70, 1.5, float("nan"), "", "x", "\ud800", b"x", [], [1], (), ("x",), {},
    {"a": 1}, {1: "a"}, object(), int, print,
]
ARGUMENTS: dict[str, tuple[Any, Any]] = {
    "Store.stream(task_id)": (lambda s, v: s.stream(v), _text),
    "Store.delete_stream(task_id)": (lambda s, v: s.delete_stream(v), _text),
    "Store.delete_stream(forks)": (lambda s, v: s.delete_stream("t", forks=v), lambda v: type(v) is bool),
    "get(version)": (lambda s, v: s.stream("t").get(v), _any_int),
    "get(as_type)": (lambda s, v: s.stream("t").get(1, as_type=v).values, lambda v: v is None or v is int),
    "find(checkpoint_id)": (lambda s, v: s.stream("t").find(v), lambda v: type(v) is str and "\ud800" not in v),
    "state(version)": (lambda s, v: s.stream("t").state(v), _opt(_any_int)),
    "state(as_type)": (lambda s, v: s.stream("t").state(as_type=v), lambda v: v is None),
    "save(values)": (lambda s, v: s.stream("t").save(v), _mapping),
    "save(token_usage)": (lambda s, v: s.stream("t").save({"a": 2}, v), _opt(lambda v: v in ({}, {"a": 1}))),
    "save(metadata)": (lambda s, v: s.stream("t").save({"a": 2}, metadata=v), _opt(lambda v: v in ({}, {"a": 1}))),
    "save(name)": (lambda s, v: s.stream("t").save({"a": 2}, name=v), _opt(lambda v: type(v) is str and "\ud800" not in v)),
    "save(auto)": (lambda s, v: s.stream("t").save({"a": 2}, auto=v), lambda v: type(v) is bool),
    "save(expected_version)": (lambda s, v: s.stream("t").save({"a": 2}, expected_version=v), _opt(lambda v: v == 1)),
    "save(checkpoint_id)": (lambda s, v: s.stream("t").save({"a": 2}, checkpoint_id=v), _opt(_text)),
    "transaction(metadata)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set("a", 2), metadata=v), _opt(lambda v: v in ({}, {"a": 1}))),
    "transaction(name)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set("a", 2), name=v), _opt(lambda v: type(v) is str and "\ud800" not in v)),
    "transaction(auto)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set("a", 2), auto=v), lambda v: type(v) is bool),
    "transaction(expected_version)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set("a", 2), expected_version=v), _opt(lambda v: v == 1)),
    "transaction(checkpoint_id)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set("a", 2), checkpoint_id=v), _opt(_text)),
    "tx.set(path)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set(v, 2)), lambda v: v in ("", "x", ("x",))),
    "tx.set(value)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.set("a", v)), lambda v: v is not object and type(v) not in (object, type(print)) and v is not int and not (type(v) is float and v != v) and v != "\ud800"),
    "tx.delete(path)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.delete(v)), lambda v: False),
    "tx.append(path)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.append(v, 1)), lambda v: v in ("", "x", ("x",))),
    "tx.extend(path)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.extend(v, [1])), lambda v: v in ("", "x", ("x",))),
    "tx.incr(path)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.incr(v)), lambda v: v in ("", "x", ("x",))),
    "tx.truncate(path)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.truncate(v, 0)), lambda v: False),
    "Checkpoint.from_dict(data)": (lambda s, v: eventckpt.Checkpoint.from_dict(v), lambda v: False),
    "tx.extend(items)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.extend("l", v)), lambda v: type(v) in (list, tuple)),
    "tx.incr(n)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.incr("a", v)), lambda v: v in (0, 1, -1, 1.5) and type(v) is not bool),
    "tx.truncate(length)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.truncate("l", v)), lambda v: v in (0, 1) and type(v) is int),
    "tx.add_usage(counter)": (lambda s, v: _commit(s.stream("t"), lambda tx: tx.add_usage(tokens=v)), lambda v: v in (0, 1, 1.5) and type(v) is not bool),
    "save(add_usage)": (lambda s, v: s.stream("t").save({"a": 1}, add_usage=v), _opt(lambda v: v in ({}, {"a": 1}))),
    "rollback(to)": (lambda s, v: s.stream("t").rollback(v), lambda v: v == 1 and type(v) is int),
    "rollback(metadata)": (lambda s, v: s.stream("t").rollback(1, metadata=v), _opt(lambda v: v in ({}, {"a": 1}))),
    "rollback(name)": (lambda s, v: s.stream("t").rollback(1, name=v), _opt(lambda v: type(v) is str and "\ud800" not in v)),
    "rollback(expected_version)": (lambda s, v: s.stream("t").rollback(1, expected_version=v), _opt(lambda v: v == 1)),
    "fork(at)": (lambda s, v: s.stream("t").fork(at=v, task_id="f"), _opt(lambda v: v in (0, 1) and type(v) is int)),
    "fork(task_id)": (lambda s, v: s.stream("t").fork(task_id=v), _opt(lambda v: _text(v) and v != "t")),
}


@pytest.mark.parametrize("argument", sorted(ARGUMENTS))
def test_wrong_types_for_every_argument(store_target: str, argument: str) -> None:
    """A value of the wrong type for any argument of any public method raises an eventckpt error and writes nothing."""
    path = store_target
    call, valid = ARGUMENTS[argument]
    with eventckpt.open(path) as store:
        store.stream("t").save({"a": 1, "l": [1, 2]})
        before = journal_rows(path)
        for value in (v for v in CANDIDATES if not valid(v)):
            try:
                call(store, value)
            except eventckpt.EventCkptError:
                pass
            else:
                raise AssertionError(f"{argument} accepted {value!r}")
            assert journal_rows(path) == before, f"{argument}={value!r} changed the file"
        assert store.stream("t").state() == {"a": 1, "l": [1, 2]}


OPEN_ARGUMENTS: dict[str, Any] = {
    "durability": lambda v: v in ("normal", "full"),
    "snapshots": lambda v: v is None,
    "timeout": lambda v: type(v) in (int, float) and 0 <= v < 86400,
    "readonly": lambda v: type(v) is bool,
    "create": lambda v: type(v) is bool,
    "types": lambda v: type(v) in (list, tuple, dict) and not v,
    "allow_nan": lambda v: type(v) is bool,
    "cache_size": lambda v: type(v) is int and v >= 1,
    "vfs": lambda v: v is None,
}


@pytest.mark.parametrize("argument", sorted(OPEN_ARGUMENTS))
def test_wrong_types_for_every_open_argument(tmp_path: Path, argument: str) -> None:
    """A value of the wrong type for any keyword of open() raises an eventckpt error and creates no file."""
    for value in (v for v in CANDIDATES if not OPEN_ARGUMENTS[argument](v)):
        with pytest.raises(eventckpt.EventCkptError):
            eventckpt.open(tmp_path / "o.db", **{argument: value})
        assert list(tmp_path.iterdir()) == [], f"open({argument}={value!r}) created a file"


@pytest.mark.parametrize("field", ["tail_ratio", "min_tail_bytes", "event_overhead", "share_min_bytes", "enabled"])
def test_wrong_snapshot_policy_fields(field: str) -> None:
    """SnapshotPolicy refuses negative, non-finite and wrongly typed fields."""
    for value in ("1", -1, float("nan"), float("inf"), None if field != "share_min_bytes" else 1.5):
        if field == "enabled" and value in (-1,):
            continue
        with pytest.raises(eventckpt.InvalidArgumentError):
            eventckpt.SnapshotPolicy(**{field: value})


# -- unstorable values through every channel (test_codec.py covers save(values)) -------------------


def _unstorable() -> dict[str, Any]:
    from .test_codec import BAD, _deep

    return {**{k: v for k, v in BAD.items()}, "deep_100k": lambda: _deep(100_000)}


CHANNELS: dict[str, Any] = {
    "tx.set": lambda task, v: _commit(task, lambda tx: tx.set("x", v)),
    "tx.set nested": lambda task, v: _commit(task, lambda tx: tx.set(("d", "k"), v)),
    "tx.append": lambda task, v: _commit(task, lambda tx: tx.append("l", v)),
    "tx.extend": lambda task, v: _commit(task, lambda tx: tx.extend("l", [1, v])),
    "save nested": lambda task, v: task.save({"d": {"k": [1, {"v": v}]}, "l": [1, 2]}),
    "metadata": lambda task, v: task.save({"d": {"k": 2}}, metadata={"m": v}),
    "rollback metadata": lambda task, v: task.rollback(1, metadata={"m": v}),
    "transaction metadata": lambda task, v: _commit(task, lambda tx: tx.set("x", 1), metadata={"m": v}),
}


@pytest.mark.parametrize("channel", sorted(CHANNELS))
@pytest.mark.parametrize("kind", sorted(_unstorable()))
def test_unstorable_values_through_every_channel(store: eventckpt.Store, store_target: str, channel: str, kind: str) -> None:
    """Unserializable values, NaN/inf, cycles and 100 000-deep nesting raise SerializationError through
    transactions, nested saves and metadata alike; no row changes and the stream stays writable."""
    task = store.stream("t")
    task.save({"d": {"k": 1}, "l": [1, 2]})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.SerializationError):
        CHANNELS[channel](task, _unstorable()[kind]())
    assert journal_rows(store_target) == before
    assert task.state() == {"d": {"k": 1}, "l": [1, 2]}
    _commit(task, lambda tx: tx.append("l", 3))
    assert task.state() == {"d": {"k": 1}, "l": [1, 2, 3]}


def test_deep_path_refused(store: eventckpt.Store, store_target: str) -> None:
    """A transaction path 100 000 keys deep raises PathError (no recursion error) and writes nothing."""
    task = store.stream("t")
    task.save({"a": {}})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.PathError):
        _commit(task, lambda tx: tx.set(("a",) + ("b",) * 100_000, 1))
    assert journal_rows(store_target) == before


# -- sizes: a 50 MB value is accepted; beyond the engine's limit is refused -----------------------


def test_fifty_megabyte_value_round_trips(store_target: str) -> None:
    """A 50 MB value is accepted (values are limited only by the engine's string limit, 1 GB by default) and
    restores exactly, also after reopening; saving it again unchanged costs no new copy."""
    path = store_target
    big = "x" * 50_000_000
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"small": 1})
        task.save({"small": 1, "big": big})
        task.save({"small": 2, "big": big})
    with eventckpt.open(path) as store:
        assert store.stream("t").state(2)["big"] == big and store.stream("t").state() == {"small": 2, "big": big}
    with RawSQL(path) as raw:
        event_bytes = dict(raw.execute("SELECT version, event_bytes FROM versions"))
    assert event_bytes[2] > len(big) and event_bytes[3] < 10  # the unchanged value is not stored again


@pytest.mark.parametrize("how", ["save", "transaction", "metadata"])
def test_value_over_the_engine_limit_refused(db_path: Path, how: str) -> None:
    """A value longer than the engine's length limit (lowered to 1 MB here) raises StorageError, no row
    changes, and the stream stays writable."""
    import apsw

    with eventckpt.open(db_path) as store:
        task = store.stream("t")
        task.save({"a": 1})
        store.core.backend.journal.conn.limit(apsw.SQLITE_LIMIT_LENGTH, 1_000_000)
        before = journal_rows(db_path)
        big = "y" * 2_000_000
        with pytest.raises(eventckpt.StorageError, match="too big"):
            if how == "save":
                task.save({"a": 1, "big": big})
            elif how == "transaction":
                _commit(task, lambda tx: tx.set("big", big))
            else:
                task.save({"a": 2}, metadata={"note": big})
        assert journal_rows(db_path) == before
        task.save({"a": 2})
        assert task.state() == {"a": 2} and task.version == 2


# -- versions: negative, zero and future ----------------------------------------------------------

VERSION_CALLS: dict[str, Any] = {
    "get": lambda task, v: task.get(v),
    "state": lambda task, v: task.state(v),
    "fork at": lambda task, v: task.fork(at=v),
    "rollback to": lambda task, v: task.rollback(v),
    "save expected_version": lambda task, v: task.save({"a": 9}, expected_version=v),
    "transaction expected_version": lambda task, v: _commit(task, lambda tx: tx.set("a", 9), expected_version=v),
    "rollback expected_version": lambda task, v: task.rollback(1, expected_version=v),
}


@pytest.mark.parametrize("version", [-(2**70), -1, 0, 3, 4, 2**63, 2**70])
@pytest.mark.parametrize("call", sorted(VERSION_CALLS))
def test_negative_zero_and_future_versions(store: eventckpt.Store, store_target: str, call: str, version: int) -> None:
    """A version that does not exist (negative, future, beyond 64 bits) raises VersionNotFoundError,
    ConflictError or InvalidArgumentError and writes nothing. Version 0 names no checkpoint: get, state
    and rollback refuse it; only fork(at=0) takes it, to start an empty lineage in the same tree."""
    task = store.stream("t")
    task.save({"a": 1})
    task.save({"a": 2})
    before = journal_rows(store_target)
    if version == 0 and call == "fork at":
        fork = task.fork(at=0)
        assert fork.version == 0 and fork.parent == eventckpt.ForkOrigin("t", 0)
        return
    else:
        with pytest.raises((eventckpt.VersionNotFoundError, eventckpt.ConflictError, eventckpt.InvalidArgumentError)):
            VERSION_CALLS[call](task, version)
    assert journal_rows(store_target) == before


@pytest.mark.parametrize("name", ["", "x" * 1025, "y" * 100_000])
def test_empty_and_huge_names_everywhere(store: eventckpt.Store, store_target: str, name: str) -> None:
    """Empty and over-long stream names are refused by fork, delete_stream and stream alike; a 1024-character
    name is the longest accepted."""
    task = store.stream("t")
    task.save({"a": 1})
    before = journal_rows(store_target)
    for call in (lambda: store.stream(name), lambda: task.fork(task_id=name), lambda: store.delete_stream(name)):
        with pytest.raises(eventckpt.InvalidArgumentError):
            call()
    assert journal_rows(store_target) == before
    longest = "z" * 1024
    task.fork(task_id=longest).save({"b": 2})
    assert store.stream(longest).state() == {"b": 2}
