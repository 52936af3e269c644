"""A missing stream or version is an error, never an empty answer: every read path of a stream that does
not exist raises StreamNotFoundError, version 0 names no checkpoint, and none of them writes. The
deliberate exceptions are exists() (False), version (0: what a first save builds on), fork(at=0) (an
empty lineage in the same tree) and the llmfy-style session calls of eventckpt.aio (load/list/delete)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

import pytest

import eventckpt
from eventckpt import aio

from .conftest import journal_rows

READS: dict[str, Any] = {
    "latest": lambda t: t.latest,
    "len": len,
    "parent": lambda t: t.parent,
    "get": lambda t: t.get(1),
    "state": lambda t: t.state(),
    "state(1)": lambda t: t.state(1),
    "list_versions": lambda t: t.list_versions(),
    "find": lambda t: t.find("c1"),
    "log": lambda t: t.log(),
    "log(limit=0)": lambda t: t.log(0),
    "history": lambda t: t.history("step"),
    "history(limit=0)": lambda t: t.history("step", limit=0),
    "diff": lambda t: t.diff(1),
    "diff(None)": lambda t: t.diff(None),
    "diff to it": lambda t: t.store.stream("real").diff(1, (t.task_id, 1)),
    "diff to its head": lambda t: t.store.stream("real").diff(1, (t.task_id, None)),
    "diff live": lambda t: t.diff(1, live={}),
    "tool_calls": lambda t: t.tool_calls(),
    "undo_tools": lambda t: t.undo_tools(0, eventckpt.ToolRegistry()),
    "export": lambda t: list(t.store.export(t.task_id)),
    "rollback": lambda t: t.rollback(1),
    "fork": lambda t: t.fork(),
    "fork(at=0)": lambda t: t.fork(at=0),
    "prune": lambda t: t.prune(1),
    "expire": lambda t: t.expire(dt.timedelta(0)),
    "remove": lambda t: t.remove(1),
    "load_into": lambda t: t.load_into({}),
    "keys": lambda t: t.keys(),
    "value": lambda t: t.value("step"),
    "length": lambda t: t.length("step"),
}


@pytest.mark.parametrize("call", sorted(READS))
def test_every_read_of_a_missing_stream_raises(store: eventckpt.Store, store_target: str, call: str) -> None:
    """Each read (and each write that needs history) of a stream that does not exist raises
    StreamNotFoundError naming it, and writes nothing; exists() is False and version is 0."""
    store.stream("real").save({"step": 1}, checkpoint_id="c1")
    typo = store.stream("reall")
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.StreamNotFoundError) as info:
        READS[call](typo)
    assert info.value.task_id == "reall"
    assert journal_rows(store_target) == before
    assert not typo.exists() and typo.version == 0 and repr(typo) == "CheckpointStore(task_id='reall', checkpoints=0)"


ZERO: dict[str, Any] = {
    "get(0)": lambda t: t.get(0),
    "state(0)": lambda t: t.state(0),
    "rollback(0)": lambda t: t.rollback(0),
    "load_into(0)": lambda t: t.load_into({}, 0),
    "diff(0, 1)": lambda t: t.diff(0, 1),
    "diff(1, 0)": lambda t: t.diff(1, 0),
    "diff(1, (t, 0))": lambda t: t.diff(1, ("t", 0)),
    "diff(0, live)": lambda t: t.diff(0, live={}),
    "keys(0)": lambda t: t.keys(0),
    "value(a, 0)": lambda t: t.value("a", 0),
    "length(a, 0)": lambda t: t.length("a", 0),
    "tool_calls(version=0)": lambda t: t.tool_calls(version=0),
}


@pytest.mark.parametrize("call", sorted(ZERO))
def test_version_zero_names_no_checkpoint(store: eventckpt.Store, store_target: str, call: str) -> None:
    """Version 0 is refused with VersionNotFoundError by every call that reads a checkpoint (as get(0) always
    was), and nothing is written."""
    task = store.stream("t")
    task.save({"a": 1})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.VersionNotFoundError) as info:
        ZERO[call](task)
    assert info.value.version == 0
    assert journal_rows(store_target) == before


@pytest.mark.parametrize("call", ["get", "state", "rollback", "keys", "value", "length", "tool_calls"])
def test_a_missing_or_removed_version_is_an_error_naming_the_head(store: eventckpt.Store, call: str) -> None:
    """A version past the head, or one retention removed, raises VersionNotFoundError naming the real
    head (also for the partial reads and tool_calls, which answered [] or None before)."""
    task = store.stream("t")
    for i in range(4):
        task.save({"a": [i]})
    task.remove(3)
    read = {"get": task.get, "state": task.state, "rollback": task.rollback, "keys": task.keys,
            "value": lambda v: task.value("a", v), "length": lambda v: task.length("a", v),
            "tool_calls": lambda v: task.tool_calls(version=v)}[call]
    for version in (3, 9):
        with pytest.raises(eventckpt.VersionNotFoundError) as info:
            read(version)
        assert (info.value.version, info.value.head) == (version, 4), str(info.value)


def test_a_stream_without_versions_has_no_state(store: eventckpt.Store) -> None:
    """A fork at 0 exists but holds no checkpoint: latest is None, len is 0, its log is empty, and state()
    raises VersionNotFoundError (head 0) instead of answering {}."""
    task = store.stream("t")
    task.save({"a": 1})
    empty = task.fork(at=0, task_id="empty")
    assert empty.exists() and empty.version == 0 and empty.latest is None and len(empty) == 0
    assert empty.log() == [] and empty.list_versions() == [] and empty.history("a") == []
    for read in (empty.state, empty.keys, lambda: empty.length("a"), lambda: empty.value("a")):
        with pytest.raises(eventckpt.VersionNotFoundError) as info:
            read()
        assert info.value.head == 0
    assert empty.save({"b": 2}).version == 1 and empty.state() == {"b": 2}


def test_the_session_api_keeps_llmfy_answers(db_path: Path) -> None:
    """eventckpt.aio answers a session never saved as llmfy does (load None, list [], delete False); its other
    calls raise StreamNotFoundError."""

    async def main() -> None:
        async with aio.open(db_path) as store:
            assert await store.load("nobody") is None and await store.list("nobody") == []
            assert await store.delete("nobody") is False and await store.delete("nobody", "1") is False
            for call in (store.state("nobody"), store.list_versions("nobody"), store.log("nobody"),
                         store.history("nobody", "x"), store.get("nobody", 1)):
                with pytest.raises(eventckpt.StreamNotFoundError):
                    await call

    asyncio.run(main())


def test_a_checkpoint_whose_version_was_removed_before_its_values_were_read(store_target: str) -> None:
    """Values first read after retention removed the version (here or in another connection) raise
    VersionNotFoundError: never another version's state, never an empty one."""
    with eventckpt.open(store_target) as mine, eventckpt.open(store_target) as theirs:
        task = mine.stream("t")
        for i in range(1, 7):
            task.save({"step": i})
        third, log = task.get(3), task.log()
        theirs.stream("t").remove(3)
        with pytest.raises(eventckpt.VersionNotFoundError):
            third.values
        theirs.stream("t").prune(keep_last=2)
        for cp in log:
            if cp.version >= 5:
                assert cp.values == {"step": cp.version}
            else:
                with pytest.raises(eventckpt.VersionNotFoundError):
                    cp.values
