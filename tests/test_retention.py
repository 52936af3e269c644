"""Retention: prune, expire and remove keep every remaining version exact, respect forks, and give space back."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import subprocess
import sys
from pathlib import Path
from typing import Any

import apsw
import orjson
import pytest

import eventckpt
from eventckpt import SnapshotPolicy, ToolRegistry

from .conftest import RawSQL, journal_rows, strict_equal

SMALL = SnapshotPolicy(min_tail_bytes=2048, event_overhead=16, share_min_bytes=256)


def agent_run(stream: eventckpt.CheckpointStore, steps: int, *, auto_every: int = 0, start: int = 0) -> dict[int, Any]:
    """W-like steps (a growing conversation, a counter, scratch overwrites); returns version -> state."""
    out = {}
    for i in range(start, start + steps):
        with stream.transaction(auto=bool(auto_every) and i % auto_every != 0) as tx:
            if stream.version == 0:
                tx.set("scratch", {})
            tx.append("messages", {"role": "user", "content": f"message {i} " + "x" * 200})
            tx.set("step", i)
            tx.set(("scratch", f"k{i % 5}"), "v" * 300 + str(i))
        out[tx.checkpoint.version] = stream.state(tx.checkpoint.version)
    return out


def assert_exact(stream: eventckpt.CheckpointStore, expected: dict[int, Any]) -> None:
    """Every version listed restores to its expected state; every other one is gone."""
    kept = stream.list_versions()
    for version, state in expected.items():
        if version in kept:
            assert stream.state(version) == state, version
        else:
            with pytest.raises(eventckpt.VersionNotFoundError):
                stream.get(version)


def page_stats(path: Path) -> tuple[int, int]:
    conn = apsw.Connection(str(path))
    try:
        return conn.execute("PRAGMA page_count").fetchall()[0][0], conn.execute("PRAGMA freelist_count").fetchall()[0][0]
    finally:
        conn.close()


def test_prune_keeps_the_last_n(store_target: str) -> None:
    """prune(keep_last=N) removes older versions; the kept ones restore exactly, even after reopening."""
    with eventckpt.open(store_target, snapshots=SMALL) as store:
        stream = store.stream("t")
        expected = agent_run(stream, 120)
        result = stream.prune(keep_last=10)
        assert result.removed == tuple(range(1, 111)) and result.kept_for_forks == ()
        assert stream.list_versions() == list(range(111, 121)) and len(stream) == 10 and stream.version == 120
        assert_exact(stream, expected)
        more = agent_run(stream, 30, start=120)  # writing on after a prune
    with eventckpt.open(store_target, snapshots=SMALL) as store:
        assert_exact(store.stream("t"), {**expected, **more})


def test_prune_auto_only_leaves_holes(store: eventckpt.Store) -> None:
    """auto_only removes only automatic versions outside the last N; manual ones and the last N stay."""
    stream = store.stream("t")
    expected = agent_run(stream, 40, auto_every=4)  # versions 1, 5, 9, ... are manual
    result = stream.prune(keep_last=5, auto_only=True)
    kept = stream.list_versions()
    assert kept == [v for v in range(1, 36) if v % 4 == 1] + [36, 37, 38, 39, 40]
    assert set(result.removed) == set(range(1, 41)) - set(kept)
    assert all(not stream.get(v).auto for v in kept[:-5])
    assert_exact(stream, expected)
    with pytest.raises(eventckpt.VersionNotFoundError):
        stream.state(2)
    with pytest.raises(eventckpt.VersionNotFoundError):
        stream.fork(at=2)


def test_remaining_events_still_fold(store: eventckpt.Store, store_target: str) -> None:
    """After a cut, the first kept version's events rebuild its whole state (invariant 1 holds)."""
    stream = store.stream("t")
    expected = agent_run(stream, 50)
    stream.prune(keep_last=3)
    with RawSQL(store_target) as raw:
        rows = raw.execute("SELECT op, path FROM events WHERE version = 48 ORDER BY seq")
    assert sorted(rows) == [("set", "$.messages"), ("set", "$.scratch"), ("set", "$.step")]
    assert stream.state(48) == expected[48]


def test_expire_by_age_and_by_time(store: eventckpt.Store) -> None:
    """expire(older_than=timedelta | datetime) removes versions created before the cutoff, never the head."""
    stream = store.stream("t")
    expected = agent_run(stream, 10)
    cutoff = stream.get(6).created_at
    assert stream.expire(older_than=cutoff).removed == (1, 2, 3, 4, 5)
    assert stream.expire(older_than=dt.timedelta(days=1)).removed == ()
    assert stream.expire(older_than=dt.timedelta(0)).removed == (6, 7, 8, 9)
    assert stream.list_versions() == [10]
    assert_exact(stream, expected)


