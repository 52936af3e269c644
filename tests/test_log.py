"""log(): a stream's checkpoints newest first, filtered by SQL, without reading any state."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

import eventckpt

from .conftest import RawSQL, journal_rows


def agent(store: eventckpt.Store, name: str = "task", steps: int = 12) -> eventckpt.CheckpointStore:
    task = store.stream(name)
    for i in range(1, steps + 1):
        tool = i % 4 == 0
        with task.transaction(name="tool call" if tool else None, auto=not tool,
                              metadata={"node": "tools" if tool else "agent", "step": i, "even": i % 2 == 0}) as tx:
            tx.append("messages", {"i": i})
            tx.set("step", i)
            tx.add_usage(input_tokens=10)
    return task


def test_newest_first_with_everything_but_the_state(store: eventckpt.Store) -> None:
    """log() lists every version newest first with name, auto, metadata, usage and time."""
    task = agent(store)
    entries = task.log()
    assert [cp.version for cp in entries] == list(range(12, 0, -1))
    top = entries[0]
    assert (top.task_id, top.name, top.auto, top.metadata, top.token_usage) == (
        "task", "tool call", False, {"node": "tools", "step": 12, "even": True}, {"input_tokens": 120})
    assert top.created_at == task.get(12).created_at
    assert top.values == task.state(12)  # loaded on first access


def test_limit_and_before(store: eventckpt.Store) -> None:
    """limit keeps the newest N; before keeps versions below it."""
    task = agent(store)
    assert [cp.version for cp in task.log(3)] == [12, 11, 10]
    assert [cp.version for cp in task.log(2, before=5)] == [4, 3]
    assert task.log(0) == [] and task.log(before=1) == []


def test_filters_by_name_auto_and_metadata(store: eventckpt.Store) -> None:
    """name, auto and metadata filters combine; metadata values compare with their types."""
    task = agent(store)
    assert [cp.version for cp in task.log(name="tool call")] == [12, 8, 4]
    assert [cp.version for cp in task.log(auto=False)] == [12, 8, 4]
    assert [cp.version for cp in task.log(auto=True, limit=2)] == [11, 10]
    assert [cp.version for cp in task.log(metadata={"node": "tools"})] == [12, 8, 4]
    assert [cp.version for cp in task.log(metadata={"step": 5})] == [5]
    assert task.log(metadata={"step": "5"}) == []  # 5 is not "5"
    assert [cp.version for cp in task.log(metadata={"even": True, "node": "agent"})] == [10, 6, 2]
    assert task.log(metadata={"even": 1}) == []  # True is not 1
    assert [cp.version for cp in task.log(metadata={"node": "agent"}, before=4, limit=2)] == [3, 2]
    assert task.log(name="tool call", metadata={"step": 8}, auto=False)[0].version == 8


def test_metadata_keys_and_values_are_data(store: eventckpt.Store) -> None:
    """A metadata key or value that looks like SQL is matched as data and changes nothing."""
    task = store.stream("t")
    evil = "x') OR 1=1 --"
    task.save({"a": 1}, metadata={evil: "yes"})
    task.save({"a": 2}, metadata={"k": evil})
    task.save({"a": 3}, metadata={"k": "other"})
    assert [cp.version for cp in task.log(metadata={evil: "yes"})] == [1]
    assert [cp.version for cp in task.log(metadata={"k": evil})] == [2]
    assert task.log(metadata={evil: "no"}) == [] and task.log(name=evil) == []
    assert task.version == 3 and len(store.streams()) == 1


def test_structured_metadata_values(store: eventckpt.Store) -> None:
    """Lists, dicts, None, floats and tagged values filter by their stored JSON."""
    import datetime as dt

    moment = dt.datetime(2025, 1, 2, tzinfo=dt.timezone.utc)
    task = store.stream("t")
    task.save({"a": 1}, metadata={"tags": ["x", "y"], "cfg": {"t": 0.5}, "none": None, "at": moment, "f": 1.5})
    task.save({"a": 2}, metadata={"tags": ["y"], "cfg": {"t": 0.5}, "none": 0, "f": 2.0})
    assert [cp.version for cp in task.log(metadata={"tags": ["x", "y"]})] == [1]
    assert [cp.version for cp in task.log(metadata={"cfg": {"t": 0.5}})] == [2, 1]
    assert [cp.version for cp in task.log(metadata={"none": None})] == [1]
    assert [cp.version for cp in task.log(metadata={"at": moment})] == [1]
    assert [cp.version for cp in task.log(metadata={"f": 2.0})] == [2]
    assert task.log(metadata={"f": 2}) == []


def test_fork_lists_shared_versions(store: eventckpt.Store) -> None:
    """A fork's log continues into the versions it shares with its parent."""
    task = agent(store, steps=6)
    fork = task.fork(at=4, task_id="retry")
    fork.save({"step": 99}, metadata={"node": "replan"})
    entries = fork.log()
    assert [cp.version for cp in entries] == [5, 4, 3, 2, 1]
    assert all(cp.task_id == "retry" for cp in entries)
    assert entries[1].metadata["node"] == "tools" and entries[1].parent == eventckpt.ForkOrigin("task", 4)
    assert [cp.version for cp in fork.log(metadata={"node": "agent"})] == [3, 2, 1]
    assert [cp.version for cp in fork.log(name="tool call")] == [4]


