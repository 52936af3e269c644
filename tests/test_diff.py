"""diff(a, b): added, removed and changed paths between two versions, from the events between them."""

from __future__ import annotations

import copy
import enum
import os
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import rule

import eventckpt
import eventckpt.core
from eventckpt import SnapshotPolicy, Unregistered
from eventckpt.diffing import Change

from .conftest import RawSQL, strict_equal
from .test_restore_property import StoreMachine

MISSING = object()


def expected_changes(old: Any, new: Any, path: tuple = ()) -> list[tuple]:
    """The diff's specification, written independently: dicts with plain string keys by key, lists by
    position, anything else by exact type and value."""
    def plain(d: dict) -> bool:
        return all(type(k) is str and not k.startswith("$") and '"' not in k and "\\" not in k
                   and all(ord(c) >= 32 and c != "\x7f" for c in k) for k in d)

    if old is MISSING and new is MISSING:
        return []
    if old is MISSING:
        return [("added", path, None, new)]
    if new is MISSING:
        return [("removed", path, old, None)]
    if type(old) is dict and type(new) is dict and plain(old) and plain(new):
        out = []
        for key in {**old, **new}:
            out += expected_changes(old.get(key, MISSING), new.get(key, MISSING), path + (key,))
        return out
    if type(old) is list and type(new) is list:
        out = []
        for i in range(max(len(old), len(new))):
            out += expected_changes(old[i] if i < len(old) else MISSING, new[i] if i < len(new) else MISSING, path + (i,))
        return out
    return [] if strict_equal(old, new) else [("changed", path, old, new)]


def check(result: eventckpt.diffing.Diff, old: dict, new: dict) -> None:
    """Every change names its path's old and new values correctly, and applying the changes to `old`
    gives `new`; for states whose dicts all have plain keys, the changes are exactly the specification's.

    (A dict with a key that cannot be a path is one value to save() and to a whole-state comparison, but
    a transaction can still edit its other keys, and then the diff names those paths: also correct.)
    """
    changes = list(result)
    for c in changes:
        assert strict_equal(c.old, None if c.kind == "added" else value_at(old, c.path)), c
        assert strict_equal(c.new, None if c.kind == "removed" else value_at(new, c.path)), c
    assert strict_equal(apply_changes(old, changes), new), (changes, old, new)
    if all_plain(old) and all_plain(new):
        got = sorted(((c.kind, c.path, c.old, c.new) for c in changes), key=repr)
        want = sorted((c for key in {**old, **new} for c in expected_changes(old.get(key, MISSING), new.get(key, MISSING), (key,))),
                      key=repr)  # a state's top-level keys are always compared one by one
        assert len(got) == len(want), (got, want)
        for g, w in zip(got, want):
            assert g[:2] == w[:2] and strict_equal(g[2], w[2]) and strict_equal(g[3], w[3]), (g, w)


def value_at(state: Any, path: tuple) -> Any:
    for key in path:
        if type(state) is dict and key in state or type(state) is list and type(key) is int and key < len(state):
            state = state[key]
        else:
            return MISSING
    return state


def apply_changes(old: dict, changes: list) -> dict:
    state = copy.deepcopy(old)

    def parent(path: tuple) -> Any:
        target = state
        for key in path[:-1]:
            target = target[key]
        return target

    for c in changes:
        if c.kind == "changed":
            parent(c.path)[c.path[-1]] = copy.deepcopy(c.new)
    for c in sorted((c for c in changes if c.kind == "added"), key=lambda c: [(type(k) is int, k) for k in c.path]):
        holder = parent(c.path)
        if type(holder) is list:
            assert c.path[-1] == len(holder), c
            holder.append(copy.deepcopy(c.new))
        else:
            holder[c.path[-1]] = copy.deepcopy(c.new)
    for c in sorted((c for c in changes if c.kind == "removed"), key=lambda c: [(type(k) is int, k) for k in c.path], reverse=True):
        holder = parent(c.path)
        if type(holder) is list:
            assert c.path[-1] == len(holder) - 1, c
        del holder[c.path[-1]]
    return state


