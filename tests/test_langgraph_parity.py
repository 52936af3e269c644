"""EventCkptSaver answers as LangGraph's own savers do where LangGraph's tests and users rely on it."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

import eventckpt
from eventckpt.langgraph import EventCkptSaver

from .engines import TARGETS

Opener = Callable[[Path], Any]


@contextmanager
def sqlite_saver(path: Path) -> Iterator[SqliteSaver]:
    conn = sqlite3.connect(path / "sqlite.db", check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@contextmanager
def memory_saver(path: Path) -> Iterator[InMemorySaver]:
    yield InMemorySaver()


@contextmanager
def eventckpt_saver(path: Path) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(path / "eventckpt.db") as saver:
        yield saver


@contextmanager
def eventckpt_saver_on_postgresql(path: Path) -> Iterator[EventCkptSaver]:
    target = TARGETS.take("postgresql")
    try:
        with EventCkptSaver(target) as saver:
            yield saver
    finally:
        TARGETS.give_back(target)


def checkpoint(cid: str, values: dict[str, Any], versions: dict[str, int] | None = None) -> Any:
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["channel_values"] = values
    cp["channel_versions"] = {k: 1 for k in values} if versions is None else versions
    return cp


def config(parent: str | None = None, thread: str = "t") -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        conf["checkpoint_id"] = parent
    return {"configurable": conf}


def seen(saver: BaseCheckpointSaver, thread: str = "t") -> list[tuple[Any, ...]]:
    """Every listed checkpoint: id, values, metadata, parent id, pending writes; then the newest id."""
    rows = [(t.checkpoint["id"], t.checkpoint["channel_values"], t.metadata,
             t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
             [w[1:] for w in t.pending_writes or []])
            for t in saver.list(config(thread=thread))]
    newest = saver.get_tuple(config(thread=thread))
    return [*rows, ("newest", newest.checkpoint["id"] if newest else None)]


def test_a_checkpoint_put_again_is_overwritten_and_history_stays(tmp_path: Path) -> None:
    """Putting an id the thread holds replaces that checkpoint as SqliteSaver and InMemorySaver do (get,
    list, parents and writes agree); the version that held it stays in eventckpt's history."""
    def scenario(saver: BaseCheckpointSaver) -> list[tuple[Any, ...]]:
        saver.put(config(), checkpoint("c1", {"a": 1}), {"step": 1}, {"a": 1})
        saver.put(config("c1"), checkpoint("c2", {"a": 2}, {"a": 2}), {"step": 2}, {"a": 2})
        saver.put_writes(config("c2"), [("a", "w2")], "task")
        saver.put(config("c2"), checkpoint("c3", {"a": 3}, {"a": 3}), {"step": 3}, {"a": 3})
        saver.put(config("c1"), checkpoint("c2", {"a": 20}, {"a": 2}), {"step": 2, "again": True}, {"a": 2})
        saver.put(config("c3"), checkpoint("c3", {"a": 30}, {"a": 3}), {"step": 3, "again": True}, {"a": 3})
        return seen(saver)

    results = []
    for opener in (sqlite_saver, memory_saver, eventckpt_saver, eventckpt_saver_on_postgresql):
        with opener(tmp_path) as saver:
            results.append(scenario(saver))
    assert results[0][:3] == [
        ("c3", {"a": 30}, {"step": 3, "again": True}, "c3", []),
        ("c2", {"a": 20}, {"step": 2, "again": True}, "c1", [("a", "w2")]),
        ("c1", {"a": 1}, {"step": 1}, None, []),
    ]
    assert results[2] == results[0] == results[1]
    with eventckpt.open(tmp_path / "eventckpt.db") as store:
        main, fork = store.stream("langgraph:t"), store.stream("langgraph:t~1")
        assert store.streams() == ["langgraph:t", "langgraph:t~1"]
        assert main.version == 4 and fork.version - fork.parent.version == 1  # five versions: none was lost
        assert [cp.values["a"] for cp in main.log()] == [30, 3, 2, 1] and fork.state() == {"a": 20}


