"""Restoring a version with a later version's lists: a list that only grew since is taken as a prefix of
the later list, and the state restored is exactly what a plain restore gives, on every engine."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventckpt
from eventckpt import SnapshotPolicy
from eventckpt.materialize import LaterList

from .conftest import strict_equal
from .engines import TARGETS

POLICIES = {
    "shared": SnapshotPolicy(min_tail_bytes=32, event_overhead=16, share_min_bytes=16),
    "literal": SnapshotPolicy(min_tail_bytes=32, event_overhead=16, share_min_bytes=None),
    "never": SnapshotPolicy.never(),
}
ITEMS = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.dictionaries(st.sampled_from("ab"), st.integers(0, 3), max_size=2))
OPS = st.one_of(  # appends most often: lists that only grow are what the prefixes are for
    st.tuples(st.just("append"), ITEMS),
    st.tuples(st.just("append"), ITEMS),
    st.tuples(st.just("append"), ITEMS),
    st.tuples(st.just("extend"), st.lists(ITEMS, max_size=3)),
    st.tuples(st.just("extend"), st.lists(ITEMS, max_size=3)),
    st.tuples(st.just("set"), st.lists(ITEMS, max_size=3)),
    st.tuples(st.just("scalar"), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.none()),
    st.tuples(st.just("truncate"), st.integers(0, 9)),
    st.tuples(st.just("item"), st.tuples(st.integers(0, 9), ITEMS)),
    st.tuples(st.just("drop_item"), st.integers(0, 9)),
)


def commit(stream: Any, model: dict[str, Any], steps: list[tuple[str, Any]]) -> None:
    """One version of the ops that fit the model's state (at least one other key's set, so that every
    version has an event); the model follows."""
    with stream.transaction() as tx:
        for op, arg in steps:
            m = model.get("m")
            if op == "append" and (m is None or type(m) is list):
                tx.append("m", arg)
                model["m"] = [*(m or []), arg]
            elif op == "extend" and type(m) is list:
                tx.extend("m", arg)
                m.extend(arg)
            elif op == "set":
                tx.set("m", arg)
                model["m"] = copy.deepcopy(arg)
            elif op == "scalar":
                tx.set("m", arg)
                model["m"] = arg
            elif op == "delete" and m is not None:
                tx.delete("m")
                del model["m"]
            elif op == "truncate" and type(m) is list:
                tx.truncate("m", arg % (len(m) + 1))
                del m[arg % (len(m) + 1):]
            elif op == "item" and type(m) is list and m:
                tx.set(("m", arg[0] % len(m)), arg[1])
                m[arg[0] % len(m)] = copy.deepcopy(arg[1])
            elif op == "drop_item" and type(m) is list and m:
                tx.delete(("m", arg % len(m)))
                del m[arg % len(m)]
        tx.set("o", len(steps))
        model["o"] = len(steps)


def restore(reader: eventckpt.Store, name: str, version: int, lists: dict[str, LaterList] | None = None) -> dict[str, Any]:
    """The state at `version` as `reader` restores it: a store opened after the writing, so that no head
    is cached (a store that wrote the stream builds the versions near its head from that head)."""
    core = reader.core
    with core.session() as journal:
        return core.state_and_later(journal, journal.stream(name), version, version, lists)[0]


def later_lists(state: dict[str, Any], version: int, taken: list[int]) -> dict[str, LaterList]:
    """The later version's list `m` as a caller would hold it; `taken` records each prefix taken."""
    m = state["m"]

    def take(n: int) -> list[Any]:
        taken.append(n)
        return copy.deepcopy(m[:n])

    return {"m": LaterList(version, len(m), take)}


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(versions=st.lists(st.lists(OPS, min_size=1, max_size=3), min_size=1, max_size=20),
       fork_at=st.none() | st.integers(1, 20), data=st.data())
