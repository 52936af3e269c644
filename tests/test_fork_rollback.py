"""Forks share history instead of copying it; rollback appends instead of destroying."""

from __future__ import annotations

import sys
from pathlib import Path

import apsw
import pytest

import eventckpt

from .conftest import RawSQL
from .together import popen, start_together
from eventckpt import ForkOrigin


def make_history(store: eventckpt.Store, n: int = 5) -> eventckpt.CheckpointStore:
    task = store.stream("main")
    for i in range(1, n + 1):
        task.save({"step": i, "log": [f"step {j}" for j in range(1, i + 1)]})
    return task


def test_fork_shares_history_and_numbers_after_it(store: eventckpt.Store, store_target: str) -> None:
    """A fork at v sees versions 1..v of its parent and numbers its own versions from v+1; nothing is copied."""
    main = make_history(store)
    raw = RawSQL(store_target)
    events_before = raw.one("SELECT count(*) FROM events")
    branch = main.fork(at=3, task_id="branch")
    assert raw.one("SELECT count(*) FROM events") == events_before
    raw.close()
    assert branch.version == 3 and branch.list_versions() == [1, 2, 3] and len(branch) == 3
    assert branch.state() == main.state(3)
    cp = branch.save({"step": 99})
    assert cp.version == 4 and cp.parent == ForkOrigin("main", 3)
    assert main.state(4)["step"] == 4 and branch.state(4) == {"step": 99}
    assert branch.get(2).values == main.get(2).values
    assert branch.parent == ForkOrigin("main", 3) and main.parent is None


def test_fork_defaults(store: eventckpt.Store) -> None:
    """fork() without arguments forks at the head under a generated name."""
    main = make_history(store, 2)
    first, second = main.fork(), main.fork()
    assert first.task_id == "main~1" and second.task_id == "main~2"
    assert first.version == 2 and first.state() == main.state()


def test_fork_of_fork_below_the_middle_forks_versions(store: eventckpt.Store) -> None:
    """A fork of a fork taken below the middle fork's own versions sees only its true lineage."""
    main = make_history(store, 5)
    f1 = main.fork(at=3, task_id="f1")
    f1.save({"f1": "own v4"})
    f2 = f1.fork(at=4, task_id="f2")
    f3 = f2.fork(at=3, task_id="f3")
    assert f3.state() == main.state(3)
    f3.save({"f3": True})
    assert f3.state(4) == {"f3": True} and f3.list_versions() == [1, 2, 3, 4]
    assert f2.state(4) == {"f1": "own v4"}


def test_fork_errors(store: eventckpt.Store) -> None:
    """Forking a missing stream, at a version that does not exist, or into a taken name fails cleanly."""
    with pytest.raises(eventckpt.StreamNotFoundError):
        store.stream("nobody").fork()
    main = make_history(store, 2)
    for bad in (3, -1):
        with pytest.raises(eventckpt.VersionNotFoundError):
            main.fork(at=bad)
    main.fork(task_id="taken")
    with pytest.raises(eventckpt.StreamExistsError):
        main.fork(task_id="taken")


def test_fork_at_zero_is_a_new_lineage_in_the_same_tree(store: eventckpt.Store) -> None:
    """fork(at=0) shares no versions but keeps checkpoint ids unique across the tree."""
    main = store.stream("main")
    main.save({"a": 1}, checkpoint_id="c1")
    fresh = main.fork(at=0, task_id="fresh")
    assert fresh.version == 0 and fresh.latest is None and fresh.parent == eventckpt.ForkOrigin("main", 0)
    with pytest.raises(eventckpt.VersionNotFoundError):
        fresh.state()  # no checkpoint yet
    fresh.save({"b": 2}, checkpoint_id="c2")
    assert fresh.state(1) == {"b": 2} and main.state() == {"a": 1}
    with pytest.raises(eventckpt.DuplicateCheckpointIdError):
        fresh.save({"b": 3}, checkpoint_id="c1")
    assert main.find("c2").values == {"b": 2}


def test_rollback_appends_a_version_equal_to_the_target(store: eventckpt.Store) -> None:
    """rollback(to) adds a new head equal to version `to`; every earlier version still restores."""
    main = make_history(store, 5)
    main.save({"step": 6, "log": ["corrupted"]}, {"input_tokens": 999})
    cp = main.rollback(3)
    assert cp.version == 7 and main.state() == main.state(3)
    assert cp.metadata["rollback_to"] == 3
    assert cp.token_usage == {"input_tokens": 999}  # spent tokens are not refunded
    assert main.state(6) == {"step": 6, "log": ["corrupted"]}
    assert main.list_versions() == list(range(1, 8))


