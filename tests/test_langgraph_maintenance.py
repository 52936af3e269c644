"""delete_for_runs, prune and copy_thread keep every remaining checkpoint exact, forks included."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.channels import DeltaChannel
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command, interrupt

import eventckpt
from eventckpt.langgraph import EventCkptSaver, maintenance
from tests.conftest import journal_rows
from tests.langgraph_graphs import extend, looping


@pytest.fixture
def saver(store_target: str) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(store_target) as s:
        yield s


def put(saver: EventCkptSaver, thread: str, parent: dict[str, Any] | None, run: str, n: int,
        ns: str = "", writes: bool = True) -> dict[str, Any]:
    """A checkpoint whose `log` holds the log of its parent plus one line (so every state is distinct)."""
    before = saver.get_tuple(parent).checkpoint["channel_values"]["log"] if parent else []
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"log": [*before, f"{run}-{n}"], "n": n}
    checkpoint["channel_versions"] = {"log": n + 1, "n": n + 1}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    stored = saver.put(config, checkpoint, {"source": "loop", "step": n, "run_id": run}, {"log": n + 1, "n": n + 1})
    if writes:
        saver.put_writes(stored, [("log", f"write {run}-{n}")], f"task-{run}-{n}")
    return stored


def view(saver: EventCkptSaver, thread: str, ns: str | None = "") -> dict[str, Any]:
    """checkpoint id -> (state, run, parent id, writes) of a thread namespace."""
    config: dict[str, Any] = {"configurable": {"thread_id": thread}}
    if ns is not None:
        config["configurable"]["checkpoint_ns"] = ns
    return {
        t.checkpoint["id"]: (
            t.checkpoint["channel_values"], t.metadata["run_id"],
            t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None,
            [w[1:] for w in t.pending_writes],
        )
        for t in saver.list(config)
    }


def cid(config: dict[str, Any]) -> str:
    return config["configurable"]["checkpoint_id"]


def test_delete_for_runs_in_the_middle_keeps_later_states(saver: EventCkptSaver) -> None:
    """Deleting a run in the middle of a thread (and below a fork) keeps every later checkpoint's state;
    a kept checkpoint's parent becomes its nearest kept ancestor."""
    a = [put(saver, "t", None, "A", 0)]
    for n in (1, 2):
        a.append(put(saver, "t", a[-1], "A", n))
    b = [put(saver, "t", a[-1], "B", 3)]
    b.append(put(saver, "t", b[-1], "B", 4))
    c = [put(saver, "t", b[-1], "C", 5)]
    c.append(put(saver, "t", c[-1], "C", 6))
    fork = put(saver, "t", b[0], "D", 7)  # a fork from inside run B
    before = view(saver, "t")
    saver.delete_for_runs(["B"])
    after = view(saver, "t")
    assert set(after) == set(before) - {cid(x) for x in b}
    for key, (state, run, _, writes) in after.items():
        assert state == before[key][0] and writes == before[key][3] and run == before[key][1]
    assert after[cid(c[0])][2] == cid(a[-1]) and after[cid(fork)][2] == cid(a[-1])
    assert after[cid(c[1])][2] == cid(c[0]) and after[cid(a[1])][2] == cid(a[0])
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}).checkpoint["id"] == cid(fork)  # newest
    nxt = put(saver, "t", c[-1], "E", 8)  # the thread goes on from a kept checkpoint
    assert saver.get_tuple(nxt).checkpoint["channel_values"]["log"][-3:] == ["C-5", "C-6", "E-8"]


def test_delete_for_runs_of_a_whole_namespace_and_other_threads(saver: EventCkptSaver) -> None:
    """A namespace holding only deleted runs disappears; other threads and runs are untouched."""
    put(saver, "t", None, "X", 0, ns="child:1")
    keep = put(saver, "t", None, "Y", 0)
    put(saver, "t", keep, "X", 1)
    put(saver, "u", None, "X", 0)
    bystander = put(saver, "v", None, "Z", 0)
    untouched = view(saver, "v")
    saver.delete_for_runs(["X"])
    assert view(saver, "t", ns="child:1") == {} and view(saver, "u") == {}
    assert list(view(saver, "t")) == [cid(keep)]
    assert view(saver, "v") == untouched and cid(bystander) in untouched
    saver.delete_for_runs([])
    saver.delete_for_runs(["nobody"])
    assert list(view(saver, "t")) == [cid(keep)] and view(saver, "v") == untouched