def all_plain(value: Any) -> bool:
    if type(value) is dict:
        return all(type(k) is str and '"' not in k and "\\" not in k for k in value) and all(map(all_plain, value.values()))
    if type(value) is list:
        return all(map(all_plain, value))
    return True


class DiffMachine(StoreMachine):
    """The restore property machine's random histories (saves, transactions, forks, rollbacks, reopens),
    checking diffs between random versions of random streams against the model."""

    def every_version_restores(self) -> None:  # restores are test_restore_property's business
        pass

    @rule(data=st.data())
    def diff_two_versions(self, data: st.DataObject) -> None:
        saved = sorted(name for name, states in self.model.items() if states)  # version 0 names no checkpoint
        if not saved:
            return

        def ref(label: str) -> tuple[str, int]:
            name = data.draw(st.sampled_from(saved), label="stream")
            return name, data.draw(st.integers(1, len(self.model[name])), label=label)

        (s1, a), (s2, b) = ref("a"), ref("b")
        states = {name: [{}] + states for name, states in self.model.items()}
        result = self.store.stream(s1).diff((s1, a), (s2, b))
        check(result, states[s1][a], states[s2][b])
        live = copy.deepcopy(states[s2][b])
        check(self.store.stream(s1).diff(a, live=live), states[s1][a], states[s2][b])


    @rule(data=st.data())
    def history_of_a_path(self, data: st.DataObject) -> None:
        """Every version where the value at a path of dict keys changed is in the path's history."""
        name = self._name(data)
        states = [{}] + self.model[name]
        paths = sorted({p for state in states for p in key_paths(state)}, key=repr)
        if not paths:
            return
        path = data.draw(st.sampled_from(paths), label="path")
        changed = {v for v in range(1, len(states)) if not strict_equal(key_value(states[v], path), key_value(states[v - 1], path))}
        entries = self.store.stream(name).history(path)
        assert changed <= {e.version for e in entries}, (path, changed, entries)
        assert [e.version for e in entries] == sorted((e.version for e in entries), reverse=True)


def key_paths(value: Any, path: tuple = ()) -> list[tuple]:
    """Paths of dict keys (no list indices: a position shifts without an event) a caller can address."""
    out = []
    if type(value) is dict:
        for key, item in value.items():
            if type(key) is str and not any(c in key for c in '"\\') and all(ord(c) >= 32 for c in key):
                out.append(path + (key,))
                out.extend(key_paths(item, path + (key,)))
    return out


def key_value(state: Any, path: tuple) -> Any:
    for key in path:
        if type(state) is not dict or key not in state:
            return MISSING
        state = state[key]
    return state


class EagerDiff(DiffMachine):
    """Small snapshot thresholds: diffs cross many snapshots and shared keys."""

    policy = SnapshotPolicy(min_tail_bytes=96, event_overhead=16, share_min_bytes=24)


class NeverDiff(DiffMachine):
    policy = SnapshotPolicy.never()


