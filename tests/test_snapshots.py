"""The snapshot policy: snapshots linear in history, restores bounded, growing lists never copied."""

from __future__ import annotations

from pathlib import Path

import apsw
import orjson
import pytest

import eventckpt

from .conftest import RawSQL
from eventckpt import SnapshotPolicy


def table_stats(path: Path) -> dict[str, int]:
    with RawSQL(path) as raw:
        snaps, snap_bytes = raw.execute("SELECT count(*), coalesce(sum(length(state) + length(manifest)), 0) FROM snapshots")[0]
        events, event_bytes = raw.execute("SELECT count(*), coalesce(sum(length(coalesce(value, ''))), 0) FROM events")[0]
    return {"snapshots": snaps, "snapshot_bytes": snap_bytes, "events": events, "event_bytes": event_bytes}


def conversation(store: eventckpt.Store, steps: int) -> eventckpt.CheckpointStore:
    task = store.stream("conv")
    task.save({"messages": [], "step": 0, "scratch": {f"k{i}": "v" for i in range(20)}})
    for i in range(1, steps + 1):
        with task.transaction() as tx:
            tx.append("messages", {"role": "user", "content": f"message {i} " + "x" * 380})
            tx.set("step", i)
            tx.set(("scratch", f"k{i % 20}"), f"value {i}")
            tx.add_usage(input_tokens=120, output_tokens=40)
    return task


def test_every_version_and_never(named: dict[str, str]) -> None:
    """every_version() writes one snapshot per version; never() writes none; both restore the same."""
    states = {}
    for name, policy in (("every", SnapshotPolicy.every_version()), ("never", SnapshotPolicy.never())):
        path = named[f"{name}.db"]
        with eventckpt.open(path, snapshots=policy) as store:
            task = conversation(store, 30)
            states[name] = [task.state(v) for v in range(1, 32)]
        stats = table_stats(path)
        assert stats["snapshots"] == (31 if name == "every" else 0)
    assert states["every"] == states["never"]


def test_growing_list_is_never_copied_into_snapshots(named: dict[str, str]) -> None:
    """A conversation's message list is shared by reference: snapshots stay small however long it grows."""
    path = named["c.db"]
    with eventckpt.open(path, snapshots=SnapshotPolicy(min_tail_bytes=4096)) as store:
        task = conversation(store, 600)
        assert task.state(601)["step"] == 600 and len(task.state(601)["messages"]) == 600
    stats = table_stats(path)
    assert stats["snapshots"] >= 10
    assert stats["snapshot_bytes"] < 0.1 * stats["event_bytes"]
    with RawSQL(path) as raw:
        rows = raw.execute("SELECT version, state, manifest FROM snapshots ORDER BY version")
    written = [v for v, state, _ in rows if "messages" in orjson.loads(state)]
    assert len(written) <= 1  # written once while still small, then only referenced
    version, state, manifest = rows[-1]
    assert orjson.loads(manifest)["messages"][0] != version


def test_snapshot_bytes_linear_for_a_growing_dict(named: dict[str, str]) -> None:
    """Even a state written in full (a dict that grows every step) keeps snapshot bytes within a constant
    factor of event bytes: each snapshot is paid for by at least tail_ratio times its size in events."""
    path = named["d.db"]
    policy = SnapshotPolicy(min_tail_bytes=512, tail_ratio=1.0, event_overhead=64)
    with eventckpt.open(path, snapshots=policy) as store:
        task = store.stream("t")
        for i in range(400):
            with task.transaction() as tx:
                tx.set(("memory", f"fact-{i}") if i else "memory", f"fact number {i}" if i else {})
    stats = table_stats(path)
    cost = stats["event_bytes"] + policy.event_overhead * stats["events"]
    assert stats["snapshots"] >= 3
    assert stats["snapshot_bytes"] <= (1 + 1 / policy.tail_ratio) * cost


def test_restore_tail_is_bounded(named: dict[str, str]) -> None:
    """Between any version and its nearest snapshot lie at most max(min_tail, ratio*snapshot) of event cost
    (plus one version), so a restore never replays the whole history."""
    path = named["b.db"]
    policy = SnapshotPolicy(min_tail_bytes=2048, event_overhead=64)
    with eventckpt.open(path, snapshots=policy) as store:
        conversation(store, 300)
    conn = RawSQL(path)
    snaps = [r[0] for r in conn.execute("SELECT version FROM snapshots ORDER BY version")]
    literal = dict(conn.execute("SELECT version, length(state) FROM snapshots"))
    for version in range(1, 302):
        base = max([s for s in snaps if s <= version], default=0)
        tail = conn.execute(
            "SELECT coalesce(sum(length(coalesce(value, '')) + 64), 0) FROM events WHERE version > ? AND version <= ?"
            " AND path != '$.messages'",
            (base, version),
        )[0][0]
        limit = max(policy.min_tail_bytes, policy.tail_ratio * literal.get(base, 0))
        assert tail <= limit + 1024, (version, base, tail)