def test_a_dotted_filter_key_is_a_path_into_the_metadata(tmp_path: Path) -> None:
    """`list(filter=...)` reads "user.access-level" as metadata["user"]["access-level"], as SqliteSaver
    does, and refuses a key outside SqliteSaver's rule with ValueError("Invalid filter key ...")."""
    metadata = [{"user": {"access-level": "admin", "id": 7}, "step": 1}, {"user": {"access-level": "guest"}, "step": 2},
                {"user.access-level": "admin", "step": 3}]
    filters = [{"user.access-level": "admin"}, {"user.id": 7}, {"user": {"access-level": "guest"}}, {"step": 3},
               {"user.access-level": "guest", "step": 2}, {"missing.path": None}]
    results = []
    for opener in (sqlite_saver, eventckpt_saver, eventckpt_saver_on_postgresql):
        with opener(tmp_path) as saver:
            parent = None
            for i, meta in enumerate(metadata):
                parent = saver.put(config(parent), checkpoint(f"c{i}", {"i": i}), meta, {"i": 1})["configurable"][
                    "checkpoint_id"]
            results.append([[t.checkpoint["id"] for t in saver.list(config(), filter=f)] for f in filters])
            for bad in ("user access", "a;b", "$.x", "k'"):
                with pytest.raises(ValueError, match="Invalid filter key"):
                    list(saver.list(config(), filter={bad: 1}))
    assert results[0] == [["c0"], ["c0"], ["c1"], ["c2"], ["c1"], ["c2", "c1", "c0"]]
    assert results[1] == results[0]
    with eventckpt_saver(tmp_path) as saver, pytest.raises(eventckpt.InvalidArgumentError):
        list(saver.list(config(), filter={"a..b": 1}))  # an empty part: SQLite would call the path malformed


def test_a_parent_the_thread_does_not_hold_is_still_the_parent(tmp_path: Path) -> None:
    """A put naming a parent id that was never stored returns that parent in parent_config (SqliteSaver's
    answer), in get_tuple and in list; the thread goes on from the new checkpoint as usual."""
    results = []
    for opener in (sqlite_saver, eventckpt_saver, eventckpt_saver_on_postgresql):
        with opener(tmp_path) as saver:
            saver.put(config("never-stored"), checkpoint("c1", {"a": 1}), {"step": 1}, {"a": 1})
            saver.put(config("c1"), checkpoint("c2", {"a": 2}, {"a": 2}), {"step": 2}, {"a": 2})
            saver.put(config("gone", thread="u"), checkpoint("d1", {"b": 1}), {"step": 1}, {"b": 1})
            results.append((seen(saver), seen(saver, "u"), saver.get_tuple(config("c1")).parent_config))
    assert results[0][0][1][3] == "never-stored" and results[0][1][0][3] == "gone"
    assert results[1] == results[0]


def test_values_of_channels_without_a_version_are_kept_on_every_checkpoint(tmp_path: Path) -> None:
    """channel_values with no entry in channel_versions come back from every checkpoint as they were
    put (SqliteSaver stores the whole checkpoint), not only from a thread's first one."""
    results = []
    for opener in (sqlite_saver, eventckpt_saver, eventckpt_saver_on_postgresql):
        with opener(tmp_path) as saver:
            saver.put(config(), checkpoint("c1", {"a": 1, "loose": "x"}, {"a": 1}), {}, {"a": 1})
            saver.put(config("c1"), checkpoint("c2", {"a": 1, "loose": "y", "more": [1]}, {"a": 1}), {}, {})
            saver.put(config("c2"), checkpoint("c3", {"a": 2, "more": [1, 2]}, {"a": 2}), {}, {"a": 2})
            results.append(seen(saver))
    assert [row[1] for row in results[0][:3]] == [{"a": 2, "more": [1, 2]}, {"a": 1, "loose": "y", "more": [1]},
                                                  {"a": 1, "loose": "x"}]
    assert results[1] == results[0]
