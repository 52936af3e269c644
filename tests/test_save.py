"""save(), get(), latest, list_versions and the Checkpoint record."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import apsw
import pytest

import eventckpt

from .conftest import RawSQL
from eventckpt import Checkpoint


def events_of(path: Path | str, version: int, stream: str = "task-1") -> list[tuple[str, str, str | None]]:
    with RawSQL(path) as raw:
        sid = "streams.id" if raw.kind == "sqlite" else "streams.stream_id"
        return raw.execute(f"SELECT op, path, value FROM events JOIN streams ON {sid} = events.stream_id"
                           " WHERE streams.name = ? AND version = ? ORDER BY seq", (stream, version))


def test_orbiter_reference_example(store: eventckpt.Store) -> None:
    """The orbiter CheckpointStore example, adapted to eventckpt's names, runs as documented."""
    task = store.stream("task-1")
    cp1 = task.save(
        values={"step": 1, "data": "initial"},
        token_usage={"input_tokens": 100, "output_tokens": 50},
        metadata={"description": "After step 1"},
    )
    assert cp1.version == 1
    cp2 = task.save(values={"step": 2, "data": "updated"}, token_usage={"input_tokens": 250, "output_tokens": 120})
    assert cp2.version == 2
    assert task.latest == cp2
    assert task.get(1) == cp1
    assert task.list_versions() == [1, 2]
    data = cp1.to_dict()
    restored = Checkpoint.from_dict(data)
    assert restored.task_id == "task-1"
    assert restored.version == 1
    assert restored == cp1
    assert repr(task) == "CheckpointStore(task_id='task-1', checkpoints=2)"
    assert len(task) == 2


def test_empty_stream(store: eventckpt.Store) -> None:
    """A stream nobody saved to does not exist: its version is 0 (what a first save builds on) and every
    read raises StreamNotFoundError; nothing is created."""
    task = store.stream("nothing")
    assert task.version == 0 and not task.exists()
    for read in (lambda: task.latest, lambda: len(task), task.list_versions, task.state, lambda: task.get(1)):
        with pytest.raises(eventckpt.StreamNotFoundError):
            read()
    assert store.streams() == []


def test_empty_task_id_refused(store: eventckpt.Store) -> None:
    """An empty task id is a CheckpointError, as in the orbiter API."""
    with pytest.raises(eventckpt.CheckpointError):
        store.stream("")


def test_unchanged_keys_cost_nothing(store: eventckpt.Store, store_target: str) -> None:
    """Saving a state with one changed key writes one event; a save with no change writes none."""
    task = store.stream("task-1")
    state = {"big": "x" * 10_000, "n": 1}
    task.save(state)
    state["n"] = 2
    task.save(state)
    task.save(state)
    assert events_of(store_target, 2) == [("set", "$.n", "2")]
    assert events_of(store_target, 3) == []
    assert task.version == 3 and task.state(3) == state