def test_prune_keep_latest_keeps_the_newest_of_each_namespace(saver: EventCkptSaver) -> None:
    """keep_latest keeps only the newest checkpoint of each namespace, with its state and writes, and
    gives back the space of the rest."""
    line = [put(saver, "t", None, "R", 0)]
    for n in range(1, 30):
        line.append(put(saver, "t", line[-1], "R", n))
    newest = put(saver, "t", line[10], "F", 99)  # a fork is the newest checkpoint
    child = [put(saver, "t", None, "C", 0, ns="child:1")]
    child.append(put(saver, "t", child[-1], "C", 1, ns="child:1"))
    expected = view(saver, "t")[cid(newest)]
    saver.prune(["t"], strategy="keep_latest")
    assert view(saver, "t") == {cid(newest): (expected[0], "F", None, expected[3])}
    assert list(view(saver, "t", ns="child:1")) == [cid(child[-1])]
    names = [r[1] for r in journal_rows(saver.store.path)["streams"]]
    assert len(names) == 2  # one stream per namespace is left: old trees and forks are gone
    assert len(journal_rows(saver.store.path)["events"]) < 10


def test_copy_thread_copies_forks_namespaces_and_writes(saver: EventCkptSaver) -> None:
    """copy_thread gives the target the same checkpoints (ids, states, parents, metadata, writes) in every
    namespace; deleting the source afterwards leaves the copy whole."""
    line = [put(saver, "src", None, "R", 0)]
    for n in range(1, 6):
        line.append(put(saver, "src", line[-1], "R", n))
    put(saver, "src", line[2], "F", 9)
    put(saver, "src", None, "C", 0, ns="child:1")
    source = {ns: view(saver, "src", ns) for ns in ("", "child:1")}
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    assert view(saver, "src", None) == {}
    assert {ns: view(saver, "dst", ns) for ns in ("", "child:1")} == source
    with pytest.raises(eventckpt.InvalidArgumentError):
        saver.copy_thread("dst", "dst")
    saver.copy_thread("nobody", "dst2")
    assert view(saver, "dst2", None) == {}


def test_deleting_a_threads_stream_through_the_store_is_refused(saver: EventCkptSaver, store_target: str) -> None:
    """store.delete_stream of a stream holding a thread's checkpoints (its root or a fork the saver made)
    raises StreamInUseError naming the thread and deletes nothing (it used to fail on a foreign key on
    SQLite, to leave the thread pointing at nothing on PostgreSQL, and for a fork to leave its pending
    writes behind); the async API's clear_all leaves the thread alone; delete_thread deletes it."""
    line = [put(saver, "t", None, "R", 0)]
    line.append(put(saver, "t", line[-1], "R", 1))
    put(saver, "t", line[0], "F", 5)  # a second child of the first checkpoint: it goes on a fork
    put(saver, "t", None, "C", 0, ns="child:1")
    saver.store.stream("session").save({"a": 1})
    before, streams = view(saver, "t", None), saver.store.streams()
    rows = journal_rows(store_target)["langgraph_writes"]
    root, fork, child = streams[0], streams[1], streams[2]
    for name, forks, thread in ((root, False, ("t", "")), (root, True, ("t", "")), (fork, False, ("t", "")),
                                (child, True, ("t", "child:1"))):
        with pytest.raises(eventckpt.StreamInUseError) as caught:
            saver.store.delete_stream(name, forks=forks)
        assert caught.value.thread == thread and "delete_thread" in str(caught.value)
    assert view(saver, "t", None) == before and saver.store.streams() == streams
    assert journal_rows(store_target)["langgraph_writes"] == rows

    async def clear() -> int:
        async with eventckpt.aio.open(store_target) as shared:
            return await shared.clear_all()

    assert asyncio.run(clear()) == 1 and saver.store.streams() == streams[:3]
    saver.delete_thread("t")
    assert view(saver, "t", None) == {} and saver.store.streams() == []


def test_thinning_a_threads_stream_through_the_store_is_refused(saver: EventCkptSaver, store_target: str) -> None:
    """CheckpointStore.prune, expire and remove of a stream holding a thread's checkpoints (its root or a
    fork), and the async API's delete of one checkpoint, raise StreamInUseError naming the thread and
    change nothing (removing a checkpoint that a pending write refers to made the thread unreadable); the
    saver's own prune thins it."""
    line = [put(saver, "t", None, "R", 0)]
    for n in range(1, 4):
        line.append(put(saver, "t", line[-1], "R", n))
    put(saver, "t", line[0], "F", 5)  # a second child of the first checkpoint: it goes on a fork
    before, streams = view(saver, "t", None), saver.store.streams()
    rows = journal_rows(store_target)
    for name in streams:
        stream = saver.store.stream(name)
        for thin in (lambda: stream.prune(keep_last=1), lambda: stream.expire(dt.timedelta(0)),
                     lambda: stream.remove(1 if name == streams[0] else stream.version)):
            with pytest.raises(eventckpt.StreamInUseError) as caught:
                thin()
            assert caught.value.thread == ("t", "") and "EventCkptSaver.prune" in str(caught.value)

    async def delete_one() -> bool:
        async with eventckpt.aio.open(store_target) as shared:
            newest = (await shared.list(streams[0], limit=1))[0]
            return await shared.delete(streams[0], newest.id)

    with pytest.raises(eventckpt.StreamInUseError):
        asyncio.run(delete_one())
    assert view(saver, "t", None) == before and journal_rows(store_target) == rows
    saver.prune(["t"], strategy="keep_latest")
    assert len(view(saver, "t", None)) == 1