def test_truncated_shared_list_is_rewritten_then_shared_again(named: dict[str, str]) -> None:
    """A rollback that cuts a shared list makes the next snapshot write it once; later appends are shared
    again from that snapshot."""
    path = named["r.db"]
    with eventckpt.open(path, snapshots=SnapshotPolicy(min_tail_bytes=1024)) as store:
        task = conversation(store, 100)
        task.rollback(51)  # version 51 holds 50 messages
        for i in range(200):
            with task.transaction() as tx:
                tx.append("messages", {"role": "user", "content": "after rollback " + "y" * 380})
                tx.set("step", 1000 + i)
        expected = task.state()
        assert len(expected["messages"]) == 50 + 200
    with RawSQL(path) as raw:
        bases = [orjson.loads(m)["messages"][0] for (m,) in raw.execute("SELECT manifest FROM snapshots ORDER BY version")]
    assert len(set(bases)) == 2  # the small list written once, then once more after the cut
    with eventckpt.open(path) as store:
        assert store.stream("conv").state() == expected


@pytest.mark.parametrize("bad", [{"tail_ratio": -1}, {"min_tail_bytes": "big"}, {"share_min_bytes": -5}])
def test_policy_validation(bad: dict) -> None:
    """A policy with a negative or non-numeric setting is refused."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        SnapshotPolicy(**bad)


def test_snapshot_written_in_the_versions_transaction(named: dict[str, str]) -> None:
    """Every snapshot belongs to an existing version (same transaction, foreign key)."""
    path = named["s.db"]
    with eventckpt.open(path, snapshots=SnapshotPolicy.every_version()) as store:
        conversation(store, 10)
    with RawSQL(path) as raw:
        orphans = raw.one("SELECT count(*) FROM snapshots s LEFT JOIN versions v USING (stream_id, version)"
                          " WHERE v.version IS NULL")
    assert orphans == 0


def test_a_restore_reads_a_shared_keys_later_events_with_the_tail(tmp_path: Path) -> None:
    """Restoring a version reads the snapshot, the shared list's appends before it, and one tail that also
    holds the list's own later events: two queries of the events, not one more per shared key."""
    path = tmp_path / "c.db"
    with eventckpt.open(path, snapshots=SnapshotPolicy(min_tail_bytes=4096)) as store:
        conversation(store, 300)
    with eventckpt.open(path, snapshots=SnapshotPolicy(min_tail_bytes=4096)) as store:
        task = store.stream("conv")
        with RawSQL(path) as raw:
            snapped = raw.execute("SELECT max(version) FROM snapshots WHERE version < 250")[0][0]
        assert snapped is not None
        statements: list[str] = []
        conn = store.core.backend.journal.conn
        conn.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
        state = task.state(snapped + 3)
        conn.exec_trace = None
    assert len(state["messages"]) == snapped + 2 and state["step"] == snapped + 2
    assert sum(" events " in f" {q} " for q in statements) == 2


@pytest.mark.parametrize("policy", [SnapshotPolicy(min_tail_bytes=64, tail_ratio=0.5, share_min_bytes=16),
                                    SnapshotPolicy.every_version(share_min_bytes=0), SnapshotPolicy.never()])
def test_keys_restore_in_the_states_order_through_any_snapshot(store_target: str, policy: SnapshotPolicy) -> None:
    """A restore gives the keys in the state's order whatever snapshot it starts from: a shared list among
    them keeps its place, and a key deleted and set again after the snapshot is last."""
    orders = [["msgs", "a", "b"]] * 5 + [["msgs", "b", "a"]] * 2 + [["msgs", "b", "a", "c"], ["b", "a", "c", "msgs"]]
    with eventckpt.open(store_target, snapshots=policy) as store:
        task = store.stream("t")
        task.save({"msgs": ["m" * 40], "a": "x" * 40, "b": 1})
        for i in range(4):
            with task.transaction() as tx:
                tx.append("msgs", "n" * 40)
                tx.set("b", i)
        with task.transaction() as tx:
            tx.delete("a")
            tx.set("a", "again")
        with task.transaction() as tx:
            tx.set("b", 99)
        with task.transaction() as tx:
            tx.set("c", 1)
        with task.transaction() as tx:  # the shared list deleted and set again after the others
            tx.delete("msgs")
            tx.set("msgs", ["z"])
        assert [list(task.state(v)) for v in range(1, 10)] == orders
        assert [task.keys(v) for v in range(1, 10)] == orders
    with eventckpt.open(store_target, snapshots=policy) as store:  # nothing cached
        assert [list(store.stream("t").state(v)) for v in range(1, 10)] == orders
