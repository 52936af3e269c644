"""The journal contract (eventckpt/journal/contract.py), checked promise by promise on each engine: what
`append` writes and refuses, transactions, generations and tree locks, lineage reads, and that caller
strings are data. The whole behavioural suite runs on both engines too; this file pins the contract
itself, so a new engine has one place to start."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import eventckpt
from eventckpt.checkpoint import now
from eventckpt.integrity import ROOT
from eventckpt.journal import (CheckpointIdTaken, Commit, HistoryRewritten, Journal, Segment, StreamRow, VersionRow,
                               VersionTaken, segments_for)


@pytest.fixture
def journal(store: eventckpt.Store) -> Iterator[Journal]:
    with store.core.session() as j:
        yield j


def new_stream(journal: Journal, name: str, parent: StreamRow | None = None, at: int | None = None) -> StreamRow:
    with journal.write():
        return journal.create_stream(name, now(), parent, at)


def commit(row: StreamRow, version: int, events: list[tuple[str, str, bytes | None]], *, generation: int = 0,
           checkpoint_id: str | None = None, snapshot: tuple[str, str] | None = None,
           tools: list[tuple[object, ...]] | None = None) -> Commit:
    nbytes = sum(len(v) for _, _, v in events if v is not None)
    vrow = VersionRow(row.id, version, now(), None, 0, None, None, len(events), nbytes, ROOT)
    return Commit(row, vrow, events, generation, checkpoint_id, tools or [], snapshot)


def test_append_writes_a_whole_version(journal: Journal) -> None:
    """append writes the version row, its events in order, its checkpoint id, tool calls and snapshot."""
    row = new_stream(journal, "s")
    journal.append(commit(row, 1, [("set", "$.a", b"1"), ("append", "$.m", b'"x"')], checkpoint_id="c1",
                          snapshot=('{"a":1}', '{"a":[1,1]}'), tools=[("id1", "search", "{}", "[]", None, None)]))
    seg = [Segment(row.tree_id, row.id, 1, 1)]
    assert journal.tail(seg, 0) == [(1, 0, "set", "$.a", "1"), (1, 1, "append", "$.m", '"x"')]
    assert journal.version_row(row, 1).event_count == 2 and journal.checkpoint_id_of(row, 1) == "c1"
    assert journal.latest_snapshot(seg) == (1, '{"a":1}', '{"a":[1,1]}')
    assert journal.find_checkpoint_id(row.tree_id, "c1") == (row.id, 1)
    assert [r[:3] for r in journal.tool_calls(seg)] == [(1, "id1", "search")]


def test_a_taken_version_is_refused_and_nothing_is_written(journal: Journal) -> None:
    """A second commit of the same version raises VersionTaken and writes none of its rows."""
    row = new_stream(journal, "s")
    journal.append(commit(row, 1, [("set", "$.a", b"1")]))
    with pytest.raises(VersionTaken):
        journal.append(commit(row, 1, [("set", "$.b", b"2")], checkpoint_id="other"))
    assert journal.tail([Segment(row.tree_id, row.id, 1, 1)], 0) == [(1, 0, "set", "$.a", "1")]
    assert journal.find_checkpoint_id(row.tree_id, "other") is None


def test_a_taken_checkpoint_id_is_refused_and_nothing_is_written(journal: Journal) -> None:
    """A checkpoint id already used in the tree raises CheckpointIdTaken; the version is not written."""
    row = new_stream(journal, "s")
    journal.append(commit(row, 1, [("set", "$.a", b"1")], checkpoint_id="c"))
    fork = new_stream(journal, "f", row, 1)
    with pytest.raises(CheckpointIdTaken):
        journal.append(commit(fork, 2, [("set", "$.a", b"2")], checkpoint_id="c"))
    assert journal.version_row(fork, 2) is None


def test_a_commit_to_a_deleted_stream_is_refused(journal: Journal) -> None:
    """A commit built for a stream another session deleted raises VersionTaken."""
    row = new_stream(journal, "s")
    with journal.write():
        journal.delete_stream(row)
    with pytest.raises(VersionTaken):
        journal.append(commit(row, 1, [("set", "$.a", b"1")]))


def test_a_commit_built_before_a_rewrite_is_refused(store: eventckpt.Store, store_target: str) -> None:
    """Once another session bumped the tree's generation, a commit carrying the old one raises
    HistoryRewritten and writes nothing."""
    with store.core.session() as journal:
        row = new_stream(journal, "s")
        generation = journal.generation(row)
        journal.append(commit(row, 1, [("set", "$.a", b"1")], generation=generation))
    with eventckpt.open(store_target) as other, other.core.session() as journal:
        with journal.write():
            journal.lock_tree(row.tree_id)
            assert journal.bump_generation(row.tree_id) != generation
    with store.core.session() as journal:
        assert journal.rewritten_since(row, generation)
        with pytest.raises(HistoryRewritten):
            journal.append(commit(row, 2, [("set", "$.a", b"2")], generation=generation))
        assert journal.version_row(row, 2) is None
        journal.append(commit(row, 2, [("set", "$.a", b"2")], generation=journal.generation(row)))


def test_a_write_transaction_is_all_or_nothing(journal: Journal) -> None:
    """An exception inside write() rolls back everything written in it."""
    with pytest.raises(RuntimeError):
        with journal.write():
            journal.create_stream("gone", now())
            raise RuntimeError("stop")
    assert journal.stream("gone") is None and not journal.in_transaction


def test_a_failed_append_inside_a_batch_leaves_the_batch_usable(journal: Journal) -> None:
    """Inside batch(), a refused append is undone alone and the batch commits the rest."""
    row = new_stream(journal, "s")
    journal.append(commit(row, 1, [("set", "$.a", b"1")]))
    with journal.batch():
        with pytest.raises(VersionTaken):
            journal.append(commit(row, 1, [("set", "$.a", b"9")]))
        journal.append(commit(row, 2, [("set", "$.a", b"2")]))
    assert journal.version_numbers([Segment(row.tree_id, row.id, 1, 10)]) == [1, 2]


def test_reads_see_one_snapshot(store: eventckpt.Store, store_target: str) -> None:
    """Inside read(), a commit another session makes meanwhile is not seen."""
    with store.core.session() as journal:
        row = new_stream(journal, "s")
        journal.append(commit(row, 1, [("set", "$.a", b"1")]))
        with journal.read():
            before = journal.stream_and_head("s")
            with eventckpt.open(store_target) as other, other.core.session() as j2:
                j2.append(commit(row, 2, [("set", "$.a", b"2")]))
            assert journal.stream_and_head("s") == before
        assert journal.stream_and_head("s")[1] == 2


def test_a_thread_in_a_session_gets_its_journal_again_and_keeps_it_to_itself(store: eventckpt.Store) -> None:
    """A nested session gives the thread the same journal; no other thread uses that journal meanwhile
    (SQLite's one connection waits for the outer session to end; PostgreSQL gives another connection)."""
    seen: list[Journal] = []
    nested: list[bool] = []

    def enter_twice() -> None:
        with store.core.session() as outer, store.core.session() as inner:
            nested.append(inner is outer)

    twice = threading.Thread(target=enter_twice, daemon=True)
    twice.start()
    twice.join(10)
    assert nested == [True]  # a session that is not reentrant would still be waiting for itself
    with store.core.session() as outer:

        def other() -> None:
            with store.core.session() as theirs:
                seen.append(theirs)

        worker = threading.Thread(target=other)
        worker.start()
        worker.join(0.3)
        if store.core.backend.kind == "sqlite":
            assert seen == []  # still waiting for this thread's session
        else:
            assert len(seen) == 1 and seen[0] is not outer
        with store.core.session() as again:  # the outer session is still this thread's
            assert again is outer
    worker.join(10)
    assert len(seen) == 1
    if store.core.backend.kind == "sqlite":
        assert seen[0] is outer  # the one connection, its turn come


def test_a_store_closed_while_a_thread_waited_for_its_session_is_refused(tmp_path: Path) -> None:
    """A thread waiting for the SQLite connection when the store is closed gets StoreClosedError."""
    store = eventckpt.open(tmp_path / "s.db")
    errors: list[BaseException] = []

    def wait_then_enter() -> None:
        try:
            with store.core.session():
                pass
        except BaseException as exc:  # noqa: BLE001 (the test looks at what it was)
            errors.append(exc)

    closer = threading.Thread(target=store.close)  # sets closed, then waits for the connection too
    with store.core.session():
        worker = threading.Thread(target=wait_then_enter)
        worker.start()
        time.sleep(0.2)  # the worker waits for the connection
        closer.start()
        deadline = time.monotonic() + 10
        while not store.core.closed and time.monotonic() < deadline:
            time.sleep(0.01)
    worker.join(10)
    closer.join(10)
    assert len(errors) == 1 and isinstance(errors[0], eventckpt.StoreClosedError)


def test_lineage_and_segments_of_a_fork_of_a_fork(journal: Journal) -> None:
    """lineage() is root first; the segments of a fork below its parent's fork point read the right rows."""
    root = new_stream(journal, "r")
    for v in range(1, 6):
        journal.append(commit(root, v, [("set", "$.v", str(v).encode())]))
    mid = new_stream(journal, "m", root, 4)
    journal.append(commit(mid, 5, [("set", "$.v", b"50")]))
    leaf = new_stream(journal, "l", mid, 2)  # below the middle stream's own versions
    journal.append(commit(leaf, 3, [("set", "$.v", b"300")]))
    chain = journal.lineage(leaf)
    assert [r.name for r in chain] == ["r", "m", "l"] and {r.tree_id for r in chain} == {root.tree_id}
    segments = segments_for(chain, 3)
    assert [(s.stream_id, s.lo, s.hi) for s in segments] == [(root.id, 1, 2), (leaf.id, 3, 3)]
    assert [r[4] for r in journal.tail(segments, 0)] == ["1", "2", "300"]
    assert journal.count_versions(segments) == 3 and journal.version_numbers(segments) == [1, 2, 3]
    assert [c.name for c in journal.children(root)] == ["m"] and journal.stream_and_head("l")[1] == 3


def test_names_are_unique_and_caller_strings_are_data(journal: Journal) -> None:
    """A taken stream name raises StreamExistsError; names full of SQL are stored as written."""
    name = "x'); DROP TABLE events; --"
    row = new_stream(journal, name)
    with pytest.raises(eventckpt.StreamExistsError):
        new_stream(journal, name)
    journal.append(commit(row, 1, [("set", '$."a\'b"', b'"; DELETE FROM versions; --"')]))
    assert journal.stream(name) == row and journal.stream_names() == [name]
    assert journal.newest_event([Segment(row.tree_id, row.id, 1, 1)], '$."a\'b"', 1)[4] == '"; DELETE FROM versions; --"'


def test_a_tree_lock_holds_writers_off_until_the_rewrite_ends(store: eventckpt.Store, store_target: str) -> None:
    """While one session holds lock_tree, another session's commit to that tree waits (PostgreSQL) or
    waits for the file's write lock (SQLite), and then sees the new generation."""
    with store.core.session() as journal:
        row = new_stream(journal, "s")
        generation = journal.generation(row)
        journal.append(commit(row, 1, [("set", "$.a", b"1")], generation=generation))
    outcome: list[BaseException | None] = []

    def writer() -> None:
        try:
            with eventckpt.open(store_target) as other, other.core.session() as j2:
                j2.append(commit(row, 2, [("set", "$.a", b"2")], generation=generation))
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the outcome is the assertion
            outcome.append(exc)

    with store.core.session() as journal, journal.write():
        journal.lock_tree(row.tree_id)
        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(0.5)
        assert outcome == []  # still waiting
        journal.bump_generation(row.tree_id)
    thread.join(30)
    assert len(outcome) == 1 and isinstance(outcome[0], HistoryRewritten)


def test_a_change_mark_stays_while_nothing_changes_and_moves_on_any_commit(store: eventckpt.Store,
                                                                            store_target: str) -> None:
    """change_mark is equal again while nothing is written, and moves on a commit of this session, on a
    write rolled back, and on a commit of another process; inside a transaction it is None. An engine
    that cannot tell (PostgreSQL) always answers None, so nothing is ever reused there."""
    with store.core.session() as journal:
        row = new_stream(journal, "s")
        first = journal.change_mark()
        if journal.kind == "postgresql":
            assert first is None and journal.change_mark() is None
            return
        assert first is not None and journal.change_mark() == first
        journal.append(commit(row, 1, [("set", "$.a", b"1")]))
        own = journal.change_mark()
        assert own != first and journal.change_mark() == own
        with pytest.raises(RuntimeError), journal.write():
            journal.create_stream("gone", now())
            assert journal.change_mark() is None
            raise RuntimeError("roll back")
        rolled_back = journal.change_mark()
        assert rolled_back != own
        script = ("import sys, eventckpt\nwith eventckpt.open(sys.argv[1]) as s:\n"
                  "    s.stream('s').save({'a': 2})\n")
        subprocess.run([sys.executable, "-c", script, store_target], check=True, timeout=120)
        assert journal.change_mark() not in (first, own, rolled_back)