def test_a_rebuild_racing_another_writer_is_refused(saver: EventCkptSaver, monkeypatch: pytest.MonkeyPatch) -> None:
    """If another writer adds a checkpoint while prune rebuilds a namespace, prune raises ConflictError,
    the namespace keeps every checkpoint and the unfinished rebuild leaves nothing behind."""
    line = [put(saver, "t", None, "R", 0)]
    for n in range(1, 4):
        line.append(put(saver, "t", line[-1], "R", n))
    rebuild = maintenance._rebuild

    def racing(*args: Any) -> Any:
        root = rebuild(*args)
        with EventCkptSaver(saver.store.path) as other:
            line.append(put(other, "t", line[-1], "R", 4, writes=False))
        return root

    monkeypatch.setattr(maintenance, "_rebuild", racing)
    before_streams = journal_rows(saver.store.path)["streams"]
    with pytest.raises(eventckpt.ConflictError):
        saver.prune(["t"])
    assert set(view(saver, "t")) == {cid(x) for x in line}
    assert journal_rows(saver.store.path)["streams"] == before_streams


def test_prune_refuses_an_unknown_strategy(saver: EventCkptSaver) -> None:
    """An unknown prune strategy is an InvalidArgumentError and nothing changes."""
    put(saver, "t", None, "R", 0)
    before = journal_rows(saver.store.path)
    with pytest.raises(eventckpt.InvalidArgumentError):
        saver.prune(["t"], strategy="keep_some")
    assert journal_rows(saver.store.path) == before


class Chat(TypedDict):
    messages: Annotated[list, add_messages]
    answer: str


def chat_graph() -> Any:
    """One step runs `agent` (a message) and `ask` (an interrupt) side by side: after the interrupt, the
    agent's message waits as a pending write of the checkpoint before that step."""
    def agent(state: Chat) -> dict[str, Any]:
        n = len(state["messages"])
        return {"messages": [AIMessage(f"reply {n}", id=f"r{n}")]}

    def ask(state: Chat) -> dict[str, Any]:
        return {"answer": interrupt("go on?")}

    graph = StateGraph(Chat)
    graph.add_node("agent", agent)
    graph.add_node("ask", ask)
    graph.add_edge(START, "agent")
    graph.add_edge(START, "ask")
    graph.add_edge("agent", END)
    graph.add_edge("ask", END)
    return graph.compile(checkpointer=None)


def writes_by_checkpoint(saver: EventCkptSaver, thread: str) -> dict[str, list[Any]]:
    return {t.checkpoint["id"]: [w[1:] for w in t.pending_writes]
            for t in saver.list({"configurable": {"thread_id": thread}})}


def test_writes_stored_once_survive_removing_the_checkpoint_they_refer_to(saver: EventCkptSaver) -> None:
    """A pending write stored as a reference to the next checkpoint's append keeps its value when that
    checkpoint goes: deleting its run, putting its id again, or copying the thread."""
    app = chat_graph()
    app.checkpointer = saver
    config = {"configurable": {"thread_id": "t"}}
    for i in range(3):  # each question is one run, each answer (the resume) another
        app.invoke({"messages": [HumanMessage(f"q{i}", id=f"q{i}")]}, {**config, "metadata": {"run_id": f"ask-{i}"}},
                   durability="sync")
        app.invoke(Command(resume=f"yes {i}"), {**config, "metadata": {"run_id": f"answer-{i}"}}, durability="sync")
    referring = [r for r in journal_rows(saver.store.path)["langgraph_writes"] if '["@",' in r[5]]
    assert len(referring) >= 3  # the agent's messages, waiting on the interrupted checkpoints
    before = writes_by_checkpoint(saver, "t")
    saver.copy_thread("t", "copy")
    assert writes_by_checkpoint(saver, "copy") == before
    saver.delete_for_runs([f"answer-{i}" for i in range(3)])  # the checkpoints the references point at
    for thread in ("t", "copy"):
        after = writes_by_checkpoint(saver, thread)
        assert len(after) == len(before) - 3 and all(after[c] == before[c] for c in after)
        assert sum(w[0] == "messages" for ws in after.values() for w in ws) >= 3


