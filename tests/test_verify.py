"""verify(): the checksum chain, snapshots against a replay of the events, and the engine's own checks find
every altered, missing or reordered event, version row and snapshot, on each engine."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from pathlib import Path

import apsw
import orjson
import pytest

import eventckpt
from eventckpt import SnapshotPolicy

from .conftest import RawSQL

POLICY = SnapshotPolicy(min_tail_bytes=200, event_overhead=16, share_min_bytes=256)


def build(path: Path | str) -> None:
    """A conversation with snapshots that write keys in full and share others (by an earlier snapshot
    and by the event that created a list), plus a fork and a fork of the fork."""
    with eventckpt.open(path, snapshots=POLICY) as store:
        task = store.stream("main")
        task.save({"config": {"prompt": "p" * 600}, "step": 0}, metadata={"node": "input"})  # messages: made by append
        for i in range(1, 61):
            with task.transaction(metadata={"node": "agent", "i": i}) as tx:
                tx.append("messages", {"n": i, "text": "x" * 60})
                tx.set("step", i)
                tx.set(("config", "turn"), i) if i == 30 else None
        fork = task.fork(at=40, task_id="fork")
        for i in range(5):
            fork.save({**fork.state(), "step": 100 + i})
        fork.fork(at=20, task_id="deep").save({"step": -1})


_PG = [  # SQLite's spelling -> PostgreSQL's, for the few tampering statements that differ
    ("zeroblob(16)", "decode(repeat('00', 16), 'hex')"),
    ("json_set(state, '$.step', 999)", "jsonb_set(state::jsonb, '{step}', '999')::text"),
    ("json_set(manifest, '$.messages[0]', json('[3,0]'))", "jsonb_set(manifest::jsonb, '{messages,0}', '[3,0]')::text"),
    ("INSERT INTO metadata_index VALUES ('node', 'forged', 1, 3)",
     "INSERT INTO metadata_index VALUES (1, 'node', '\"forged\"', 1, 3)"),
]


def tamper(path: Path | str, *statements: str) -> None:
    """Run SQL beside eventckpt with the engine's foreign keys off (a tamperer's plain connection)."""
    with RawSQL(path) as raw:
        if raw.kind == "postgresql":
            raw.execute("SET session_replication_role = replica")  # no foreign key triggers
        for sql in statements:
            if raw.kind == "postgresql":
                for lite, pg in _PG:
                    sql = sql.replace(lite, pg)
            raw.execute(sql)


def report(path: Path | str) -> eventckpt.verify.VerifyReport:
    with eventckpt.open(path, snapshots=POLICY) as store:
        return store.verify()


def kinds(result: eventckpt.verify.VerifyReport) -> set[tuple[str, str | None, int | None]]:
    return {(p.kind, p.task_id, p.version) for p in result.problems}


@pytest.fixture
def built(store_target: str) -> str:
    build(store_target)
    return store_target


def test_intact_store_is_ok(built: Path) -> None:
    """An untouched store verifies: every version, event and snapshot checked, no problems."""
    result = report(built)
    assert result.ok and result.problems == ()
    assert (result.streams, result.versions) == (3, 61 + 5 + 1)
    assert result.snapshots >= 3
    with RawSQL(built) as raw:
        rows = raw.execute("SELECT version, manifest FROM snapshots WHERE stream_id = 1 ORDER BY version")
    manifests = [orjson.loads(m) for _, m in rows]
    assert any(type(m.get("messages", [0])[0]) is list for m in manifests)  # shared by its creating event
    assert any(type(m["config"][0]) is int and m["config"][0] != v for m, (v, _) in zip(manifests, rows))  # by a snapshot


def test_progress_is_reported(built: Path) -> None:
    """progress(done, total) climbs to the number of versions."""
    calls: list[tuple[int, int]] = []
    with eventckpt.open(built) as store:
        store.verify(lambda done, total: calls.append((done, total)))
    assert calls[-1] == (67, 67) and all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))


TAMPERING: dict[str, tuple[list[str], Callable[[set], bool]]] = {
    "event altered": (["UPDATE events SET value = '{\"n\":999}' WHERE stream_id = 1 AND version = 10 AND seq = 0"],
                      lambda k: ("checksum", "main", 10) in k),
    "event deleted": (["DELETE FROM events WHERE stream_id = 1 AND version = 12 AND seq = 1"],
                      lambda k: {("checksum", "main", 12), ("events", "main", 12)} <= k),
    "events reordered": (["UPDATE events SET seq = 9 WHERE stream_id = 1 AND version = 14 AND seq = 0",
                          "UPDATE events SET seq = 0 WHERE stream_id = 1 AND version = 14 AND seq = 1",
                          "UPDATE events SET seq = 1 WHERE stream_id = 1 AND version = 14 AND seq = 9"],
                         lambda k: ("checksum", "main", 14) in k),
    "version row altered": (["UPDATE versions SET name = 'forged' WHERE stream_id = 1 AND version = 20"],
                            lambda k: k == {("checksum", "main", 20)}),
    "version checksum rewritten": (["UPDATE versions SET checksum = zeroblob(16) WHERE stream_id = 1 AND version = 21"],
                                   lambda k: {("checksum", "main", 21), ("checksum", "main", 22)} <= k),
    "version row deleted": (["DELETE FROM versions WHERE stream_id = 1 AND version = 25"],
                            lambda k: ("version", "main", 25) in k and any(kind == "file" for kind, _, _ in k)),
    "versions reordered": (["UPDATE versions SET version = 1000 WHERE stream_id = 1 AND version = 30",
                            "UPDATE versions SET version = 30 WHERE stream_id = 1 AND version = 31",
                            "UPDATE versions SET version = 31 WHERE stream_id = 1 AND version = 1000"],
                           lambda k: {("checksum", "main", 30), ("checksum", "main", 31)} <= k),
    "fork's version altered": (["UPDATE events SET value = '7' WHERE stream_id = 2 AND version = 43"],
                               lambda k: ("checksum", "fork", 43) in k),
}


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_journal_tampering_is_found(built: Path, name: str) -> None:
    """Each alteration of the journal is reported at the version it touched."""
    statements, found = TAMPERING[name]
    tamper(built, *statements)
    result = report(built)
    assert not result.ok and found(kinds(result)), result.problems


def snapshot_versions(path: Path | str) -> list[int]:
    with RawSQL(path) as raw:
        return [v for (v,) in raw.execute("SELECT version FROM snapshots WHERE stream_id = 1 ORDER BY version")]


def test_snapshot_value_altered(built: Path) -> None:
    """A key a snapshot writes in full that disagrees with the replay is reported."""
    version = snapshot_versions(built)[-1]
    tamper(built, f"UPDATE snapshots SET state = json_set(state, '$.step', 999) WHERE stream_id = 1 AND version = {version}")
    problems = report(built).problems
    assert [(p.kind, p.version) for p in problems] == [("snapshot", version)] and "'step'" in problems[0].detail


def test_referenced_snapshot_deleted(built: Path) -> None:
    """Deleting a snapshot a later manifest refers to is reported at the later snapshot."""
    with RawSQL(built) as raw:
        rows = raw.execute("SELECT version, manifest FROM snapshots WHERE stream_id = 1 ORDER BY version DESC")
    base = next(m["config"][0] for v, m in ((v, orjson.loads(t)) for v, t in rows) if m["config"][0] != v)
    tamper(built, f"DELETE FROM snapshots WHERE stream_id = 1 AND version = {base}")
    problems = report(built).problems
    assert problems and all(p.kind == "snapshot" and "config" in p.detail for p in problems)


def test_snapshots_reordered(built: Path) -> None:
    """Two snapshots whose contents were swapped are both reported."""
    first, second = snapshot_versions(built)[-2:]
    tamper(built, f"UPDATE snapshots SET version = -1 WHERE stream_id = 1 AND version = {first}",
           f"UPDATE snapshots SET version = {first} WHERE stream_id = 1 AND version = {second}",
           f"UPDATE snapshots SET version = {second} WHERE stream_id = 1 AND version = -1")
    assert {(p.kind, p.version) for p in report(built).problems} >= {("snapshot", first), ("snapshot", second)}


def test_manifest_base_forged(built: Path) -> None:
    """A manifest entry claiming a shared key began at another event is reported."""
    version = snapshot_versions(built)[-1]
    tamper(built, f"UPDATE snapshots SET manifest = json_set(manifest, '$.messages[0]', json('[3,0]'))"
                  f" WHERE stream_id = 1 AND version = {version}")
    problems = report(built).problems  # (PostgreSQL's jsonb_set also sorts the keys: a second problem there)
    assert {(p.kind, p.version) for p in problems} == {("snapshot", version)}
    assert any("messages" in p.detail and "orders" not in p.detail for p in problems)


def test_metadata_index_out_of_step(built: Path) -> None:
    """A metadata index row that versions.metadata does not back is reported."""
    tamper(built, "INSERT INTO metadata_index VALUES ('node', 'forged', 1, 3)")
    assert [p.kind for p in report(built).problems] == ["file"]


def test_damaged_pages_are_reported(db_path: Path) -> None:
    """Bytes overwritten inside the events' pages of a file show as problems, never as an exception."""
    build(db_path)
    built = db_path
    with eventckpt.open(built) as store:
        store.core.backend.journal.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        pages = [p for (p,) in store.core.backend.journal.conn.execute(
            "SELECT pageno FROM dbstat WHERE name = 'events' AND pagetype = 'leaf' ORDER BY pageno")]
        page_size = store.core.backend.journal.conn.execute("PRAGMA page_size").fetchall()[0][0]
    with open(built, "r+b") as f:
        for page in pages[len(pages) // 3 :: 4]:
            f.seek((page - 1) * page_size + 200)
            f.write(b"\xff" * 300)
    result = report(built)
    assert not result.ok and any(p.kind == "file" for p in result.problems)


def test_deeply_nested_forks(store_target: str) -> None:
    """Forks of forks nested deeper than the stack allows verify (no recursion per fork), and damage deep
    in the chain shows at its stream."""
    with eventckpt.open(store_target) as store:
        stream = store.stream("s0")
        stream.save({"n": 100})
        for i in range(1, 301):
            stream = stream.fork(task_id=f"s{i}")
            stream.save({"n": 100 + i})
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(len(inspect.stack()) + 150)  # far fewer frames than forks
        try:
            assert store.verify().ok
        finally:
            sys.setrecursionlimit(limit)
        with store.core.session() as journal:
            owner = journal.stream("s299").id
    tamper(store_target, f"UPDATE events SET value = '999' WHERE stream_id = {owner}")  # same size as 399
    assert {(p.kind, p.task_id) for p in report(store_target).problems} == {("checksum", "s299")}


def _retained(store_target: str) -> eventckpt.Store:
    store = eventckpt.open(store_target, snapshots=SnapshotPolicy(min_tail_bytes=200))
    task = store.stream("t")
    for i in range(60):
        with task.transaction(auto=i % 3 != 0) as tx:
            tx.append("m", {"i": i, "pad": "x" * 50})
            tx.set("n", i)
    task.fork(at=30, task_id="f").save({"other": 1})
    return store


def test_retention_holes_are_not_faults(store_target: str) -> None:
    """After prune(auto_only=True), a cut and remove(), the holes retention leaves verify clean."""
    with _retained(store_target) as store:
        task = store.stream("t")
        task.prune(keep_last=10, auto_only=True)
        assert store.verify().ok, store.verify().problems
        task.prune(keep_last=5)
        task.remove(task.list_versions()[-2])
        report = store.verify()
        assert report.ok, report.problems


def test_version_deleted_outside_retention_is_found(store_target: str) -> None:
    """A middle version deleted by hand (row, events and all) breaks the chain at the next version."""
    with _retained(store_target) as store:
        store.stream("t").prune(keep_last=20, auto_only=True)
        victim = store.stream("t").list_versions()[-5]
    tamper(store_target, *(f"DELETE FROM {table} WHERE stream_id = 1 AND version = {victim}"
                           for table in ("events", "snapshots", "checkpoint_ids", "versions")))
    with eventckpt.open(store_target) as store:
        problems = store.verify().problems
    assert any(p.kind == "checksum" and p.version > victim for p in problems), problems


def test_a_fork_whose_fork_point_was_removed_is_found(store_target: str) -> None:
    """A fork whose fork point is gone from its parent (removed past retention's guard) is a fork problem."""
    with eventckpt.open(store_target) as store:
        task = store.stream("t")
        for i in range(1, 11):
            task.save({"step": i})
        task.fork(at=3, task_id="f").save({"step": 100})
        with store.core.session() as journal, journal.write():
            journal.remove_versions(journal.stream("t"), [3])
        problems = store.verify().problems
    assert any(p.kind == "fork" and p.task_id == "f" and "3" in p.detail for p in problems), problems


def test_stored_forms_replay_as_the_codec_stores_them(store_target: str) -> None:
    """An honest store verifies clean when its events change values stored in tagged forms: an incr
    past 64 bits and on a big int, edits inside a dict with number keys, a "$" key added to a dict and
    removed again; a snapshot written after each is compared with the replay (and a forged one is not)."""
    with eventckpt.open(store_target, snapshots=SnapshotPolicy(min_tail_bytes=200)) as store:
        task = store.stream("t")
        task.save({"counter": 2**63 - 1, "big": 2**64, "by_id": {7: "seven", "log": []}, "d": {"a": 1}})
        for i in range(40):
            with task.transaction() as tx:
                tx.incr("counter", 1)
                tx.incr("big", -1)
                tx.append(("by_id", "log"), i)
                tx.set(("by_id", f"k{i % 3}"), i)
                tx.set("pad", "x" * 100)
                if i == 10:
                    tx.set(("d", "$z"), [1])
                if i == 20:
                    tx.delete(("d", "$z"))
                if i == 30:
                    tx.delete(("by_id", "k0"))
        assert task.state()["counter"] == 2**63 + 39 and task.state()["big"] == 2**64 - 40
        assert task.state()["by_id"] == {7: "seven", "log": list(range(40)), "k0": 39, "k1": 37, "k2": 38}
        result = store.verify()
        assert result.ok and result.snapshots >= 10, result.problems
        with store.core.session() as journal:
            owner = journal.stream("t").id
    with RawSQL(store_target) as raw:
        version = raw.one(f"SELECT max(version) FROM snapshots WHERE stream_id = {owner}")
    tamper(store_target, f"UPDATE snapshots SET state = replace(state, '9223372036854775', '9223372036854776') "
                         f"WHERE stream_id = {owner} AND version = {version}")
    assert ("snapshot", "t", version) in kinds(report(store_target))


def test_manifest_key_order_forged(built: Path) -> None:
    """A manifest listing the state's keys in another order (a restore would give that order) is reported."""
    version = snapshot_versions(built)[-1]
    with RawSQL(built) as raw:
        manifest = orjson.loads(raw.execute(f"SELECT manifest FROM snapshots WHERE stream_id = 1 AND version = {version}")[0][0])
    forged = orjson.dumps(dict(reversed(manifest.items()))).decode()
    tamper(built, f"UPDATE snapshots SET manifest = '{forged}' WHERE stream_id = 1 AND version = {version}")
    problems = report(built).problems
    assert [(p.kind, p.version) for p in problems] == [("snapshot", version)] and "orders the keys" in problems[0].detail


def test_a_string_that_is_not_utf8_is_reported_at_its_version(db_path: Path) -> None:
    """A stored string that is not UTF-8 (one flipped bit) is a problem at its version, and verify goes on
    to the versions after it (it stopped with UnicodeDecodeError)."""
    with eventckpt.open(db_path) as store:
        task = store.stream("t")
        task.save({"messages": ["hello"]})
        with task.transaction() as tx:
            tx.append("messages", "un café")
        for step in range(3, 6):
            task.save({**task.state(), "step": step})
    tamper(db_path, "UPDATE events SET value = CAST(X'22636166c32922' AS TEXT) WHERE value LIKE '%caf%'")
    result = report(db_path)
    assert [(p.kind, p.task_id, p.version) for p in result.problems] == [("file", "t", 2)]
    assert "not UTF-8" in result.problems[0].detail and result.versions == 4


def test_a_problem_of_the_whole_file_is_named_once(built: str) -> None:
    """A problem of the whole file prints as `file: ...` (it printed `file: file: ...`); one of a stream
    names it, and one of a version names stream@version."""
    tamper(built, "INSERT INTO metadata_index VALUES ('node', 'forged', 1, 3)")
    (problem,) = report(built).problems
    assert str(problem) == f"file: {problem.detail}"
    assert str(eventckpt.verify.Problem("file", "main", None, "x")) == "file: main: x"
    assert str(eventckpt.verify.Problem("checksum", "main", 3, "x")) == "checksum: main@3: x"
