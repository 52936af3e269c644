"""Reading parts of a state and what versions wrote, without restoring: keys(), value() (with windows of
long lists), length(), sizes(), events(), and the stream listings summaries() and tree(). Each is checked
against a full restore (state()) on real files, across snapshots, forks, retention and unusual list shapes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import eventckpt
from eventckpt import SnapshotPolicy


def _every_way(task: eventckpt.CheckpointStore, version: int) -> None:
    """keys, value, length and windows at `version` agree with state(version)."""
    state = task.state(version)
    assert sorted(task.keys(version)) == sorted(state)
    for key, value in state.items():
        assert task.value(key, version) == value, (key, version)
        if isinstance(value, list):
            assert task.length(key, version) == len(value)
            n = len(value)
            for start, stop in ((0, 3), (max(n - 4, 0), n), (n // 2, n // 2 + 5), (n + 2, n + 9), (0, None)):
                assert task.value(key, version, start=start, stop=stop) == value[start:stop], (key, version, start, stop)
            for back in (1, 3, n, n + 5):
                assert task.value(key, version, start=-back) == value[-back:], (key, version, -back)
            for i in {0, n // 3, n - 1} if n else ():
                assert task.value((key, i), version) == value[i]
                assert task.value((key, i - n), version) == value[i - n]  # counted from the end
        else:
            assert task.length(key, version) is None


@pytest.fixture
def conversation(tmp_path: Path) -> eventckpt.Store:
    """A conversation of 400 steps with small snapshots, a fork and a dict of counters."""
    store = eventckpt.open(tmp_path / "c.db", snapshots=SnapshotPolicy(min_tail_bytes=2048))
    task = store.stream("chat")
    task.save({"messages": [{"n": 0}], "scratch": {"a": 0}, "step": 0}, {"input_tokens": 0})
    for i in range(1, 400):
        with task.transaction(name="tool" if i % 50 == 0 else None, metadata={"step": i}) as tx:
            tx.append("messages", {"n": i, "text": "x" * (i % 7)})
            tx.set(("scratch", f"k{i % 5}"), i)
            tx.set("step", i)
            tx.add_usage(input_tokens=10)
    branch = task.fork(at=250, task_id="chat-fork")
    for i in range(3):
        with branch.transaction() as tx:
            tx.append("messages", {"fork": i})
    yield store
    store.close()


def test_parts_agree_with_restores(conversation: eventckpt.Store) -> None:
    """At many versions of a stream and of its fork, every key, value, length and window equals the
    restored state's."""
    task = conversation.stream("chat")
    for version in (1, 2, 77, 250, 251, 399, 400):
        _every_way(task, version)
    fork = conversation.stream("chat-fork")
    for version in (100, 250, 251, 253):
        _every_way(fork, version)
    assert task.value(("messages", 5, "n"), 300) == 5
    assert fork.value("messages", start=250, stop=253) == [{"fork": 0}, {"fork": 1}, {"fork": 2}]


def test_unusual_list_shapes_fall_back_to_reading_the_list(store: eventckpt.Store) -> None:
    """Lists with extends, deleted or edited items, truncations, a reset or a delete-and-recreate give the
    same windows as a restore (read in full where positions cannot be counted)."""
    task = store.stream("shapes")
    task.save({"a": [1, 2, 3], "b": [], "c": [0], "d": ["x"], "e": [1], "f": [[1]]})
    with task.transaction() as tx:
        tx.extend("a", [4, 5])           # one event, two items
        tx.append("b", "b0")
        tx.extend("b", [])               # an event, no item
        tx.append("c", 1)
        tx.delete(("c", 0))              # shifts every later item
        tx.append("d", "y")
        tx.set(("d", 0), "edited")       # an item changed in place
        tx.truncate("e", 0)
        tx.append("e", 7)
        tx.append(("f", 0), 2)           # nested list
    with task.transaction() as tx:
        tx.delete("d")
        tx.append("d", "new")           # a new list from an append
        tx.set("b", ["reset"])
        tx.append("b", "after")
    for version in (1, 2, 3):
        _every_way(task, version)


def test_missing_things_raise(conversation: eventckpt.Store) -> None:
    """A missing stream, version or path is an error, never an empty answer; bad arguments are typed."""
    task = conversation.stream("chat")
    with pytest.raises(eventckpt.StreamNotFoundError):
        conversation.stream("nope").keys()
    with pytest.raises(eventckpt.VersionNotFoundError):
        task.value("step", 401)
    with pytest.raises(eventckpt.PathError):
        task.value("missing", 3)
    with pytest.raises(eventckpt.PathError):
        task.value(("messages", 9999), 3)
    with pytest.raises(eventckpt.PathError):
        task.value("step", 3, start=0, stop=2)  # not a list
    with pytest.raises(eventckpt.InvalidArgumentError):
        task.value("messages", start=-1, stop=3)
    with pytest.raises(eventckpt.VersionNotFoundError):
        task.events(0)
    with pytest.raises(eventckpt.StreamNotFoundError):
        conversation.stream("nope").sizes()
    with pytest.raises(eventckpt.StreamNotFoundError):
        conversation.summaries(before="nope")
    with pytest.raises(eventckpt.StreamNotFoundError):
        conversation.tree("nope")