def test_remove_one_version(store: eventckpt.Store) -> None:
    """remove(v) drops one version; its neighbours restore; a removed version cannot be removed again."""
    stream = store.stream("t")
    expected = agent_run(stream, 8)
    assert stream.remove(4).removed == (4,)
    assert stream.list_versions() == [1, 2, 3, 5, 6, 7, 8]
    assert_exact(stream, expected)
    with pytest.raises(eventckpt.VersionNotFoundError):
        stream.remove(4)


def test_forks_keep_their_branch_point(store: eventckpt.Store) -> None:
    """A version a fork branches at is kept (and reported); the fork keeps restoring and writing."""
    main = store.stream("main")
    expected = agent_run(main, 30)
    fork = main.fork(at=12, task_id="branch")
    branch_expected = {v: expected[v] for v in range(1, 13)}
    branch_expected.update(agent_run(fork, 10, start=100))
    grand = fork.fork(at=5, task_id="grand")  # below the fork's own versions: shares main's version 5
    result = main.prune(keep_last=4)
    assert result.kept_for_forks == (5, 12)
    assert main.list_versions() == [5, 12, 27, 28, 29, 30]
    assert fork.list_versions() == [5, 12] + list(range(13, 23))
    assert_exact(main, expected)
    assert_exact(fork, branch_expected)
    assert grand.list_versions() == [5] and grand.state(5) == expected[5]
    more = agent_run(fork, 5, start=200)
    assert_exact(fork, {**branch_expected, **more})
    with pytest.raises(eventckpt.VersionInUseError, match="branch"):
        main.remove(12)
    with pytest.raises(eventckpt.VersionInUseError, match="forked from"):
        fork.remove(5)


def test_pruning_a_fork_touches_only_its_own_versions(store: eventckpt.Store) -> None:
    """A fork's prune removes its own versions; the parent's history it shares stays for the parent."""
    main = store.stream("main")
    expected = agent_run(main, 10)
    fork = main.fork(at=6, task_id="branch")
    fork_expected = {**{v: expected[v] for v in range(1, 7)}, **agent_run(fork, 10, start=50)}
    result = fork.prune(keep_last=2)
    assert result.removed == tuple(range(7, 15))
    assert fork.list_versions() == [1, 2, 3, 4, 5, 6, 15, 16]
    assert main.list_versions() == list(range(1, 11))
    assert_exact(fork, fork_expected)
    assert_exact(main, expected)


def test_space_is_reclaimed(db_path: Path) -> None:
    """Pruning a long history frees pages and gives them back: the file shrinks (SQLite: incremental
    vacuum; PostgreSQL's autovacuum does this on its own schedule)."""
    store_target = db_path
    with eventckpt.open(store_target) as store:
        stream = store.stream("t")
        for i in range(400):
            stream.save({"step": i, "blob": f"{i}" + "z" * 4000})
        pages_before, _ = page_stats(store_target)
        stream.prune(keep_last=5)
        pages_after, free_after = page_stats(store_target)
        assert pages_after < pages_before / 10 and free_after == 0
    size = store_target.stat().st_size
    with eventckpt.open(store_target) as store:
        assert store.stream("t").state() == {"step": 399, "blob": "399" + "z" * 4000}
    assert size < 200_000


def test_stale_cache_in_another_connection(store_target: str) -> None:
    """A connection whose cached head predates a prune elsewhere writes correct snapshots afterwards."""
    with eventckpt.open(store_target, snapshots=SMALL) as a, eventckpt.open(store_target, snapshots=SMALL) as b:
        with a.stream("t").transaction() as tx:  # a big key that never changes: snapshots share it by base
            tx.set("config", {"prompt": "p" * 1000})
            tx.set("scratch", {})
        expected = {1: a.stream("t").state(1), **agent_run(a.stream("t"), 60)}
        b.stream("t").prune(keep_last=3)  # removes the snapshot a's cached tracker names as config's base
        expected.update(agent_run(a.stream("t"), 60, start=60))
    with eventckpt.open(store_target) as fresh:
        assert_exact(fresh.stream("t"), expected)
        with RawSQL(store_target) as raw:
            assert raw.one("SELECT count(*) FROM snapshots WHERE version > 60") > 0