def test_delete_stream_with_forks(store: eventckpt.Store) -> None:
    """A stream whose history forks share is kept unless forks=True, which deletes the whole subtree."""
    main = make_history(store, 3)
    branch = main.fork(at=2, task_id="branch")
    branch.fork(task_id="twig")
    with pytest.raises(eventckpt.StreamInUseError) as info:
        store.delete_stream("main")
    assert set(info.value.forks) == {"branch", "twig"}
    assert store.delete_stream("twig") is True
    assert store.delete_stream("main", forks=True) is True
    assert store.streams() == []


def test_forks_across_reopen(store_target: str) -> None:
    """Fork lineage is stored in the file: it survives closing and reopening."""
    with eventckpt.open(store_target) as store:
        make_history(store, 4).fork(at=2, task_id="b").save({"b": 1})
    with eventckpt.open(store_target) as store:
        b = store.stream("b")
        assert b.state(2) == store.stream("main").state(2) and b.state(3) == {"b": 1}


# A process that forks stream `main` N times without naming the forks, once told to go (so that several
# start together, tests/together.py), and prints the names it got.
FORKER = """
import sys, eventckpt
target, forks = sys.argv[1], int(sys.argv[2])
with eventckpt.open(target, timeout=60) as store:
    main = store.stream("main")
    print("ready", flush=True)
    sys.stdin.readline()
    print(" ".join(main.fork().task_id for _ in range(forks)))
"""


def test_automatic_fork_names_never_collide_across_processes(store_target: str) -> None:
    """4 processes forking one stream 40 times each at once, without names: every fork is made (no
    StreamExistsError), each under its own name, and the names are main~1 .. main~160."""
    with eventckpt.open(store_target) as store:
        make_history(store, 2)
    procs = [popen([sys.executable, "-c", FORKER, store_target, "40"]) for _ in range(4)]
    outs = start_together(procs)
    assert [err for p, (_, err) in zip(procs, outs) if p.returncode] == []
    names = [name for out, _ in outs for name in out.split()]
    assert sorted(names) == sorted(f"main~{n}" for n in range(1, 161))
    with eventckpt.open(store_target) as store:
        assert sorted(store.streams()) == sorted(["main", *names])
        assert all(store.stream(name).state() == store.stream("main").state() for name in names[::16])


# Two kinds of process on one stream tree, for some seconds: one forks `root`, saves on the fork and deletes
# it (forks=True), the other commits on `root` and prunes it; each prints its rounds and the errors it met.
DELETER_AND_PRUNER = """
import sys, time, eventckpt
target, role, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
errors, n = [], 0
with eventckpt.open(target, timeout=60) as store:
    root = store.stream("root")
    print("ready", flush=True)
    sys.stdin.readline()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if role == "delete":
                fork = root.fork(task_id=f"f{n}")
                fork.save({"x": n})
                assert store.delete_stream(fork.task_id, forks=True)
            else:
                with root.transaction(auto=True) as tx:
                    tx.incr("n")
                root.prune(keep_last=3, auto_only=True)
        except eventckpt.EventCkptError as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        n += 1
print(n, len(errors), errors[:3])
"""


def test_deleting_forks_while_another_process_prunes_the_tree(store_target: str) -> None:
    """For 4 s one process deletes forks of a tree (forks=True) while another prunes the tree's root: no
    error in either (PostgreSQL: the delete takes the tree's lock first, as the prune does, so they queue
    instead of deadlocking), and the root's state and the forks' absence are exact."""
    with eventckpt.open(store_target) as store:
        store.stream("root").save({"n": 0})
    procs = [popen([sys.executable, "-c", DELETER_AND_PRUNER, store_target, role, "4"]) for role in ("delete", "prune")]
    outs = start_together(procs)
    assert [(p.returncode, err) for p, (_, err) in zip(procs, outs)] == [(0, "")] * 2
    (deletes, delete_errors, _), (prunes, prune_errors, _) = [out.split(" ", 2) for out, _ in outs]
    assert (delete_errors, prune_errors) == ("0", "0"), outs
    assert int(deletes) > 5 and int(prunes) > 5  # they really overlapped
    with eventckpt.open(store_target) as store:
        assert store.streams() == ["root"] and store.stream("root").state() == {"n": int(prunes)}
        assert store.verify().ok
