"""list() of many checkpoints: built a chunk at a time, each chunk's oldest lists standing for the next
chunk's lists that only grew since; and a thread's namespaces listed each in its own key order, merged."""

from __future__ import annotations

import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from eventckpt import SnapshotPolicy, materialize
from eventckpt.langgraph import EventCkptSaver, saver as saver_module
from tests.langgraph_graphs import looping

SMALL_SNAPSHOTS = SnapshotPolicy(tail_ratio=0.2, min_tail_bytes=256, event_overhead=16, share_min_bytes=64)
THREAD = {"configurable": {"thread_id": "t"}}
STEPS = 60


class Growing(TypedDict):
    messages: Annotated[list, operator.add]  # only grows
    notes: list  # replaced whole at some steps, grown at others
    step: int


def growing_graph() -> Any:
    def node(state: Growing) -> dict[str, Any]:
        n = state["step"] + 1
        notes = [f"reset at {n}"] if n % 17 == 0 else [*state["notes"], f"note {n}"]
        return {"messages": [{"role": "ai", "content": f"step {n} " + "x" * (n % 23)}], "notes": notes, "step": n}

    return looping(Growing, node, lambda s: s["step"] >= STEPS)


@pytest.fixture
def prefixes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The version of each list a restore took as a later list's prefix."""
    taken: list[int] = []
    original = materialize.later_prefixes

    def spy(*args: Any) -> Any:
        out = original(*args)
        taken.extend(args[2] for _ in out)
        return out

    monkeypatch.setattr(materialize, "later_prefixes", spy)
    return taken


@pytest.fixture
def written(tmp_path: Path) -> Path:
    path = tmp_path / "growing.db"
    with EventCkptSaver(path, snapshots=SMALL_SNAPSHOTS) as saver:
        growing_graph().compile(checkpointer=saver).invoke({"messages": [], "notes": [], "step": 0},
                                                           {**THREAD, "recursion_limit": 200})
    return path


def each_read_alone(path: Path) -> dict[str, Any]:
    """Every checkpoint's tuple, by id, as get_tuple of a fresh saver reads it (one restore each)."""
    with EventCkptSaver(path) as fresh:
        ids = [t.config["configurable"]["checkpoint_id"] for t in fresh.list(THREAD)]
        return {cid: fresh.get_tuple({"configurable": {**THREAD["configurable"], "checkpoint_ns": "",
                                                       "checkpoint_id": cid}}) for cid in ids}


def test_a_listing_in_chunks_equals_reading_each_checkpoint_alone(written: Path, prefixes: list[int],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A listing built 5 checkpoints at a time gives what one restore per checkpoint gives, though each
    chunk after the first takes the lists that only grew from the chunk before it."""
    expected = each_read_alone(written)
    monkeypatch.setattr(saver_module, "_CHUNK", 5)
    del prefixes[:]
    with EventCkptSaver(written) as saver:
        listed = list(saver.list(THREAD))
    assert [t.config["configurable"]["checkpoint_id"] for t in listed] == list(expected)
    for got in listed:
        want = expected[got.config["configurable"]["checkpoint_id"]]
        assert got.checkpoint == want.checkpoint
        assert got.metadata == want.metadata and got.pending_writes == want.pending_writes
        assert got.parent_config == want.parent_config
    # each chunk's restore from a snapshot (versions 58, 53, ... 3) after the first takes "messages", and
    # "notes" too where it only grew since the chunk before
    assert set(range(13, 54, 5)) <= set(prefixes) and len(prefixes) > len(set(prefixes))


def test_the_first_chunk_takes_the_cached_newest_lists(written: Path, prefixes: list[int],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """With the newest checkpoint cached (read first), the first chunk's lists come from it, and the
    listing is still exact."""
    expected = each_read_alone(written)
    monkeypatch.setattr(saver_module, "_CHUNK", 5)
    with EventCkptSaver(written) as saver:
        saver.get_tuple(THREAD)
        del prefixes[:]
        listed = list(saver.list(THREAD))
    assert [t.checkpoint for t in listed] == [expected[t.config["configurable"]["checkpoint_id"]].checkpoint
                                              for t in listed]
    first_chunk_oldest = listed[4].checkpoint["channel_values"]["step"] + 2  # its version: step 0 is version 2
    assert prefixes[0] == first_chunk_oldest


def test_emptying_the_lists_a_chunk_handed_out_leaves_the_next_chunks_exact(written: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The lists a chunk's oldest checkpoint stands for are copied before the caller gets them: a caller
    emptying them between chunks changes nothing that comes after."""
    expected = each_read_alone(written)
    monkeypatch.setattr(saver_module, "_CHUNK", 5)
    with EventCkptSaver(written) as saver:
        for i, got in enumerate(saver.list(THREAD)):
            values = got.checkpoint["channel_values"]
            assert values == expected[got.config["configurable"]["checkpoint_id"]].checkpoint["channel_values"]
            if i % 5 == 4:  # the oldest of its chunk
                for value in values.values():
                    if type(value) is list:
                        value.clear()


def put_by_hand(saver: EventCkptSaver, ns: str, checkpoint_id: str, parent: str | None, step: int) -> None:
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ns,
                               **({"checkpoint_id": parent} if parent else {})}}
    checkpoint = {**empty_checkpoint(), "id": checkpoint_id, "channel_values": {"step": step},
                  "channel_versions": {"step": step}}
    saver.put(config, checkpoint, {"source": "loop", "step": step, "ns": ns or "root"}, {"step": step})