def test_a_commit_elsewhere_does_not_hide_a_prune_from_a_stale_head(store_target: str) -> None:
    """A connection that cached a head before another pruned it, and committed to some other stream in
    between, still sees its head as stale: it never reuses a pruned version number, the chain stays whole."""
    never = SnapshotPolicy.never()
    with eventckpt.open(store_target, snapshots=never) as a, eventckpt.open(store_target, snapshots=never) as b:
        def chat(store: eventckpt.Store, name: str) -> None:
            with store.stream(name).transaction() as tx:
                tx.append("log", "message")
                tx.incr("turn")

        chat(a, "s0"), chat(b, "s0"), chat(a, "s0")  # b caches s0 at version 2
        a.stream("s0").fork(at=1, task_id="f1")
        for _ in range(4):
            chat(a, "f1")
        chat(a, "s0")
        assert a.stream("s0").prune(1).removed == (2, 3)
        chat(b, "f1")  # b commits elsewhere after the prune: its next commit to s0 must still notice it
        chat(b, "s0")
        assert b.stream("s0").version == 5 and b.stream("s0").state() == {"log": ["message"] * 5, "turn": 5}
    with eventckpt.open(store_target) as fresh:
        assert [cp.version for cp in fresh.stream("s0").log()] == [5, 4, 1]
        assert fresh.verify().ok


def test_own_commits_check_the_generation_without_a_query_until_another_connection_commits(db_path: Path) -> None:
    """On SQLite a connection that sees only its own commits knows the history generation without reading
    it; a prune committed by another connection in between sends its next commit back to the query, which
    catches the rewrite (the pruned numbers are not reused and every kept version stays exact)."""
    never = SnapshotPolicy.never()
    with eventckpt.open(db_path, snapshots=never) as a, eventckpt.open(db_path, snapshots=never) as b:
        statements: list[str] = []
        conn = a.core.backend.journal.conn

        def commit_on_a() -> list[str]:
            statements.clear()
            conn.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
            try:
                with a.stream("s0").transaction() as tx:
                    tx.append("log", "message")
                    tx.incr("turn")
            finally:
                conn.exec_trace = None
            return [s for s in statements if "history_generation" in s]

        for _ in range(3):
            commit_on_a()
        assert commit_on_a() == []  # steady state: no generation query
        assert b.stream("s0").prune(keep_last=1).removed == (1, 2, 3)
        assert commit_on_a() != []  # another connection committed: read the generation again
        assert commit_on_a() == []
        assert a.stream("s0").list_versions() == [4, 5, 6]
        assert a.stream("s0").state() == {"log": ["message"] * 6, "turn": 6}
    with eventckpt.open(db_path) as fresh:
        assert fresh.verify().ok


def test_pruned_tool_calls_move_to_the_next_kept_version(store: eventckpt.Store, tmp_path: Path) -> None:
    """Tool calls of removed versions fold into the next kept version, so undo_tools still finds them."""
    undone: list[str] = []
    tools = ToolRegistry()
    tools.register("touch", lambda name: name, reverse=lambda args, result: undone.append(result))
    stream = store.stream("t")
    stream.save({"s": 0})
    for i in range(1, 7):
        stream.save({"s": i}, tool_calls=[tools.call("touch", name=f"n{i}")], auto=i % 2 == 0)
    stream.prune(keep_last=1, auto_only=True)
    assert stream.list_versions() == [1, 2, 4, 6, 7]  # manual versions 1, 2, 4, 6 are kept
    assert [(c.version, c.result) for c in stream.tool_calls()] == [
        (2, "n1"), (4, "n2"), (4, "n3"), (6, "n4"), (6, "n5"), (7, "n6")]
    stream.undo_tools(2, tools)
    assert undone == ["n6", "n5", "n4", "n3", "n2"]


def test_checkpoint_ids_of_removed_versions_are_gone(store: eventckpt.Store) -> None:
    """A caller id naming a removed version finds nothing; ids of kept versions still resolve."""
    stream = store.stream("t")
    for i in range(5):
        stream.save({"i": i}, checkpoint_id=f"cp-{i}")
    stream.prune(keep_last=2)
    assert stream.find("cp-0") is None and stream.find("cp-4").version == 5