_settings = settings(max_examples=int(os.environ.get("EVENTCKPT_PROPERTY_EXAMPLES", "60")) // 2, stateful_step_count=25)
TestEagerDiff = _settings(EagerDiff).TestCase
TestNeverDiff = _settings(NeverDiff).TestCase


def conversation(store: eventckpt.Store, steps: int, name: str = "c") -> eventckpt.CheckpointStore:
    task = store.stream(name)
    task.save({"messages": [], "step": 0, "scratch": {f"k{i}": "v" for i in range(5)}})
    for i in range(1, steps + 1):
        with task.transaction() as tx:
            tx.append("messages", {"n": i, "text": "x" * 50})
            tx.set("step", i)
            tx.set(("scratch", f"k{i % 5}"), f"value {i}")
            tx.incr("count")
    return task


def test_one_lineage_names_every_change(store: eventckpt.Store) -> None:
    """Forward: appended items are added at their positions, sets are changed, new keys added."""
    task = conversation(store, 10)
    result = task.diff(4, 9)
    assert result.old == ("c", 4) and result.new == ("c", 9)
    assert [c.path for c in result.added] == [("messages", i) for i in range(3, 8)]
    assert result.added[0].new == {"n": 4, "text": "x" * 50} and result.added[0].old is None
    assert {c.path: (c.old, c.new) for c in result.changed} == {
        ("count",): (3, 8), ("step",): (3, 8), ("scratch", "k0"): ("v", "value 5"), ("scratch", "k1"): ("value 1", "value 6"),
        ("scratch", "k2"): ("value 2", "value 7"), ("scratch", "k3"): ("value 3", "value 8"), ("scratch", "k4"): ("v", "value 4")}
    assert not result.removed
    check(result, task.state(4), task.state(9))


def test_backwards_and_same_version(store: eventckpt.Store) -> None:
    """diff(b, a) reverses diff(a, b); a version compared with itself has no changes."""
    task = conversation(store, 6)
    forward, backward = task.diff(2, 6), task.diff(6, 2)
    assert sorted(c.path for c in backward.removed) == sorted(c.path for c in forward.added)
    assert [(c.path, c.old) for c in backward.removed][:1] == [(("messages", 1), {"n": 2, "text": "x" * 50})]
    check(backward, task.state(6), task.state(2))
    assert not task.diff(3, 3) and len(task.diff(3, 3)) == 0


def test_head_default_and_version_zero(store: eventckpt.Store) -> None:
    """b defaults to the head; version 0 names no checkpoint, in diff as in get() (VersionNotFoundError)."""
    task = conversation(store, 3)
    assert task.diff(2).new == ("c", 4)
    for args in ((0, 1), (1, 0), (1, ("c", 0))):
        with pytest.raises(eventckpt.VersionNotFoundError):
            task.diff(*args)


def test_across_a_fork_and_its_parent(store: eventckpt.Store) -> None:
    """A fork compares with its parent from the fork point: each side's own changes, items by position."""
    task = conversation(store, 8)
    fork = task.fork(at=5, task_id="f")
    with fork.transaction() as tx:
        tx.append("messages", {"n": 100})
        tx.set("step", 100)
        tx.delete(("scratch", "k0"))
    result = task.diff(9, ("f", 6))
    check(result, task.state(9), fork.state(6))
    by_path = {c.path: c for c in result}
    assert (by_path[("messages", 4, "n")].old, by_path[("messages", 4, "n")].new) == (5, 100)  # items compare by key
    assert by_path[("messages", 4, "text")].kind == "removed"
    assert by_path[("messages", 7)].kind == "removed" and ("messages", 8) not in by_path
    assert by_path[("scratch", "k0")].kind == "removed"
    assert fork.diff(("c", 3), 6).old == ("c", 3)  # a parent version on the fork's lineage
    check(fork.diff(("c", 3), 6), task.state(3), fork.state(6))
    other = conversation(store, 2, "other")
    check(other.diff(3, ("f", 6)), other.state(3), fork.state(6))  # unrelated streams


def test_live_state(store: eventckpt.Store) -> None:
    """live= compares a version with an in-memory state, without saving it."""
    task = conversation(store, 3)
    live = task.state()
    live["messages"].append({"n": 4})
    live["draft"] = (1, 2)
    del live["count"]
    result = task.diff(4, live=live)
    assert result.new is None
    assert {(c.kind, c.path) for c in result} == {("added", ("messages", 3)), ("added", ("draft",)), ("removed", ("count",))}
    assert task.version == 4


def test_no_state_is_materialized(store: eventckpt.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """On one lineage the diff reads events and single keys, never a whole state."""
    task = conversation(store, 40)
    expected = (task.state(10), task.state(35))

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a whole state was materialized")

    monkeypatch.setattr(eventckpt.core, "materialize", refuse)
    monkeypatch.setattr(eventckpt.core.Core, "state_at", refuse)
    check(task.diff(10, 35), *expected)


def test_appended_values_are_read_lazily(store: eventckpt.Store, store_target: str) -> None:
    """Items appended between the versions are read when a change's value is first used, and events
    outside the range are never read."""
    task = conversation(store, 30)
    store.close()
    with RawSQL(store_target) as raw:
        raw.execute("UPDATE events SET value = '{broken' WHERE version <= 5 AND path = '$.messages'")
    with eventckpt.open(store_target) as again:
        result = again.stream("c").diff(20, 30)
        assert len(result.added) == 10 and result.added[-1].new["n"] == 29  # version 30 is step 29


def test_appended_values_read_after_retention_are_the_compared_versions(store: eventckpt.Store) -> None:
    """An appended item's value first read after retention rewrote the range is still the item the
    compared version holds (read from its state), or VersionNotFoundError when that version went too;
    never another value or a bare IndexError. A deleted stream's is StreamNotFoundError."""
    task = store.stream("t")
    for i in range(10):
        task.save({"msgs": [f"m{j}" for j in range(i + 1)]})  # version i + 1 holds m0..mi
    forward, backward, late = task.diff(5, 10), task.diff(10, 5), task.diff(8, 10)
    task.remove(5)  # retention folds version 5's events into version 6
    assert [(c.kind, c.path, c.new) for c in forward] == [("added", ("msgs", i), f"m{i}") for i in range(5, 10)]
    assert [(c.kind, c.old) for c in backward] == [("removed", f"m{i}") for i in range(5, 10)]
    task.prune(keep_last=1)
    assert [c.new for c in late] == ["m8", "m9"]  # version 10 is kept
    store.stream("u").save({"l": [0]})
    for i in range(1, 4):
        store.stream("u").save({"l": list(range(i + 1))})
    gone = store.stream("u").diff(1, 4)
    assert store.delete_stream("u")
    with pytest.raises(eventckpt.StreamNotFoundError):
        gone.changes[0].new


def test_a_removed_version_s_appended_values_are_version_not_found(store: eventckpt.Store) -> None:
    """An appended item whose value is first read after retention removed the version holding it raises
    VersionNotFoundError."""
    task = store.stream("t")
    for i in range(6):
        task.save({"msgs": list(range(i + 1))})
    backward = task.diff(6, 2)  # items 2..5 of version 6 are removed going back to version 2
    task.save({"msgs": []})
    task.prune(keep_last=1)  # version 6 goes
    with pytest.raises(eventckpt.VersionNotFoundError):
        backward.changes[0].old


def test_growth_after_snapshots_and_resets(named: dict[str, str]) -> None:
    """A list's length at the older version is counted correctly after extends, deletes of items,
    truncations and replacements, with and without snapshots."""
    for policy in (SnapshotPolicy.every_version(share_min_bytes=0), SnapshotPolicy.never(), SnapshotPolicy()):
        with eventckpt.open(named[f"{id(policy)}.db"], snapshots=policy) as store:
            task = store.stream("t")
            task.save({"xs": [1, 2], "box": {"ys": [0]}})
            steps = [
                lambda tx: tx.extend("xs", [3, 4, 5]), lambda tx: tx.delete(("xs", 0)), lambda tx: tx.append("xs", 6),
                lambda tx: tx.truncate("xs", 2), lambda tx: tx.append("xs", 7), lambda tx: tx.set("xs", [9]),
                lambda tx: tx.extend("xs", []), lambda tx: tx.append(("box", "ys"), 1), lambda tx: tx.set("box", {"ys": [5, 6]}),
                lambda tx: tx.append(("box", "ys"), 7), lambda tx: tx.delete("xs"), lambda tx: tx.append("xs", 1),
            ]
            for step in steps:
                with task.transaction() as tx:
                    step(tx)
                task.save({**task.state(), "tick": task.version})  # a growth in between is not the only change
            for a in range(1, task.version + 1):
                for b in (a + 1, task.version):
                    if b <= task.version:
                        check(task.diff(a, b), task.state(a), task.state(b))


@pytest.mark.parametrize("args", [("x",), (1.5,), (("nope", 1),), (99,), (-1,), (1, "2")])
def test_bad_versions(store: eventckpt.Store, args: tuple) -> None:
    """Unknown streams, versions and malformed references raise typed errors."""
    conversation(store, 2)
    with pytest.raises(eventckpt.EventCkptError):
        store.stream("c").diff(*args)


@pytest.mark.parametrize("version", ["2", 2.0, True])
def test_a_pair_s_version_that_is_no_int_is_an_invalid_argument(store: eventckpt.Store, version: Any) -> None:
    """diff(("c", "2")), 2.0 or True is InvalidArgumentError, as diff(2.0) is, not VersionNotFoundError."""
    conversation(store, 2)
    with pytest.raises(eventckpt.InvalidArgumentError):
        store.stream("c").diff(("c", version))
    with pytest.raises(eventckpt.InvalidArgumentError):
        store.stream("c").diff(1, 2, live={})


def test_change_objects() -> None:
    """Changes compare by kind, path and values with exact types, and show their path in repr."""
    assert Change("changed", ("a",), 1, 2) == Change("changed", ("a",), 1, 2)
    assert Change("changed", ("a",), 1, 2) != Change("changed", ("a",), 1.0, 2)
    assert "$.a[0]" in repr(Change("added", ("a", 0), new=1))


def test_a_change_inside_a_dict_with_dollar_keys_is_a_change_of_that_dict(store: eventckpt.Store) -> None:
    """A dict holding a "$" key is one value, as it is to save(): a transaction's set below it is
    reported as a change of the whole dict (hypothesis found the diff reporting the key as added)."""
    task = store.stream("s0")
    task.save({"a": {"$": None}, "b": 1})
    with task.transaction() as tx:
        tx.set(("a", "new"), None)
    assert [(c.kind, c.path, c.old, c.new) for c in task.diff(1, 2)] == [
        ("changed", ("a",), {"$": None}, {"$": None, "new": None})]



class Role(str, enum.Enum):
    USER = "user"


def test_a_str_enum_replaced_by_its_text_is_a_change(store: eventckpt.Store) -> None:
    """diff names a str enum replaced by its text (equal by ==) inside a message, a list and as a dict key."""
    task = store.stream("t")
    task.save({"messages": [{"role": Role.USER, "content": "hi"}], "tags": [Role.USER], "by": {"user": 1}})
    with task.transaction() as tx:  # written as given, whatever save() would have compared
        tx.set(("messages", 0, "role"), "user")
        tx.set(("tags", 0), "user")
        tx.set("by", {Role.USER: 1})
    assert strict_equal(task.state(2), {"messages": [{"role": "user", "content": "hi"}], "tags": ["user"], "by": {Role.USER: 1}})
    expected = {("changed", ("messages", 0, "role")), ("changed", ("tags", 0)), ("changed", ("by",))}
    assert {(c.kind, c.path) for c in task.diff(1, 2)} == expected
    assert {(c.kind, c.path) for c in task.diff(1, live=task.state(2))} == expected


def test_a_change_of_class_alone_is_a_change_where_the_classes_are_unknown(store_target: str) -> None:
    """With unknown_types="keep", a process without the classes (as the CLI) sees 1 -> an enum of value 1, a
    dict -> an object with its fields, and one class -> another with equal fields as changes, and an
    unchanged object as no change; with the default, such values stay plain data and compare equal."""
    with eventckpt.open(store_target) as store:
        task = store.stream("t")
        task.save({"c": 1, "p": {"x": 1}, "q": 0, "k": 0})
        task.save({"c": 0, "p": 0, "q": 1, "k": 1})
    color, pt, qt = ('{"$enum": ["tests.gone.Color", 1]}', '{"$object": ["tests.gone.Pt", {"x": 1}]}',
                     '{"$object": ["tests.gone.Qt", {"x": 1}]}')
    with RawSQL(store_target) as raw:  # what a program with these classes stored
        for version, key, value in ((1, "q", pt), (1, "k", pt), (2, "c", color), (2, "p", pt), (2, "q", qt), (2, "k", pt)):
            raw.execute("UPDATE events SET value = ? WHERE version = ? AND path = ?", (value, version, f"$.{key}"))
    with eventckpt.open(store_target, unknown_types="keep") as store:
        changes = [(c.kind, c.path, c.old, c.new) for c in store.stream("t").diff(1, 2)]
    assert changes == [("changed", ("c",), 1, Unregistered("enum", "tests.gone.Color", 1)),
                       ("changed", ("p",), {"x": 1}, Unregistered("object", "tests.gone.Pt", {"x": 1})),
                       ("changed", ("q",), Unregistered("object", "tests.gone.Pt", {"x": 1}),
                        Unregistered("object", "tests.gone.Qt", {"x": 1}))]
    with eventckpt.open(store_target) as store:
        assert list(store.stream("t").diff(1, 2)) == []
