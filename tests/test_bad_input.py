"""Invariant 6: bad input raises a typed eventckpt error before anything is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import eventckpt

from .conftest import journal_rows

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
def test_bad_save_arguments_write_nothing(store: eventckpt.Store, db_path: Path, case: str) -> None:
    """Each bad save argument raises an eventckpt error and leaves every row of the file unchanged."""
    task = store.stream("t")
    task.save({"a": 0}, {"input_tokens": 1})
    before = journal_rows(db_path)
    args, kwargs = BAD_SAVES[case]
    with pytest.raises(eventckpt.EventCkptError):
        task.save(*args, **kwargs)
    assert journal_rows(db_path) == before
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
    "transaction usage": lambda store: _tx(store, lambda tx: tx.usage(**{SURROGATE: 1})),
}


def _tx(store: eventckpt.Store, record: Any) -> None:
    with store.stream("t").transaction() as tx:
        record(tx)


@pytest.mark.parametrize("case", sorted(SURROGATE_CALLS))
def test_lone_surrogates_refused(store: eventckpt.Store, db_path: Path, case: str) -> None:
    """A str with a lone surrogate (no UTF-8 form) in any argument raises an eventckpt error, not the driver's."""
    store.stream("t").save({"a": {"b": 1}})
    before = journal_rows(db_path)
    with pytest.raises(eventckpt.EventCkptError):
        SURROGATE_CALLS[case](store)
    assert journal_rows(db_path) == before


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
    "usage sum past 64 bits": lambda task: _commit(task, lambda tx: tx.usage(tokens=2**63 - 1)),
    "usage sum to inf": lambda task: _commit(task, lambda tx: tx.usage(cost=1.5e308)),
    "incr to inf": lambda task: _commit(task, lambda tx: tx.incr("f", 1.5e308)),
}


def _commit(task: eventckpt.CheckpointStore, record: Any) -> None:
    with task.transaction() as tx:
        record(tx)


@pytest.mark.parametrize("case", sorted(NUMBER_OVERFLOWS))
def test_numbers_that_json_cannot_hold_are_refused(store: eventckpt.Store, db_path: Path, case: str) -> None:
    """Counters and increments beyond 64-bit ints or finite floats raise an eventckpt error and write nothing."""
    task = store.stream("t")
    task.save({"n": 1, "f": 1.5e308}, {"tokens": 1, "cost": 1.5e308})
    before = journal_rows(db_path)
    with pytest.raises(eventckpt.EventCkptError):
        NUMBER_OVERFLOWS[case](task)
    assert journal_rows(db_path) == before
    assert task.state() == {"n": 1, "f": 1.5e308} and task.latest.token_usage == {"tokens": 1, "cost": 1.5e308}
    _commit(task, lambda tx: tx.incr("n"))  # the stream stays writable
    assert task.state()["n"] == 2