def test_bad_arguments_change_nothing(store: eventckpt.Store, store_target: str) -> None:
    """Invalid retention arguments raise InvalidArgumentError before anything is written."""
    stream = store.stream("t")
    agent_run(stream, 5)
    before = journal_rows(store_target)
    for call in (lambda: stream.prune(0), lambda: stream.prune(2, auto_only="yes"),
                 lambda: stream.expire(dt.timedelta(days=-1)), lambda: stream.expire(dt.datetime(2020, 1, 1)),
                 lambda: stream.expire("old"), lambda: stream.remove("3")):
        with pytest.raises(eventckpt.InvalidArgumentError):
            call()
    assert journal_rows(store_target) == before
    with pytest.raises(eventckpt.StreamNotFoundError):
        store.stream("empty").prune(1)


# -- removing the head ---------------------------------------------------------------------------------


def test_removing_the_head_moves_it_back(store_target: str) -> None:
    """remove(head) deletes the newest version: the head is the version before, with its exact state; the
    next save is numbered above the removed one (a number never names two states), even after reopening;
    the removed version's checkpoint id and tool calls go with it, and the file verifies."""
    with eventckpt.open(store_target, snapshots=SnapshotPolicy.every_version()) as store:
        stream = store.stream("t")
        expected = agent_run(stream, 6)
        stream.save({**expected[6], "step": 99}, checkpoint_id="seven")
        assert stream.remove(7) == eventckpt.Pruned((7,), ())
        assert stream.version == 6 and stream.latest.version == 6 and stream.state() == expected[6]
        assert stream.find("seven") is None and stream.list_versions() == list(range(1, 7))
        with pytest.raises(eventckpt.VersionNotFoundError):
            stream.get(7)
        assert stream.remove(6).removed == (6,) and stream.version == 5
    with eventckpt.open(store_target) as store:
        stream = store.stream("t")
        cp = stream.save({"after": True}, expected_version=5)
        assert cp.version == 8 and stream.list_versions() == [1, 2, 3, 4, 5, 8]
        assert stream.state(5) == expected[5] and stream.state(8) == {"after": True}
        assert store.verify().ok
        with eventckpt.open(store_target) as other:  # another store's cached view agrees
            assert other.stream("t").get(8).values == {"after": True}


def test_removing_the_only_version_leaves_an_empty_stream(store: eventckpt.Store) -> None:
    """Removing a stream's only version leaves it existing and empty (version 0, latest None); its next
    version is 2."""
    stream = store.stream("t")
    stream.save({"a": 1})
    stream.remove(1)
    assert stream.exists() and stream.version == 0 and stream.latest is None and len(stream) == 0
    assert stream.save({"a": 2}).version == 2 and stream.list_versions() == [2]
    assert store.verify().ok


def test_a_head_forks_branch_from_stays(store: eventckpt.Store, store_target: str) -> None:
    """The head cannot be removed while a fork branches from it (VersionInUseError, nothing written); a
    fork from an earlier version does not stop it, and keeps restoring; a fork's own head can be removed,
    but not the version it shares with its parent."""
    main = store.stream("main")
    expected = agent_run(main, 5)
    fork = main.fork(task_id="at-head")
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.VersionInUseError, match="at-head"):
        main.remove(5)
    assert journal_rows(store_target) == before
    store.delete_stream("at-head")
    early = main.fork(at=3, task_id="early")
    early.save({"mine": 1})
    assert main.remove(5).removed == (5,) and main.version == 4
    assert early.state(3) == expected[3] and early.state() == {"mine": 1}
    assert early.remove(4).removed == (4,) and early.version == 3
    with pytest.raises(eventckpt.VersionInUseError, match="forked from"):
        early.remove(3)
    assert early.save({"again": 1}).version == 5 and store.verify().ok
    del fork


def test_export_and_import_keep_the_removed_number(tmp_path: Path) -> None:
    """An exported stream whose head was removed imports with the removed number, so the copy's next
    version is numbered above it too; a stream left without versions is imported as such."""
    with eventckpt.open(tmp_path / "a.db") as src, eventckpt.open(tmp_path / "b.db") as dst:
        stream = src.stream("t")
        agent_run(stream, 4)
        stream.remove(4)
        empty = src.stream("e")
        empty.save({"x": 1})
        empty.remove(1)
        assert dst.import_lines(src.export("t")) == ["t"] and dst.import_lines(src.export("e")) == ["e"]
        assert dst.stream("t").list_versions() == [1, 2, 3] and dst.stream("t").save({"n": 1}).version == 5
        assert dst.stream("e").exists() and dst.stream("e").version == 0 and dst.stream("e").save({"y": 1}).version == 2
        assert dst.verify().ok