def test_reads_no_state(store: eventckpt.Store, store_target: str) -> None:
    """log() never reads events or snapshots: it works while every event value is unreadable."""
    task = agent(store)
    store.close()
    with RawSQL(store_target) as raw:
        raw.execute("UPDATE events SET value = '{broken'")
    with eventckpt.open(store_target) as again:
        entries = again.stream("task").log(metadata={"node": "tools"})
        assert [cp.version for cp in entries] == [12, 8, 4]
        with pytest.raises(eventckpt.CorruptStoreError):
            entries[0].values  # noqa: B018 - reading the state is where damage shows


def test_missing_stream_is_an_error(store: eventckpt.Store) -> None:
    """The log of a stream that does not exist raises StreamNotFoundError (not an empty list)."""
    with pytest.raises(eventckpt.StreamNotFoundError):
        store.stream("nobody").log()


@pytest.mark.parametrize("kwargs", [
    {"limit": -1}, {"limit": "3"}, {"before": 0}, {"name": 3}, {"auto": 1},
    {"metadata": ["node"]}, {"metadata": {1: "x"}}, {"metadata": {'a"b': 1}}, {"metadata": {"$x": 1}},
    {"metadata": {"x": object()}},
])
def test_bad_arguments(store: eventckpt.Store, store_target: str, kwargs: dict) -> None:
    """Bad filters raise a typed error and write nothing."""
    agent(store, steps=2)
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.EventCkptError):
        store.stream("task").log(**kwargs)
    assert journal_rows(store_target) == before


def test_a_dict_metadata_filter_ignores_key_order(store: eventckpt.Store) -> None:
    """log and search match a dict metadata value whatever its stored key order, still telling 1 from 1.0."""
    task = store.stream("run")
    task.save({"s": 1}, metadata={"config": {"temp": 0, "model": "x"}, "node": "a"})
    task.save({"s": 2}, metadata={"config": {"model": "x", "temp": 0}, "node": "a"})
    task.save({"s": 3}, metadata={"config": {"model": "x", "temp": 0.0}, "node": "a"})
    task.save({"s": 4}, metadata={"config": {"model": "x", "temp": 0, "top_p": 1}, "node": "a"})
    task.save({"s": 5}, metadata={"config": [{"b": [1, {"d": 2, "c": 3}], "a": None}], "node": "b"})
    task.save({"s": 6}, metadata={"config": "model", "node": "a"})
    wanted = {"config": {"model": "x", "temp": 0}}
    assert [cp.version for cp in task.log(metadata=wanted)] == [2, 1]
    assert [cp.version for cp in task.log(metadata={**wanted, "node": "a"})] == [2, 1]
    assert [cp.version for cp in store.search(metadata=wanted)] == [2, 1]
    nested = {"config": [{"a": None, "b": [1, {"c": 3, "d": 2}]}]}
    assert [cp.version for cp in task.log(metadata=nested)] == [5]
    assert task.log(metadata={"config": [{"a": None, "b": [{"c": 3, "d": 2}, 1]}]}) == []
    task.save({"s": 7}, metadata={"models": {"gpt-4.1": {"t": 1}, "o 3": 2}})
    assert [cp.version for cp in store.search(metadata={"models": {"o 3": 2, "gpt-4.1": {"t": 1}}})] == [7]