def test_putting_a_referred_checkpoint_again_keeps_the_parents_writes(saver: EventCkptSaver) -> None:
    """Moving a checkpoint id to a new put first gives the writes that referred to its old version their
    values back."""
    first = empty_checkpoint()
    first["channel_values"], first["channel_versions"] = {"m": ["a"]}, {"m": 1}
    parent = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, first, {"source": "loop"}, {"m": 1})
    written = ["b"]
    saver.put_writes(parent, [("m", written)], "task")
    child = empty_checkpoint()
    child["channel_values"], child["channel_versions"] = {"m": ["a", *written]}, {"m": 2}
    saver.put(parent, child, {"source": "loop"}, {"m": 2})  # the list grew by exactly what the task wrote
    assert '["@",' in journal_rows(saver.store.path)["langgraph_writes"][0][5]
    again = {**child, "channel_values": {"m": ["z"]}}
    saver.put(parent, again, {"source": "loop"}, {"m": 2})
    assert saver.get_tuple(parent).pending_writes == [("task", "m", ["b"])]
    assert saver.get_tuple({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                                             "checkpoint_id": child["id"]}}).checkpoint["channel_values"] == {"m": ["z"]}


class Deltas(TypedDict):
    items: Annotated[list, DeltaChannel(extend, snapshot_frequency=4)]
    step: int


def test_prune_keep_latest_refuses_a_thread_with_a_delta_channel(saver: EventCkptSaver) -> None:
    """prune("keep_latest") of a batch with a DeltaChannel thread is NotImplementedError and prunes none."""
    app = looping(Deltas, lambda s: {"items": [s["step"]], "step": s["step"] + 1}, lambda s: s["step"] >= 6).compile(
        checkpointer=saver)
    config = {"configurable": {"thread_id": "d"}}
    app.invoke({"items": [], "step": 0}, config)
    plain = put(saver, "p", None, "r", 0)
    put(saver, "p", plain, "r", 1)
    before = (app.get_state(config).values, view(saver, "p"))
    with pytest.raises(NotImplementedError, match="DeltaChannel: d$"):
        saver.prune(["p", "d"], strategy="keep_latest")
    assert (app.get_state(config).values, view(saver, "p")) == before
    assert before[0] == {"items": [0, 1, 2, 3, 4, 5], "step": 6}
    saver.prune(["p"], strategy="keep_latest")
    assert len(list(saver.list({"configurable": {"thread_id": "p"}}))) == 1


def test_delete_for_runs_refuses_to_cut_a_delta_channel_lineage(saver: EventCkptSaver) -> None:
    """delete_for_runs of an earlier run of a DeltaChannel thread is NotImplementedError and deletes nothing
    (later values are rebuilt from its writes); deleting the newest run is done, and leaves the rest exact."""
    app = looping(Deltas, lambda s: {"items": [s["step"]], "step": s["step"] + 1}, lambda s: s["step"] >= 3).compile(
        checkpointer=saver)
    config = {"configurable": {"thread_id": "d"}}
    app.invoke({"items": [], "step": 0}, {**config, "metadata": {"run_id": "run-1"}})
    first = {c.config["configurable"]["checkpoint_id"]: c.values for c in app.get_state_history(config)}
    app.invoke({"step": 3}, {**config, "metadata": {"run_id": "run-2"}})
    plain = put(saver, "p", None, "r1", 0)
    put(saver, "p", plain, "r2", 1)
    before = ([c.values for c in app.get_state_history(config)], view(saver, "p"))
    assert before[0][0] == {"items": [0, 1, 2, 3], "step": 4}
    with pytest.raises(NotImplementedError, match="later ones build on, in threads that use a DeltaChannel: d$"):
        saver.delete_for_runs(["r1", "run-1"])
    assert ([c.values for c in app.get_state_history(config)], view(saver, "p")) == before
    saver.delete_for_runs(["run-2"])
    assert {c.config["configurable"]["checkpoint_id"]: c.values for c in app.get_state_history(config)} == first
    assert app.get_state(config).values == {"items": [0, 1, 2], "step": 3}


def test_a_str_for_a_sequence_of_ids_is_a_type_error(saver: EventCkptSaver) -> None:
    """prune, delete_for_runs and get_delta_channel_history refuse a str of ids (TypeError), not taking its letters."""
    for thread in ("a", "b", "ab"):
        put(saver, thread, None, "r", 0)
    before = {t: view(saver, t) for t in ("a", "b", "ab")}
    with pytest.raises(TypeError, match="thread_ids must be a sequence of thread IDs, not a str"):
        saver.prune("ab", strategy="delete")
    with pytest.raises(TypeError, match="run_ids must be a sequence of run IDs, not a str"):
        saver.delete_for_runs("r")
    with pytest.raises(TypeError, match="channels must be a sequence of channel names, not a str"):
        saver.get_delta_channel_history(config={"configurable": {"thread_id": "a"}}, channels="log")
    assert {t: view(saver, t) for t in ("a", "b", "ab")} == before