WRITER = """
import sys
import eventckpt
with eventckpt.open(sys.argv[1]) as store:
    stream = store.stream("t")
    stream.save({"n": stream.state()["n"] + 1})          # caches the head it wrote
    print(stream.version, flush=True)
    sys.stdin.readline()                                 # meanwhile another process removes that head
    cp = stream.save({**stream.state(), "after": True})
    print(cp.version, stream.state(cp.version), flush=True)
"""


def test_another_process_sees_the_head_move_back(store_target: str) -> None:
    """A process that cached the head another process then removes builds its next version on the version
    before, numbered above the removed one."""
    with eventckpt.open(store_target) as store:
        for n in range(3):
            store.stream("t").save({"n": n})
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(store_target)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "4"
        with eventckpt.open(store_target) as store:
            assert store.stream("t").remove(4).removed == (4,)
        out, _ = writer.communicate("go\n", timeout=60)
    finally:
        writer.kill()
    assert out.strip() == "5 {'n': 2, 'after': True}"
    with eventckpt.open(store_target) as store:
        assert store.stream("t").list_versions() == [1, 2, 3, 5] and store.verify().ok


def test_folded_versions_count_their_event_bytes_in_utf8(store_target: str) -> None:
    """A version that retention folds removed versions into records the UTF-8 bytes of its events (as a
    commit does), not their characters, so verify passes on text beyond ASCII, merged or rewritten."""
    with eventckpt.open(store_target, snapshots=SnapshotPolicy.never()) as store:
        merged = store.stream("merged")
        merged.save({"a": "x", "b": 0})
        merged.save({"a": "é€😀", "b": 0}, auto=True)  # folded into version 3 by merging its events
        merged.save({"a": "é€😀", "b": 1})
        merged.save({"a": "é€😀", "b": 2})
        rewritten = store.stream("rewritten")
        rewritten.save({"a": "x"})
        rewritten.save({"a": "x", "big": "ü" * 3000}, auto=True)  # more than the state: version 3 is rewritten
        rewritten.save({"a": "ö€"})
        rewritten.save({"a": "ö€", "b": 1})
        for stream in (merged, rewritten):
            assert stream.prune(keep_last=1, auto_only=True).removed == (2,)
            stored = [orjson.dumps(e.value) for e in stream.events(3) if e.op != "delete"]  # plain text: as stored
            assert stream.sizes(3, 3)[0].bytes == sum(map(len, stored)) > len(b"".join(stored).decode())
        assert store.verify().ok, store.verify().problems


def _folded(stream: eventckpt.CheckpointStore, version: int) -> str:
    """How retention folded removed versions into `version`: "rewrite" (top-level sets of its whole state)
    or "merge" (the removed versions' events before its own)."""
    events = stream.events(version)
    return "rewrite" if {e.path for e in events if e.op == "set"} >= {(k,) for k in stream.state(version)} else "merge"


@pytest.mark.parametrize("fold", ["merge", "rewrite"])
def test_folded_versions_keep_their_key_order(store_target: str, fold: str) -> None:
    """Every kept version restores its keys in the order it had them after removed versions fold into it
    (merged or rewritten): a key a removed version deleted and the next kept one set again stays last, and
    a key a removed version created stays where it was created, top-level and nested; the head too. A set
    of a key that was already there still drops the removed set of it."""
    with eventckpt.open(store_target, snapshots=SnapshotPolicy.never()) as store:
        stream = store.stream("t")
        # merge when the state outweighs the removed events, rewrite when they outweigh it
        stream.save({"a": 1, "b": 2, "d": {}, "pad": "p" * (20_000 if fold == "merge" else 0)})
        with stream.transaction(auto=True) as tx:  # version 2, removed
            tx.delete("a")
            tx.set("b", 5)
            tx.set("c", 1)
            tx.set(("d", "x"), 1)
            if fold == "rewrite":
                tx.set("big", "z" * 20_000)
        with stream.transaction() as tx:  # version 3, kept: a comes back after the others
            tx.set("a", 3)
            tx.set("b", 6)
            tx.set(("d", "y"), 2)
            tx.set("e", 0)
            tx.set("c", 2)
            tx.set(("d", "x"), 3)
            if fold == "rewrite":
                tx.delete("big")
        stream.save({**stream.state(), "f": 1})  # version 4, the head
        expected = {v: list(stream.state(v).items()) for v in stream.list_versions()}
        assert stream.prune(keep_last=1, auto_only=True).removed == (2,)
        assert _folded(stream, 3) == fold
        if fold == "merge":  # a set of a key that was there before still makes the removed set of it moot
            assert [e.path for e in stream.events(3)].count(("b",)) == 1
        for version in (1, 3, 4):
            state = stream.state(version)
            assert list(state.items()) == expected[version], version
            assert [list(v) for v in state.values() if type(v) is dict] == [list(dict(expected[version])["d"])]
        assert list(stream.state(3)) == ["b", "d", "pad", "c", "a", "e"] and list(stream.state(3)["d"]) == ["x", "y"]
        assert store.verify().ok, store.verify().problems


