"""An older checkpoint's list of serde items (real LangChain messages) read from the cached newest
checkpoint's bytes: a prefix of them stands for the list when it only grew since (heads.Blob.marks)."""

from __future__ import annotations

import datetime as dt
import random
import threading
from pathlib import Path
from typing import Annotated, Any, TypedDict

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph.message import add_messages

from eventckpt import SnapshotPolicy
from eventckpt.langgraph import EventCkptSaver, heads
from eventckpt.langgraph.values import PackedPrefix
from tests.langgraph_graphs import looping

POLICY = SnapshotPolicy(tail_ratio=0.2, min_tail_bytes=256, event_overhead=16, share_min_bytes=64)
CONFIG = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
START = {"messages": [HumanMessage("go", id="h")], "step": 0}
EVERY_VERSION = SnapshotPolicy.every_version(share_min_bytes=0)  # so that every version can use the cached bytes


class Chat(TypedDict):
    messages: Annotated[list, add_messages]
    step: int


def chat_graph(steps: int) -> Any:
    def node(state: Chat) -> dict[str, Any]:
        n = state["step"] + 1
        out: list[Any] = [AIMessage(f"calling {n}", id=f"ai-{n}",
                                    tool_calls=[{"name": "look", "args": {"n": n}, "id": f"call-{n}"}]),
                          ToolMessage(f"result {n} " + "r" * (n * 7 % 50), tool_call_id=f"call-{n}", id=f"tool-{n}")]
        if n == 12:
            out.append(AIMessage("revised 3", id="ai-3"))  # replaced by id: an old item changed
        if n == 20:
            out.append(RemoveMessage(id="tool-5"))  # the list shrank
        return {"messages": out, "step": n}

    return looping(Chat, node, lambda s: s["step"] >= steps)


def config(checkpoint_id: str | None = None) -> Any:
    """Thread "t"'s config, naming `checkpoint_id` when given."""
    return {"configurable": {"thread_id": "t", "checkpoint_ns": "",
                             **({"checkpoint_id": checkpoint_id} if checkpoint_id else {})}}


def checkpoint(checkpoint_id: str, values: dict[str, Any], version: int = 1) -> Any:
    """A checkpoint to put by hand: `values`, each channel at `version`."""
    return {**empty_checkpoint(), "id": checkpoint_id, "channel_values": values,
            "channel_versions": dict.fromkeys(values, version)}


def compare_every_older(saver: EventCkptSaver, path: Path, taken: list[tuple[int, int]]) -> list[int]:
    """Every older checkpoint read by `saver` equals a fresh saver's read of it (which has nothing cached);
    the steps whose messages came from the cached bytes."""
    from_cache = []
    with EventCkptSaver(path) as fresh:
        for older in [t.config for t in fresh.list(CONFIG)][1:]:
            del taken[:]
            got, want = saver.get_tuple(older), fresh.get_tuple(older)
            assert got is not None and want is not None
            values, expected = got.checkpoint["channel_values"], want.checkpoint["channel_values"]
            assert values == expected
            messages = values.get("messages", [])
            assert [type(m) for m in messages] == [type(m) for m in expected.get("messages", [])]
            assert got.pending_writes == want.pending_writes and got.metadata == want.metadata
            if taken:
                assert [count for _, count in taken] == [len(messages)]
                from_cache.append(want.metadata["step"])
            if messages:
                messages[0].content = "changed by the caller"  # fresh objects: no later read sees it
            assert saver.get_tuple(older).checkpoint["channel_values"] == expected
    return from_cache


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """(items of the cached list, items taken as bytes) of each use of a cached list's prefix."""
    out: list[tuple[int, int]] = []
    marks = heads.Blob.marks
    monkeypatch.setattr(heads.Blob, "marks", lambda blob, count: out.append((blob.count, count)) or marks(blob, count))
    return out