def test_growing_list_becomes_appends(store: eventckpt.Store, store_target: str) -> None:
    """A list that grew at its end is stored as append (one item) or extend (several), not rewritten."""
    task = store.stream("task-1")
    state = {"messages": [{"role": "user", "content": "hi"}]}
    task.save(state)
    state["messages"].append({"role": "assistant", "content": "hello"})
    task.save(state)
    state["messages"] += [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    task.save(state)
    assert events_of(store_target, 2) == [("append", "$.messages", '{"role":"assistant","content":"hello"}')]
    assert events_of(store_target, 3)[0][:2] == ("extend", "$.messages")
    assert task.state() == state


def test_shrinking_and_edited_lists(store: eventckpt.Store, store_target: str) -> None:
    """A list cut at its end becomes one truncate; an edited item becomes an event at that item's path."""
    task = store.stream("task-1")
    task.save({"m": [{"t": "a"}, {"t": "b"}, {"t": "c"}]})
    task.save({"m": [{"t": "a"}]})
    task.save({"m": [{"t": "z"}]})
    assert events_of(store_target, 2) == [("truncate", "$.m", "1")]
    assert events_of(store_target, 3) == [("set", "$.m[0].t", '"z"')]


def test_sliding_window_drops_from_front(store: eventckpt.Store, store_target: str) -> None:
    """Keeping the last N items (drop one at the front, add one at the end) costs two events."""
    task = store.stream("task-1")
    task.save({"window": list(range(10))})
    task.save({"window": list(range(1, 11))})
    assert [(op, p) for op, p, _ in events_of(store_target, 2)] == [("delete", "$.window[0]"), ("append", "$.window")]
    assert task.state() == {"window": list(range(1, 11))}


def test_type_change_is_a_change(store: eventckpt.Store) -> None:
    """1, 1.0 and True are different values: changing only the type of a dict value is recorded."""
    task = store.stream("task-1")
    task.save({"flag": 1, "nested": {"x": 1}})
    task.save({"flag": True, "nested": {"x": 1.0}})
    state = task.state()
    assert state["flag"] is True and type(state["nested"]["x"]) is float


def test_type_change_of_a_list_item_is_a_change(store: eventckpt.Store) -> None:
    """A list item that changes only its type (1 -> 1.0 -> True -> 1) is recorded, whether the list kept
    its length, grew or shrank."""
    task = store.stream("task-1")
    task.save({"l": [1, {"a": 1}, "s"]})
    task.save({"l": [1.0, {"a": 1}, "s"]})
    task.save({"l": [1.0, {"a": 1}, "s", None]})
    task.save({"l": [True, {"a": 1}, "s", None, 5]})
    task.save({"l": [1, {"a": 1}]})
    types = [[type(x) for x in task.state(v)["l"]] for v in range(1, 6)]
    assert types == [[int, dict, str], [float, dict, str], [float, dict, str, type(None)],
                     [bool, dict, str, type(None), int], [int, dict]]


def test_type_change_deep_inside_list_items_is_a_change(store: eventckpt.Store, store_target: str) -> None:
    """A value that changes only its type deep inside an old list item (1 -> 1.0 -> True, in a message
    dict, in a nested list, edited in place or replaced by an equal item) is recorded as an edit of that
    item, also while the list grows; so is a float zero that changes its sign in a dict."""
    task = store.stream("task-1")
    messages = [{"role": "user", "n": 1, "calls": [{"args": [1, "x"]}]}, {"role": "assistant", "content": "yo"}]
    task.save({"m": messages, "z": {"x": 0.0}})
    messages[0]["n"] = 1.0  # in place, inside an old item
    task.save({"m": messages, "z": {"x": 0.0}})
    messages[0]["calls"][0]["args"][0] = True  # two levels further down
    messages.append({"role": "user", "content": "next"})  # and the list grows in the same save
    task.save({"m": messages, "z": {"x": -0.0}})
    messages[1] = {"role": "assistant", "content": "yo", "n": 2}
    task.save({"m": messages, "z": {"x": -0.0}})
    messages[1] = {"role": "assistant", "content": "yo", "n": 2.0}  # an equal item of other types
    task.save({"m": messages, "z": {"x": -0.0}})
    assert [cp.version for cp in task.log()] == [5, 4, 3, 2, 1]
    assert type(task.state(2)["m"][0]["n"]) is float and type(task.state(1)["m"][0]["n"]) is int
    assert task.state(3)["m"][0]["calls"][0]["args"][0] is True and task.state(3)["m"][2]["content"] == "next"
    assert str(task.state(3)["z"]["x"]) == "-0.0" and str(task.state(2)["z"]["x"]) == "0.0"
    assert type(task.state(5)["m"][1]["n"]) is float and type(task.state(4)["m"][1]["n"]) is int
    with RawSQL(store_target) as raw:  # edits of the items, not rewrites of the whole list
        paths = raw.execute("SELECT version, op, path FROM changes WHERE stream = 'task-1' AND version > 1"
                            " ORDER BY version, seq")
    assert [tuple(r) for r in paths] == [
        (2, "set", "$.m[0].n"),
        (3, "set", "$.m[0].calls[0].args[0]"), (3, "append", "$.m"), (3, "set", "$.z.x"),
        (4, "set", "$.m[1].n"), (5, "set", "$.m[1].n")]


def test_unchanged_list_items_with_numbers_are_no_change(store: eventckpt.Store, store_target: str) -> None:
    """Saving equal items again (numbers and nested lists inside them, copies, keys in another order)
    stores no event."""
    task = store.stream("task-1")
    items = [{"n": i, "f": i / 2, "b": i % 2 == 0, "l": [i, [i * 1.5, None]], "s": str(i)} for i in range(50)]
    task.save({"m": items})
    task.save({"m": [dict(item) for item in items]})
    task.save({"m": [dict(reversed(list(item.items()))) for item in items]})
    assert task.version == 3 and task.state(3) == {"m": items}
    with RawSQL(store_target) as raw:
        assert raw.execute("SELECT count(*) FROM changes WHERE stream = 'task-1' AND version > 1")[0][0] == 0


def test_token_usage_is_cumulative_and_carried(store: eventckpt.Store) -> None:
    """token_usage is stored per version; a save without it keeps the previous counters."""
    task = store.stream("task-1")
    task.save({"a": 1}, {"input_tokens": 10})
    cp = task.save({"a": 2})
    assert cp.token_usage == {"input_tokens": 10}
    assert task.get(2).token_usage == {"input_tokens": 10}
    task.save({"a": 3}, {"input_tokens": 25, "output_tokens": 5})
    assert task.get(3).token_usage == {"input_tokens": 25, "output_tokens": 5}


def test_checkpoint_fields(store: eventckpt.Store) -> None:
    """A checkpoint carries name, auto flag, metadata, aware UTC created_at and its checkpoint id."""
    task = store.stream("task-1")
    before = dt.datetime.now(dt.timezone.utc)
    cp = task.save({"a": 1}, metadata={"node": "plan", "step": 3}, name="before tool", auto=True, checkpoint_id="c-1")
    got = task.get(1)
    assert got == cp
    assert got.name == "before tool" and got.auto is True and got.checkpoint_id == "c-1"
    assert got.metadata == {"node": "plan", "step": 3}
    assert got.created_at.tzinfo is not None and before <= got.created_at <= dt.datetime.now(dt.timezone.utc)
    assert task.find("c-1") == cp and task.find("nope") is None


def test_checkpoint_is_frozen(store: eventckpt.Store) -> None:
    """Checkpoint attributes cannot be reassigned."""
    cp = store.stream("task-1").save({"a": 1})
    with pytest.raises(AttributeError):
        cp.version = 5  # type: ignore[misc]


def test_to_dict_from_dict_round_trip(store: eventckpt.Store) -> None:
    """to_dict() gives plain data with an ISO-8601 created_at; from_dict() rebuilds an equal checkpoint."""
    store.stream("base").save({"x": 1})
    fork = store.stream("base").fork(at=1, task_id="branch")
    cp = fork.save({"x": 2}, {"input_tokens": 3}, metadata={"m": 1}, name="n", checkpoint_id="id-9")
    data = cp.to_dict()
    assert isinstance(data["created_at"], str) and data["created_at"].endswith("+00:00")
    assert data["parent"] == {"task_id": "base", "version": 1}
    assert Checkpoint.from_dict(data) == cp
    with pytest.raises(eventckpt.InvalidArgumentError):
        Checkpoint.from_dict({"version": 1})


def test_get_missing_versions(store: eventckpt.Store) -> None:
    """get() of version 0, a negative or a future version raises VersionNotFoundError carrying the head."""
    task = store.stream("task-1")
    task.save({"a": 1})
    for bad in (0, -1, 2, 10**12):
        with pytest.raises(eventckpt.VersionNotFoundError) as info:
            task.get(bad)
        assert info.value.head == 1 and info.value.version == bad
    with pytest.raises(eventckpt.InvalidArgumentError):
        task.get("1")  # type: ignore[arg-type]


def test_state_of_version_zero_is_refused(store: eventckpt.Store) -> None:
    """Version 0 names no checkpoint: state(0) raises VersionNotFoundError, as get(0) does."""
    task = store.stream("task-1")
    task.save({"a": 1})
    for read in (task.state, task.get):
        with pytest.raises(eventckpt.VersionNotFoundError):
            read(0)


def test_values_load_lazily_but_are_stable(store: eventckpt.Store) -> None:
    """A checkpoint's values are read on first access and stay those of its version."""
    task = store.stream("task-1")
    cp = task.save({"a": 1})
    task.save({"a": 2})
    assert cp.values == {"a": 1}
    assert task.latest.values == {"a": 2}


def test_expected_version_conflict(store: eventckpt.Store) -> None:
    """save(expected_version=...) raises ConflictError with expected and actual when the head moved."""
    task = store.stream("task-1")
    task.save({"a": 1}, expected_version=0)
    task.save({"a": 2}, expected_version=1)
    with pytest.raises(eventckpt.ConflictError) as info:
        task.save({"a": 3}, expected_version=1)
    assert (info.value.expected, info.value.actual) == (1, 2)
    assert task.version == 2


def test_duplicate_checkpoint_id_refused(store: eventckpt.Store) -> None:
    """A checkpoint id is unique within a stream tree (forks included)."""
    task = store.stream("task-1")
    task.save({"a": 1}, checkpoint_id="same")
    fork = task.fork()
    with pytest.raises(eventckpt.DuplicateCheckpointIdError):
        fork.save({"a": 2}, checkpoint_id="same")
    assert fork.version == 1
    store.stream("other").save({"a": 1}, checkpoint_id="same")  # another tree may reuse it


def test_dataclass_state_saved_by_fields(store: eventckpt.Store) -> None:
    """A dataclass instance can be saved as the state; its fields become the top-level keys."""
    import dataclasses

    @dataclasses.dataclass
    class AgentState:
        messages: list
        step: int

    task = store.stream("task-1")
    task.save(AgentState(["hi"], 1))
    assert task.state() == {"messages": ["hi"], "step": 1}
    assert task.state(as_type=AgentState) == AgentState(["hi"], 1)


def test_streams_listing_and_delete(store: eventckpt.Store) -> None:
    """streams() lists streams oldest first; delete_stream removes one and reports whether it existed."""
    store.stream("a").save({"x": 1})
    store.stream("b").save({"x": 1})
    assert store.streams() == ["a", "b"]
    assert store.delete_stream("a") is True
    assert store.delete_stream("a") is False
    assert store.streams() == ["b"]
    assert store.stream("a").version == 0
    store.stream("a").save({"x": 5})
    assert store.stream("a").state() == {"x": 5} and store.stream("a").version == 1