def test_prefix_restore_equals_plain_restore(engine: str, policy: str, versions: list[list[tuple[str, Any]]],
                                            fork_at: int | None, data: st.DataObject) -> None:
    """Every version restored with any later version's list `m` equals the plain restore and the model,
    key order included, on a stream and on a fork of it (whose earlier versions lie in its parent)."""
    target = TARGETS.take(engine)
    try:
        with eventckpt.open(target, snapshots=POLICIES[policy]) as store:
            models: list[dict[str, Any]] = [{}]
            stream, name = store.stream("s"), "s"
            for i, steps in enumerate(versions, 1):
                if fork_at == i - 1:  # continue on a fork of what was written so far
                    stream, name = stream.fork(at=i - 1, task_id="f"), "f"
                model = copy.deepcopy(models[-1])
                commit(stream, model, steps)
                models.append(model)
            head = len(versions)
        with eventckpt.open(target) as reader:
            for later in sorted({head, data.draw(st.integers(1, head), label="later")}):
                if type(models[later].get("m")) is not list:
                    continue
                for version in range(1, later + 1):
                    taken: list[int] = []
                    got = restore(reader, name, version, later_lists(models[later], later, taken))
                    plain = restore(reader, name, version)
                    assert strict_equal(got, plain) and list(got) == list(plain), (version, later, taken)
                    assert strict_equal(got, models[version]) and list(got) == list(models[version])
    finally:
        TARGETS.give_back(target)


def test_a_conversation_restores_from_the_later_list(store_target: str) -> None:
    """A list that only grew is taken from the later version at every older version (the snapshots share
    it); after one of its items is replaced, the versions before that are restored as usual."""
    with eventckpt.open(store_target, snapshots=POLICIES["shared"]) as store:
        stream = store.stream("chat")
        for i in range(30):
            with stream.transaction() as tx:
                tx.append("m", {"role": "user", "text": f"message {i}"})
                tx.set("step", i)
        grown = stream.state()
        with stream.transaction() as tx:
            tx.set(("m", 20), {"role": "user", "text": "edited"})
        edited = stream.state()
    uses = 0
    with eventckpt.open(store_target) as reader:
        for version in range(1, 32):
            for later, state in ((30, grown), (31, edited)):
                if version > later:
                    continue
                taken: list[int] = []
                got = restore(reader, "chat", version, later_lists(state, later, taken))
                assert got == restore(reader, "chat", version)
                if later == 31 and version < 31:  # item 20 was replaced after it: not a prefix
                    assert taken == []
                else:
                    assert taken in ([min(version, 30)], [])
                uses += len(taken)
    assert uses >= 25  # taken at nearly every version (not before the first snapshot)


def test_a_list_deleted_and_made_again_after_the_snapshot_is_restored_as_usual(store_target: str) -> None:
    """A list deleted and created again since the snapshot moved to the end of the keys: it is replayed
    (a prefix taken from the later version would keep its old place)."""
    policy = SnapshotPolicy(min_tail_bytes=200, event_overhead=16, share_min_bytes=16)  # none right after one
    with eventckpt.open(store_target, snapshots=policy) as store:
        stream = store.stream("chat")
        while not store.sql("SELECT version FROM snapshots")[1]:
            with stream.transaction() as tx:
                tx.append("m", "hello there")
                tx.set("o", 1)
        with stream.transaction() as tx:
            tx.delete("m")
            tx.append("m", "again")
        head, state = stream.version, stream.state()
        assert max(v for (v,) in store.sql("SELECT version FROM snapshots")[1]) < head
    taken: list[int] = []
    with eventckpt.open(store_target) as reader:
        got = restore(reader, "chat", head, later_lists(state, head, taken))
    assert list(got) == ["o", "m"] and got == {"o": 1, "m": ["again"]}
    assert taken == []


def test_a_later_version_the_read_cannot_see_is_not_used(store_target: str) -> None:
    """A later list of a version committed after the read began (another connection's commit; on
    PostgreSQL, another thread of the same process) is not taken: its appends are not in the read, and
    the list at the version restored would get them."""
    with eventckpt.open(store_target, snapshots=POLICIES["shared"]) as writer, eventckpt.open(store_target) as reader:
        stream = writer.stream("chat")
        for i in range(12):
            with stream.transaction() as tx:
                tx.append("m", f"message {i}")
                tx.set("o", i)
        core = reader.core
        with core.session() as journal, journal.read():
            row = journal.stream("chat")  # the read sees 12 versions from here on
            plain = core.state_and_later(journal, row, 8, 8)[0]
            for i in range(12, 15):
                with stream.transaction() as tx:
                    tx.append("m", f"message {i}")
            taken: list[int] = []
            got = core.state_and_later(journal, row, 8, 8, later_lists(stream.state(), 15, taken))[0]
        assert got == plain and len(got["m"]) == 8 and taken == []
        taken = []
        with core.session() as journal:  # a new read sees version 15: the list is taken from it
            assert core.state_and_later(journal, journal.stream("chat"), 8, 8,
                                        later_lists(stream.state(), 15, taken))[0] == plain
        assert taken == [8]
