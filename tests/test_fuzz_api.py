"""Random values and arguments thrown at the whole public API: every call succeeds or raises one of
eventckpt's own errors (never a driver error, TypeError or KeyError), a failed call leaves every row of
the file unchanged, and what one connection sees is what a fresh connection reads back."""

from __future__ import annotations

import datetime as dt
import tempfile
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import apsw
from hypothesis import given, settings
from hypothesis import strategies as st

import eventckpt

from .conftest import journal_rows

GOOD_NAMES = ["t", "u", "t~1", "a'); DROP TABLE events; --"]
BAD_NAMES = ["", "x" * 1025, "bad\ud800", "nul\x00"]
KEYS = ["a", "b", "msgs", "", "$x", "a.b", 'q"k', "bad\ud800"]

text = st.text(
    alphabet=st.characters(exclude_categories=(), include_characters="\ud800\x00\"'\\$.[]"), max_size=12
)
weird = st.sampled_from([object(), print, int, float("nan"), float("inf"), 2**64, -(2**70), b"\x00\xff", "\udfff"])
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), text, st.binary(max_size=8),
    st.sampled_from([dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), dt.date(2024, 1, 2), uuid.UUID(int=7),
                     Decimal("1.25"), frozenset({1, 2})]),
    weird,
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(st.one_of(st.sampled_from(KEYS), text, st.integers()), inner, max_size=4),
        st.sets(st.integers(), max_size=3),
    ),
    max_leaves=12,
)
anything = st.one_of(values, st.sampled_from([None, 0, 1, 2, -1, 3]))


def mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any] = anything) -> st.SearchStrategy[Any]:
    """Plausible arguments three times in four, so that calls get past the first check."""
    return st.tuples(st.integers(0, 3), good, bad).map(lambda t: t[2] if t[0] == 0 else t[1])


plain = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=5)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(KEYS[:4]), inner, max_size=3)),
    max_leaves=6,
)
names = mostly(st.sampled_from(GOOD_NAMES), st.one_of(st.sampled_from(BAD_NAMES), anything))
versions = mostly(st.integers(-1, 6))
paths = mostly(
    st.one_of(st.sampled_from(KEYS[:4]), st.tuples(st.sampled_from(KEYS[:4]), st.one_of(st.sampled_from(KEYS[:4]), st.integers(-3, 3)))),
    st.one_of(st.sampled_from(KEYS), anything),
)
states = mostly(st.dictionaries(st.sampled_from(KEYS[:4]), mostly(plain, values), max_size=4))
options = st.fixed_dictionaries(
    {},
    optional={
        "metadata": mostly(st.dictionaries(st.sampled_from(KEYS[:4]), plain, max_size=2)),
        "name": mostly(st.text(max_size=5)),
        "auto": mostly(st.booleans()),
        "expected_version": mostly(st.integers(0, 6)),
        "checkpoint_id": mostly(st.sampled_from(["c1", "c2"])),
    },
)
tx_ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), paths, mostly(plain, values)),
        st.tuples(st.just("delete"), paths),
        st.tuples(st.just("append"), paths, mostly(plain, values)),
        st.tuples(st.just("extend"), paths, mostly(st.lists(plain, max_size=3))),
        st.tuples(st.just("incr"), paths, mostly(st.one_of(st.integers(-5, 5), st.floats()))),
        st.tuples(st.just("truncate"), paths, mostly(st.integers(-1, 3))),
    ),
    max_size=4,
)
calls = st.one_of(
    st.tuples(st.just("save"), names, states, mostly(st.none() | st.dictionaries(st.sampled_from(["in", "out"]), st.integers(0, 9))), options),
    st.tuples(st.just("transaction"), names, tx_ops, st.dictionaries(st.sampled_from(["in", "out"]) | text, versions, max_size=2), options),
    st.tuples(st.just("get"), names, versions),
    st.tuples(st.just("state"), names, versions),
    st.tuples(st.just("find"), names, mostly(st.sampled_from(["c1", "c2"]))),
    st.tuples(st.just("rollback"), names, versions, options),
    st.tuples(st.just("fork"), names, versions, st.none() | names),
    st.tuples(st.just("delete_stream"), names, mostly(st.booleans())),
    st.tuples(st.just("read"), names),
)


def perform(store: eventckpt.Store, call: tuple[Any, ...]) -> None:
    kind, name = call[0], call[1]
    if kind == "delete_stream":
        store.delete_stream(name, forks=call[2])
        return
    task = store.stream(name)
    if kind == "save":
        task.save(call[2], call[3], **call[4])
    elif kind == "transaction":
        with task.transaction(**call[4]) as tx:
            for op, path, *rest in call[2]:
                getattr(tx, op)(path, *rest)
            tx.add_usage(**{k: v for k, v in call[3].items() if type(k) is str})
    elif kind == "get":
        task.get(call[2]).values
    elif kind == "state":
        task.state(call[2])
    elif kind == "find":
        found = task.find(call[2])
        if found is not None:
            found.values
    elif kind == "rollback":
        opts = {k: v for k, v in call[3].items() if k in ("metadata", "name", "expected_version")}
        task.rollback(call[2], **opts)
    elif kind == "fork":
        task.fork(at=call[2], task_id=call[3])
    elif kind == "read":
        (task.version, len(task), task.latest, task.parent, task.list_versions(), store.streams())


def _state(store: eventckpt.Store, name: str) -> Any:
    """A stream's head state; None for one without versions yet (a fork at 0: it has no state)."""
    stream = store.stream(name)
    return stream.state() if stream.version else None


@settings(max_examples=120)
@given(st.lists(calls, min_size=1, max_size=12))
def test_random_calls_raise_only_eventckpt_errors(script: list[tuple[Any, ...]]) -> None:
    """Any sequence of calls with random arguments succeeds or raises an EventCkptError that wrote nothing."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.db"
        with eventckpt.open(path) as store:
            store.stream("t").save({"a": 1, "msgs": [1, 2], "b": {"c": 1.5}})
            for call in script:
                before = journal_rows(path)
                try:
                    perform(store, call)
                except eventckpt.EventCkptError:
                    assert journal_rows(path) == before, f"a failed {call[0]} changed the file"
            seen = {name: _state(store, name) for name in store.streams()}
        with eventckpt.open(path) as fresh:
            assert {name: _state(fresh, name) for name in fresh.streams()} == seen
        conn = apsw.Connection(str(path))
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        conn.close()
