"""Store.search(): checkpoints of every stream by name and metadata, through indexes."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

import eventckpt

from .conftest import RawSQL


def fill(store: eventckpt.Store) -> None:
    for name in ("a", "b", "c"):
        task = store.stream(name)
        for i in range(1, 6):
            task.save({"i": i}, name="milestone" if i in (2, 5) else None,
                      metadata={"node": "tools" if i == 3 else "agent", "user": name, "step": i})
    store.stream("a").fork(at=2, task_id="a-fork").save({"i": 0}, name="milestone", metadata={"node": "tools"})


def test_by_name_across_streams(store: eventckpt.Store) -> None:
    """search(name=) finds every stream's checkpoints with that name, newest first, once each."""
    fill(store)
    found = store.search(name="milestone")
    assert sorted((cp.task_id, cp.version) for cp in found) == [
        ("a", 2), ("a", 5), ("a-fork", 3), ("b", 2), ("b", 5), ("c", 2), ("c", 5)]
    assert [cp.created_at for cp in found] == sorted((cp.created_at for cp in found), reverse=True)
    assert found[0].task_id == "a-fork" and found[0].parent == eventckpt.ForkOrigin("a", 2)
    assert found[0].values == {"i": 0}


def test_by_metadata_and_both(store: eventckpt.Store) -> None:
    """Metadata filters combine with each other and with a name; values keep their types."""
    fill(store)
    assert sorted((cp.task_id, cp.version) for cp in store.search(metadata={"node": "tools"})) == [
        ("a", 3), ("a-fork", 3), ("b", 3), ("c", 3)]
    assert [(cp.task_id, cp.version) for cp in store.search(metadata={"user": "b", "step": 4})] == [("b", 4)]
    assert store.search(metadata={"step": "4"}) == []
    assert [(cp.task_id, cp.version) for cp in store.search("milestone", {"user": "c"})] == [("c", 5), ("c", 2)]
    assert len(store.search(metadata={"node": "agent"}, limit=3)) == 3
    assert len(store.search()) == 16


def test_injection_is_data(store: eventckpt.Store) -> None:
    """Names and metadata that look like SQL match nothing and change nothing."""
    fill(store)
    assert store.search(name="x' OR '1'='1") == []
    assert store.search(metadata={"x') OR 1=1 --": "agent"}) == []
    assert len(store.search()) == 16


def test_deleted_streams_leave_no_index_rows(store: eventckpt.Store, store_target: str) -> None:
    """Deleting a stream removes its metadata index rows with its versions (triggers keep them in step)."""
    fill(store)
    store.delete_stream("a", forks=True)
    assert {cp.task_id for cp in store.search(metadata={"node": "agent"})} == {"b", "c"}
    with RawSQL(store_target) as raw:
        sid = "id" if raw.kind == "sqlite" else "stream_id"
        assert raw.one(f"SELECT count(*) FROM metadata_index WHERE stream_id NOT IN (SELECT {sid} FROM streams)") == 0


@pytest.mark.parametrize("kwargs", [{"name": 1}, {"metadata": "node"}, {"limit": -2}])
def test_bad_arguments(store: eventckpt.Store, kwargs: dict) -> None:
    """Bad arguments raise a typed error."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        store.search(**kwargs)