def test_older_checkpoints_read_their_messages_from_the_cached_bytes(tmp_path: Path,
                                                                      taken: list[tuple[int, int]]) -> None:
    """With the newest checkpoint cached, by the saver that wrote it (its puts appended to the cached bytes)
    or by one that read it, an older checkpoint whose messages only grew since reads them as a prefix of
    the cached bytes; every older checkpoint reads exactly as a fresh saver reads it, as fresh objects,
    also those before a message was replaced by id and before one was removed."""
    path = tmp_path / "chat.db"
    with EventCkptSaver(path, snapshots=POLICY) as writer:
        chat_graph(30).compile(checkpointer=writer).invoke(START, CONFIG)
        written = compare_every_older(writer, path, taken)
    with EventCkptSaver(path) as reader:
        assert reader.get_tuple(CONFIG) is not None  # caches the newest
        read = compare_every_older(reader, path, taken)
    for steps in (written, read):
        assert len(steps) >= 6 and min(steps) >= 20  # only since the last change that was not an append


def test_a_prefix_that_cannot_stand_for_the_list_is_read_from_the_journal(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """When the marks of a cached prefix do not describe the list (here: one mark too few claimed), the
    older checkpoint is restored from the journal instead, and reads exactly as a fresh saver reads it."""
    path = tmp_path / "chat.db"
    used: list[int] = []

    def wrong(blob: heads.Blob, count: int) -> list[PackedPrefix]:
        used.append(count)
        assert blob.ends is not None and blob.body is not None
        return [PackedPrefix(bytes(blob.body[: blob.ends[count - 1]]), count + 1)] * count

    monkeypatch.setattr(heads.Blob, "marks", wrong)
    with EventCkptSaver(path, snapshots=POLICY) as writer:
        chat_graph(24).compile(checkpointer=writer).invoke(START, CONFIG)
        compare_every_older(writer, path, [])
    assert used


def test_a_child_written_by_another_saver_that_edits_inside_an_item_reads_as_a_fresh_saver_reads_it(
        tmp_path: Path, taken: list[tuple[int, int]]) -> None:
    """A reader cached a checkpoint as newest; another saver continued it with a child that edits a field
    inside an item of the list (and a pending write the child's append refers to), then forked. The
    reader's cache proves nothing about the child, so the older checkpoint is not read from the cached
    bytes, and reads exactly as a fresh saver reads it (found by review: it raised CorruptStoreError)."""
    def item(text: str, day: int) -> dict[str, Any]:  # a datetime: stored through the serde, as a msgpack map
        return {"text": text, "when": dt.datetime(2024, 1, day)}

    path = tmp_path / "two.db"
    with (EventCkptSaver(path, snapshots=EVERY_VERSION) as writer,
          EventCkptSaver(path, snapshots=EVERY_VERSION) as reader):
        writer.put(config(), checkpoint("c1", {"items": [item("a", 1)], "log": ["start"]}), {"step": 1},
                   {"items": 1, "log": 1})
        writer.put(config("c1"), checkpoint("c2", {"items": [item("a", 1), item("b", 2)], "log": ["start", "one"]}),
                   {"step": 2}, {"items": 2, "log": 2})
        assert reader.get_tuple(config()).checkpoint["id"] == "c2"  # cached at c2
        writer.put_writes(config("c2"), [("log", "two")], "task1")  # c3's append: a reference to c3
        writer.put(config("c2"), checkpoint("c3", {"items": [item("A edited", 1), item("b", 2)],
                                                   "log": ["start", "one", "two"]}),
                   {"source": "loop", "step": 3}, {"items": 3, "log": 3})
        writer.put(config("c1"), checkpoint("c4", {"items": [item("a", 1), item("x", 3)], "log": ["f"]}),
                   {"step": 2}, {"items": 4, "log": 4})  # a fork
        assert reader.get_tuple(config()).checkpoint["id"] == "c4"  # the reader's memory moves to the fork
        with EventCkptSaver(path) as fresh:
            got, want = reader.get_tuple(config("c2")), fresh.get_tuple(config("c2"))
        assert got is not None and want is not None
        assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"]
        assert got.pending_writes == want.pending_writes == [("task1", "log", "two")]
        assert not taken


def test_a_list_stored_plain_before_its_items_needed_the_serde_reads_as_a_fresh_saver_reads_it(
        tmp_path: Path, taken: list[tuple[int, int]]) -> None:
    """A list of plain dicts that later got items only the serde stores changed its encoding but not its
    items (a plain dict's msgpack tree is the dict): it only grew, yet its older, plain checkpoints cannot
    be read from the cached msgpack. They are restored from the journal instead, exactly as a fresh saver
    reads them."""
    path = tmp_path / "switch.db"
    with EventCkptSaver(path, snapshots=EVERY_VERSION) as writer:
        items: list[Any] = []
        parent: Any = config()
        for i in range(6):
            items = [*items, {"k": i} if i < 3 else {"k": i, "when": dt.datetime(2024, 1, i + 1)}]
            parent = writer.put(parent, checkpoint(f"c{i}", {"msgs": items}, i + 1), {"source": "loop", "step": i},
                                {"msgs": i + 1})
        with EventCkptSaver(path) as fresh:
            for i in range(5):
                del taken[:]
                got, want = writer.get_tuple(config(f"c{i}")), fresh.get_tuple(config(f"c{i}"))
                assert got is not None and want is not None
                assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"] == {"msgs": items[: i + 1]}
                assert [type(v) for v in got.checkpoint["channel_values"]["msgs"][-1].values()] == [
                    type(v) for v in items[i].values()]
                if i < 3:
                    assert taken  # tried, found plain, read again


def test_older_checkpoints_read_on_another_thread_while_puts_grow_the_cached_bytes_are_whole(
        tmp_path: Path, taken: list[tuple[int, int]]) -> None:
    """A reader thread reading older checkpoints while the saver's puts append to the cached list (its
    bytes and item ends grown in place) gets each checkpoint's own items, exactly."""
    def item(i: int) -> dict[str, Any]:
        return {"text": f"m{i} " + "x" * (i * 37 % 300), "when": dt.datetime(2024, 1, 1 + i % 28)}

    written: list[int] = []
    problems: list[Any] = []
    done = threading.Event()
    with EventCkptSaver(tmp_path / "threads.db", snapshots=EVERY_VERSION) as saver:

        def write() -> None:
            items: list[Any] = []
            try:
                for i in range(70):
                    items = [*items, item(i)]
                    saver.put(config(f"c{i - 1:04}" if i else None), checkpoint(f"c{i:04}", {"msgs": items}, i + 1),
                              {"source": "loop", "step": i}, {"msgs": i + 1})
                    written.append(i)
            finally:
                done.set()

        def read() -> None:
            rng = random.Random(1)
            while not done.is_set():
                if len(written) < 2:
                    continue
                i = rng.randrange(len(written) - 1)
                try:
                    got = saver.get_tuple(config(f"c{i:04}"))
                    if got is None or got.checkpoint["channel_values"]["msgs"] != [item(k) for k in range(i + 1)]:
                        problems.append(i)
                except Exception as exc:  # noqa: BLE001 - reported below
                    problems.append(repr(exc))

        threads = [threading.Thread(target=write), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert problems == []
    assert len(taken) > 20  # the reads did use the cached bytes


def test_appended_items_are_stored_as_trees_only_when_the_whole_list_packs_back() -> None:
    """Items a serde wrote as msgpack are appended as trees (with each item's size, for the cached ends)
    only when the list of them packs back into the very bytes the serde wrote, as a whole: an item nested
    as deep as ormsgpack packs only on its own is not (found by review), and the list is encoded again."""
    from eventckpt.codec import Codec
    from eventckpt.langgraph.values import TREE_ENCODING, Values, array_header

    class ItemByItem:  # writes an array as its header and each item packed on its own
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            return "msgpack", array_header(len(obj)) + b"".join(map(ormsgpack.packb, obj))

    def nested(depth: int) -> Any:
        value: Any = 1
        for _ in range(depth):
            value = [value]
        return value

    values = Values(ItemByItem(), Codec())
    shallow = values.encode_items([nested(3), "x"], TREE_ENCODING)
    assert shallow is not None and shallow[0] == [nested(3), "x"]
    assert shallow[2] == [len(ormsgpack.packb(nested(3))), len(ormsgpack.packb("x"))]
    assert values.encode_items([nested(255)], TREE_ENCODING) is None