def test_windows_after_retention(tmp_path: Path) -> None:
    """After prune (a cut at the start) and an auto-only prune (holes), windows and values still equal
    the restored states of the kept versions."""
    store = eventckpt.open(tmp_path / "r.db", snapshots=SnapshotPolicy(min_tail_bytes=1024))
    task = store.stream("r")
    task.save({"messages": [], "n": 0})
    for i in range(1, 200):
        with task.transaction(auto=i % 3 != 0) as tx:
            tx.append("messages", {"i": i})
            tx.incr("n")
    task.prune(keep_last=150, auto_only=True)
    task.prune(keep_last=60)
    for version in task.list_versions()[::7] + [task.version]:
        _every_way(task, version)
    store.close()


def test_negative_indices_count_from_the_end_or_name_nothing(store: eventckpt.Store) -> None:
    """A negative list index in value() and length() counts from the end at any depth, as in a transaction,
    whether the list was only appended to or not; one past the start is PathError (length: None), never
    the first item or a bare IndexError."""
    task = store.stream("t")
    task.save({"messages": ["m0"], "turns": [[1, 2], [3]], "d": {"l": [[1], [2, 3]]}})
    with task.transaction() as tx:
        tx.append("messages", "m1")  # a list only appended to: read through its window
    assert [task.value(("messages", i)) for i in (-1, -2)] == ["m1", "m0"]
    assert task.value(("turns", -2, -1)) == 2
    assert task.value(("d", "l", -1, -2)) == 2
    assert (task.length(("turns", -2)), task.length(("d", "l", -1)), task.length(("d", "l", -3))) == (2, 2, None)
    for path in (("messages", -3), ("messages", -100), ("turns", -5), ("turns", 0, -9), ("d", "l", -9), ("d", "l", 0, -2)):
        with pytest.raises(eventckpt.PathError, match="no value there"):
            task.value(path)


def test_sizes_and_events_report_what_each_version_wrote(conversation: eventckpt.Store) -> None:
    """sizes() gives each version's event count and bytes from the version rows (oldest first, within
    since..until, at most limit); events() gives a version's events in order, like history rows."""
    task = conversation.stream("chat")
    sizes = task.sizes(10, 14)
    assert [s.version for s in sizes] == [10, 11, 12, 13, 14]
    events = task.events(12)
    assert [(e.op, e.path) for e in events] == [("append", ("messages",)), ("set", ("scratch", "k1")), ("set", ("step",))]
    assert sizes[2].events == len(events)
    assert events[0].value == {"n": 11, "text": "x" * 4} and events[0].version == 12 and events[0].task_id == "chat"
    assert task.sizes(398, limit=1)[0].version == 398 and task.sizes(401) == []
    fork = conversation.stream("chat-fork")
    assert fork.events(7)[0].task_id == "chat"  # a shared version is stored in the parent
    assert [s.version for s in fork.sizes(249)] == [249, 250, 251, 252, 253]
    assert task.events(12, limit=1) == events[:1]


def test_summaries_and_trees(tmp_path: Path) -> None:
    """summaries() pages every stream newest first with head, fork origin, last commit and usage at the
    head (inherited for a fork without versions of its own); tree() lists a stream tree root first."""
    store = eventckpt.open(tmp_path / "s.db")
    a = store.stream("a")
    a.save({"x": 1}, {"input_tokens": 5})
    a.save({"x": 2}, {"input_tokens": 9})
    b = a.fork(at=1, task_id="b")
    b.save({"x": 3}, {"input_tokens": 7})
    c = b.fork(task_id="c")  # no version of its own: head is b's 2
    store.stream("other").save({"y": 1})
    page = store.summaries(2)
    assert [s.task_id for s in page] == ["other", "c"]
    assert page[1].head == 2 and page[1].parent.task_id == "b" and page[1].token_usage == {"input_tokens": 7}
    assert page[1].updated_at is None and page[1].tree == "a"
    rest = store.summaries(10, before="c")
    assert [s.task_id for s in rest] == ["b", "a"]
    assert rest[1].head == 2 and rest[1].parent is None and rest[1].token_usage == {"input_tokens": 9}
    assert rest[0].parent == eventckpt.ForkOrigin("a", 1) and rest[0].updated_at is not None
    assert [s.task_id for s in store.tree("c")] == ["a", "b", "c"]
    assert [s.task_id for s in store.tree("a", limit=2)] == ["a", "b"]
    assert [s.task_id for s in store.tree("other")] == ["other"]
    assert c.version == 2
    store.close()
