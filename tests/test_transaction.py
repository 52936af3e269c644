"""transaction(): explicit operations committed as one version, or nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

import eventckpt

from .conftest import journal_rows


def test_operations_commit_as_one_version(store: eventckpt.Store) -> None:
    """set/append/extend/incr/delete/truncate recorded in a block become one new version on exit."""
    task = store.stream("t")
    task.save({"messages": [], "scratch": {"k1": "a", "k2": "b"}, "gone": 1, "n": 0})
    with task.transaction(metadata={"node": "agent"}, name="step") as tx:
        tx.append("messages", {"role": "user", "content": "hi"})
        tx.extend("messages", [{"role": "assistant", "content": "yo"}, {"role": "tool", "content": "42"}])
        tx.set(("scratch", "k1"), "changed")
        tx.incr("n", 5).incr("n")
        tx.incr(("scratch", "count"))
        tx.delete("gone")
        tx.truncate("messages", 2)
        tx.add_usage(input_tokens=120, output_tokens=40)
    assert tx.checkpoint is not None and tx.checkpoint.version == 2 and task.version == 2
    assert task.state() == {
        "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "scratch": {"k1": "changed", "k2": "b", "count": 1},
        "n": 6,
    }
    assert tx.checkpoint.name == "step" and tx.checkpoint.metadata == {"node": "agent"}


def test_usage_adds_to_previous_counters(store: eventckpt.Store) -> None:
    """usage(**counters) adds to the previous version's cumulative counters."""
    task = store.stream("t")
    task.save({}, {"input_tokens": 100})
    with task.transaction() as tx:
        tx.add_usage(input_tokens=20, output_tokens=5)
    with task.transaction() as tx:
        tx.add_usage(input_tokens=1)
    assert task.latest.token_usage == {"input_tokens": 121, "output_tokens": 5}


def test_exception_in_block_writes_nothing(store: eventckpt.Store, store_target: str) -> None:
    """An exception inside the block propagates and nothing is committed."""
    task = store.stream("t")
    task.save({"a": 1})
    before = journal_rows(store_target)
    with pytest.raises(RuntimeError):
        with task.transaction() as tx:
            tx.set("a", 2)
            raise RuntimeError("tool failed")
    assert task.version == 1 and task.state() == {"a": 1}
    assert journal_rows(store_target) == before


@pytest.mark.parametrize(
    "record",
    [
        lambda tx: tx.append("a", 1),  # a is a number
        lambda tx: tx.incr("s", 1),  # s is a string
        lambda tx: tx.delete("missing"),
        lambda tx: tx.set(("missing", "x"), 1),
        lambda tx: tx.set(("l", 5), 1),  # index out of range
        lambda tx: tx.set(("l", "k"), 1),  # a list indexed by a key
        lambda tx: tx.truncate("s", 0),
    ],
)
def test_operations_that_do_not_fit_write_nothing(store: eventckpt.Store, store_target: str, record) -> None:
    """An operation that does not fit the head state raises PathError on commit and writes nothing."""
    task = store.stream("t")
    task.save({"a": 1, "s": "x", "l": [1, 2]})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.PathError):
        with task.transaction() as tx:
            tx.set("fine", True)
            record(tx)
    assert journal_rows(store_target) == before
    assert task.state() == {"a": 1, "s": "x", "l": [1, 2]}


def test_negative_index_is_resolved(store: eventckpt.Store) -> None:
    """A negative list index addresses from the end and is stored as the absolute index."""
    task = store.stream("t")
    task.save({"m": [{"c": "a"}, {"c": "b"}]})
    with task.transaction() as tx:
        tx.set(("m", -1, "c"), "B")
    assert task.state()["m"] == [{"c": "a"}, {"c": "B"}]


@pytest.mark.parametrize(
    "record",
    [
        lambda tx: tx.set(42, 1),
        lambda tx: tx.set((), 1),
        lambda tx: tx.set((1, "a"), 1),
        lambda tx: tx.set(("a", 1.5), 1),
        lambda tx: tx.set('a"b', 1),
        lambda tx: tx.incr("n", "1"),
        lambda tx: tx.incr("n", float("nan")),
        lambda tx: tx.extend("m", "abc"),
        lambda tx: tx.truncate("m", -1),
        lambda tx: tx.add_usage(tokens="many"),
        lambda tx: tx.set("x", object()),
    ],
)
def test_bad_operation_arguments_fail_at_the_call(store: eventckpt.Store, record) -> None:
    """Arguments of the wrong type fail at the recording call, with an eventckpt error."""
    task = store.stream("t")
    with pytest.raises(eventckpt.EventCkptError):
        with task.transaction() as tx:
            record(tx)
    assert task.version == 0


def test_recorded_value_is_a_copy(store: eventckpt.Store) -> None:
    """Mutating an object after recording it does not change what is committed."""
    task = store.stream("t")
    message = {"content": "original"}
    with task.transaction() as tx:
        tx.append("messages", message)
        message["content"] = "mutated"
    assert task.state()["messages"] == [{"content": "original"}]


def test_transaction_expected_version(store: eventckpt.Store) -> None:
    """A transaction with expected_version raises ConflictError when the head moved."""
    task = store.stream("t")
    task.save({"a": 1})
    with pytest.raises(eventckpt.ConflictError):
        with task.transaction(expected_version=0) as tx:
            tx.set("a", 2)
    assert task.state() == {"a": 1}


def test_ended_transaction_refuses_more_operations(store: eventckpt.Store) -> None:
    """Recording into a transaction that already committed is an error."""
    task = store.stream("t")
    with task.transaction() as tx:
        tx.set("a", 1)
    with pytest.raises(eventckpt.InvalidArgumentError):
        tx.set("a", 2)


def test_empty_transaction_is_a_version(store: eventckpt.Store) -> None:
    """A transaction with no operations still commits a version (a checkpoint with metadata only)."""
    task = store.stream("t")
    with task.transaction(name="marker"):
        pass
    assert task.version == 1 and task.latest.name == "marker" and task.state() == {}


@pytest.mark.parametrize("record, path", [
    (lambda tx: tx.set("scratch.k", lambda: 0), ("scratch", "k")),
    (lambda tx: tx.set(("scratch", "k"), {"deep": [0, {"f": open}]}), ("scratch", "k", "deep", 1, "f")),
    (lambda tx: tx.append("msgs", {"f": open}), ("msgs", -1, "f")),
    (lambda tx: tx.extend("msgs", [{"ok": 1}, {"f": open}, {"ok": 2}]), ("msgs", -2, "f")),
    (lambda tx: tx.extend("msgs", [object()]), ("msgs", -1)),
    (lambda tx: tx.set("msgs[0]", {"k": {1, object}}), ("msgs", 0, "k", 1)),
])
def test_unstorable_values_name_their_path_in_the_state(store: eventckpt.Store, store_target: str, record,
                                                        path: tuple) -> None:
    """A value a transaction cannot store raises SerializationError at the call, naming its full path in the
    state (an appended item by its place from the list's end), and nothing is written."""
    task = store.stream("t")
    task.save({"msgs": [{"a": 1}], "scratch": {}})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.SerializationError) as info:
        with task.transaction() as tx:
            record(tx)
    assert info.value.path == path and "".join(f"[{p!r}]" for p in path) in str(info.value)
    assert journal_rows(store_target) == before and task.version == 1