@pytest.fixture
def namespaces(store_target: str) -> Iterator[EventCkptSaver]:
    """Thread "t" with checkpoints in three namespaces whose ids interleave."""
    with EventCkptSaver(store_target) as saver:
        parents: dict[str, str | None] = {"": None, "sub:a": None, "sub:b": None}
        for i in range(30):
            ns = ("", "sub:a", "sub:b", "", "sub:b")[i % 5]
            checkpoint_id = f"1ef00000-0000-6000-8000-{i:012d}"
            put_by_hand(saver, ns, checkpoint_id, parents[ns], i)
            parents[ns] = checkpoint_id
        yield saver


@pytest.mark.parametrize("limit", [None, 0, 1, 4, 29, 30, 31])
def test_a_threads_namespaces_list_as_one_listing_newest_first(namespaces: EventCkptSaver, limit: int | None) -> None:
    """A thread's checkpoints of all namespaces come newest first across them, `limit` of them."""
    listed = [(t.config["configurable"]["checkpoint_ns"], t.metadata["step"]) for t in namespaces.list(THREAD, limit=limit)]
    every = [(("", "sub:a", "sub:b", "", "sub:b")[i % 5], i) for i in reversed(range(30))]
    assert listed == every[:limit]


def test_before_and_filters_apply_across_a_threads_namespaces(namespaces: EventCkptSaver) -> None:
    """`before` and metadata filters select across namespaces, and `limit` counts what they kept."""
    before = {"configurable": {"thread_id": "t", "checkpoint_id": "1ef00000-0000-6000-8000-000000000020"}}
    assert [t.metadata["step"] for t in namespaces.list(THREAD, before=before, limit=6)] == [19, 18, 17, 16, 15, 14]
    kept = [t.metadata["step"] for t in namespaces.list(THREAD, filter={"ns": "sub:b"}, before=before, limit=3)]
    assert kept == [19, 17, 14]
    assert list(namespaces.list({"configurable": {"thread_id": "nobody"}})) == []


def test_a_thread_wide_listing_with_a_limit_does_not_visit_every_checkpoint(tmp_path: Path) -> None:
    """list(limit=3) of a thread (no namespace named) does the same SQLite work for 40 checkpoints as
    for 400: each namespace is walked newest first and left after `limit` (no sort of the thread)."""
    work = {}
    for count in (40, 400):
        with EventCkptSaver(tmp_path / f"n{count}.db") as saver:
            parent = None
            for i in range(count):
                checkpoint_id = f"1ef00000-0000-6000-8000-{i:012d}"
                put_by_hand(saver, ("", "sub:a")[i % 2], checkpoint_id, parent if i % 2 == 0 else None, i)
                parent = checkpoint_id if i % 2 == 0 else parent
            conn = saver.store.core.backend.journal.conn
            steps = [0]

            def count_steps(seen: list[int] = steps) -> bool:
                seen[0] += 1
                return False  # go on

            conn.set_progress_handler(count_steps, 100)
            listed = [t.metadata["step"] for t in saver.list(THREAD, limit=3)]
            conn.set_progress_handler(None)
        assert listed == [count - 1, count - 2, count - 3]
        work[count] = steps[0]
    assert work[400] <= 1.5 * work[40]


def test_a_listing_of_many_threads_keeps_lists_of_the_next_chunks_streams_only(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Listing 30 threads 4 checkpoints at a time keeps, between chunks, lists of at most the 4 streams the
    next chunk holds (not one state of every thread seen), and lists every thread exactly."""
    monkeypatch.setattr(saver_module, "_CHUNK", 4)
    kept: list[int] = []
    original = saver_module.EventCkptSaver._read

    def spy(self: EventCkptSaver, chunk: Any, items: Any, proven: bool = False, lists: Any = None) -> Any:
        kept.append(len(lists or {}))
        return original(self, chunk, items, proven, lists)

    monkeypatch.setattr(saver_module.EventCkptSaver, "_read", spy)
    with EventCkptSaver(tmp_path / "threads.db") as saver:
        for step in range(3):
            for thread in range(30):
                config = {"configurable": {"thread_id": f"t{thread}", "checkpoint_ns": ""}}
                newest = saver.get_tuple(config)
                if newest is not None:
                    config = newest.config
                values = {"items": [{"thread": thread, "step": s} for s in range(step + 1)]}
                checkpoint = {**empty_checkpoint(), "id": f"1ef00000-0000-6000-8000-{step * 100 + thread:012d}",
                              "channel_values": values, "channel_versions": {"items": step + 1}}
                saver.put(config, checkpoint, {"step": step}, {"items": step + 1})
        listed = list(saver.list(None))
    assert len(listed) == 90 and max(kept) <= 4
    for got in listed:
        thread = int(got.config["configurable"]["thread_id"][1:])
        step = got.metadata["step"]
        assert got.checkpoint["channel_values"]["items"] == [{"thread": thread, "step": s} for s in range(step + 1)]


def test_a_thread_with_many_namespaces_lists_as_one_listing(tmp_path: Path) -> None:
    """A thread with more namespaces than are listed one by one (subgraph calls) lists the same way:
    newest first across them, `limit` of them."""
    with EventCkptSaver(tmp_path / "many.db") as saver:
        for i in range(40):
            put_by_hand(saver, f"sub:{i % 20}" if i % 4 else "", f"1ef00000-0000-6000-8000-{i:012d}", None, i)
        assert [t.metadata["step"] for t in saver.list(THREAD, limit=5)] == [39, 38, 37, 36, 35]
        assert [t.metadata["step"] for t in saver.list(THREAD)] == list(reversed(range(40)))