def test_a_repaired_snapshot_keeps_the_key_order(store_target: str) -> None:
    """A snapshot whose shared key retention writes in full (its base was removed) still restores the keys in
    the state's order, also when no shared key is left to order them."""
    with eventckpt.open(store_target, snapshots=SnapshotPolicy.every_version(share_min_bytes=16)) as store:
        stream = store.stream("t")
        stream.save({"config": {"prompt": "p" * 100}, "step": 0})  # config: shared by later snapshots
        for i in range(1, 5):
            stream.save({"config": {"prompt": "p" * 100}, "step": i})
        assert stream.prune(keep_last=2).removed == (1, 2, 3)
        assert [list(stream.state(v)) for v in (4, 5)] == [["config", "step"]] * 2
        with eventckpt.open(store_target) as other:
            assert list(other.stream("t").state(4)) == ["config", "step"]
        assert store.verify().ok, store.verify().problems


class Color(enum.Enum):
    RED = 1


@dataclasses.dataclass
class Point:
    x: int


def test_retention_in_a_process_that_does_not_know_the_types_keeps_them(store_target: str) -> None:
    """A prune by a Store not given the state's classes (types=) writes rewritten versions and repaired
    snapshots as they were stored: a Store that knows the classes still restores enums and objects."""
    policy = SnapshotPolicy.every_version(share_min_bytes=16)
    with eventckpt.open(store_target, types=[Color, Point], snapshots=policy) as store:
        stream = store.stream("t")
        expected = {}
        for i in range(8):
            cp = stream.save({"color": Color.RED, "where": Point(1), "keys": {(1, 2): Point(2)}, "step": i,
                              "big": "z" * (4000 if i == 2 else 1)})
            expected[cp.version] = stream.state(cp.version)
    with eventckpt.open(store_target, snapshots=policy) as blind:
        assert blind.stream("t").prune(keep_last=2).removed == tuple(range(1, 7))
    with eventckpt.open(store_target, types=[Color, Point]) as store:
        stream = store.stream("t")
        assert _folded(stream, 7) == "rewrite"
        for version in (7, 8):
            assert strict_equal(stream.state(version), expected[version]), version
        assert store.verify().ok


def test_removing_a_head_that_records_tool_calls_is_refused(store: eventckpt.Store) -> None:
    """remove() of a head recording tool calls (an undo record included) raises VersionInUseError and keeps them."""
    ran: list[int] = []
    tools = ToolRegistry()
    tools.register("refund", lambda order: order, reverse=lambda args, result: ran.append(args["order"]))
    stream = store.stream("a")
    stream.save({"step": 0})
    stream.save({"step": 1}, tool_calls=[tools.call("refund", order=7)])
    undo = stream.undo_tools(since_version=1, registry=tools)
    assert undo.checkpoint is not None
    with pytest.raises(eventckpt.VersionInUseError, match="tool calls"):
        stream.remove(undo.checkpoint.version)
    assert stream.version == 3 and len(stream.tool_calls()) == 2
    assert stream.undo_tools(since_version=1, registry=tools).skipped and ran == [7]
    stream.save({"step": 2})                  # a later version takes the calls when the old head goes
    stream.remove(3)
    assert [(c.version, c.undoes is not None) for c in stream.tool_calls()] == [(2, False), (4, True)]
    assert not stream.undo_tools(since_version=1, registry=tools).undone and ran == [7]
    other = store.stream("b")                 # a head recording an original call keeps it too
    other.save({"step": 0})
    other.save({"step": 1}, tool_calls=[tools.call("refund", order=8)])
    with pytest.raises(eventckpt.VersionInUseError):
        other.remove(2)
    assert other.undo_tools(since_version=0, registry=tools).undone and ran == [7, 8]
