"""Core.batch (what import runs in): writes inside are savepoints of one transaction; a failed write
inside is undone alone, and the batch reaches the file whole or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

import eventckpt


def test_a_failed_write_inside_a_batch_is_undone_alone(named: dict[str, str]) -> None:
    """A transaction that fails inside a batch leaves nothing; the writes around it commit with the batch."""
    with eventckpt.open(named["s.db"]) as store:
        task = store.stream("t")
        with store.core.batch():
            task.save({"n": 1, "items": []})
            with pytest.raises(eventckpt.EventCkptError):
                with task.transaction() as tx:
                    tx.append("items", 1)
                    tx.incr("items", 1)  # not a number: the whole transaction is refused
            task.save({"n": 2, "items": [1]})
        assert task.list_versions() == [1, 2] and task.state(2) == {"n": 2, "items": [1]}
    with eventckpt.open(named["s.db"]) as store:
        assert store.stream("t").state() == {"n": 2, "items": [1]}


def test_a_batch_that_raises_leaves_nothing_and_forgets_its_heads(named: dict[str, str]) -> None:
    """An exception in a batch rolls back every write in it, and the store's cached heads with them."""
    with eventckpt.open(named["s.db"]) as store:
        store.stream("kept").save({"x": 1})
        with pytest.raises(RuntimeError):
            with store.core.batch():
                store.stream("kept").save({"x": 2})
                store.stream("new").save({"y": 1})
                raise RuntimeError("stop")
        assert store.streams() == ["kept"]
        assert store.stream("kept").state() == {"x": 1} and len(store.stream("kept")) == 1
        assert store.stream("kept").save({"x": 3}).version == 2  # the cache does not remember version 2


def test_other_connections_see_nothing_until_the_batch_commits(named: dict[str, str]) -> None:
    """Writes inside a batch are invisible to another connection until the batch ends."""
    path = named["s.db"]
    with eventckpt.open(path) as store, eventckpt.open(path) as other:
        with store.core.batch():
            store.stream("t").save({"n": 1})
            store.stream("t").save({"n": 2})
            assert other.streams() == []
        assert other.streams() == ["t"] and other.stream("t").version == 2
