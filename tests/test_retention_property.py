"""Retention keeps invariant 1: after random prunes and removals, heads included (with forks, snapshots of every kind,
reopens and a second connection whose cached heads predate the rewrite), every kept version restores
exactly, removed ones raise VersionNotFoundError, folding the remaining events gives every kept state,
and the checksum chain links each kept version to the previous kept one. States compare with the key
order of every dict too: a kept version restores its keys in the order it had them."""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

import eventckpt
from eventckpt import SnapshotPolicy, ops
from eventckpt.integrity import ROOT, version_checksum
from eventckpt.journal import segments_for
from eventckpt.paths import from_text

from .conftest import strict_equal
from .test_restore_property import StoreMachine, key_order, top_level_order


class RetentionMachine(StoreMachine):
    """The core's model machine, with holes: model[name][v - 1] is None once version v is removed."""

    def __init__(self) -> None:
        super().__init__()
        self.parents: dict[str, tuple[str, int] | None] = {"s0": None}
        self.autos: set[tuple[str, int]] = set()  # (owner stream, version) saved with auto=True
        self.other = eventckpt.open(self.path, snapshots=self.policy)  # a second connection with its own caches

    def teardown(self) -> None:
        self.other.close()
        super().teardown()

    def _own_start(self, name: str) -> int:
        parent = self.parents[name]
        return parent[1] + 1 if parent else 1

    def _existing(self, name: str) -> list[int]:
        return [v for v, s in enumerate(self.model[name], 1) if s is not None]

    def _head_version(self, name: str) -> int:
        return max(self._existing(name), default=0)

    def _head(self, name: str) -> dict[str, Any]:
        """The state at the newest version that still exists (a removed head moves the head back)."""
        kept = [s for s in self.model[name] if s is not None]
        return copy.deepcopy(kept[-1]) if kept else {}

    def _descendants(self, name: str) -> list[tuple[str, int]]:
        """(fork, newest version of `name` it shares)."""
        out = []
        for child, parent in self.parents.items():
            if parent and parent[0] == name:
                at = parent[1]
                out.append((child, at))
                out.extend((grand, min(at, limit)) for grand, limit in self._descendants(child))
        return out

    def _owner(self, name: str, version: int) -> str:
        parent = self.parents[name]
        while parent and version <= parent[1]:
            name, parent = parent[0], self.parents[parent[0]]
        return name

    @rule(data=st.data())
    def chat(self, data: st.DataObject) -> None:
        """An agent step: a message appended to a growing list, maybe as an automatic checkpoint."""
        name = self._name(data)
        state = self._head(name)
        message = "message " + "x" * data.draw(st.integers(0, 40), label="size")
        auto = data.draw(st.booleans(), label="auto")
        conn = self.other if data.draw(st.booleans(), label="other") else self.store
        stream = conn.stream(name)
        with stream.transaction(auto=auto) as tx:
            if type(state.get("log", [])) is not list:  # other rules may have set it to anything
                tx.set("log", [])
                state["log"] = []
            if type(state.get("turn", 0)) is not int:
                tx.set("turn", 0)
                state["turn"] = 0
            tx.append("log", message)
            tx.incr("turn")
        state.setdefault("log", []).append(message)
        state["turn"] = state.get("turn", 0) + 1
        self.model[name].append(state)
        if auto:
            self.autos.add((name, len(self.model[name])))

    @precondition(lambda self: any(map(self._existing, self.model)))
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n in self.model if self._existing(n))), label="parent")
        where = data.draw(st.sampled_from(self._existing(name)), label="at")
        self.forks += 1
        child = f"f{self.forks}"
        self.store.stream(name).fork(at=where, task_id=child)
        self.model[child] = [copy.deepcopy(s) for s in self.model[name][:where]]
        self.parents[child] = (name, where)

    @precondition(lambda self: any(map(self._existing, self.model)))
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n in self.model if self._existing(n))), label="stream")
        to = data.draw(st.sampled_from(self._existing(name)), label="to")
        self.store.stream(name).rollback(to)
        self.model[name].append(top_level_order(self._head(name), copy.deepcopy(self.model[name][to - 1])))

    def _drop(self, name: str, removed: set[int]) -> None:
        for v in removed:
            self.model[name][v - 1] = None
        for desc, limit in self._descendants(name):
            for v in removed:
                if v <= limit:
                    self.model[desc][v - 1] = None

    @precondition(lambda self: any(map(self._existing, self.model)))
    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n in self.model if self._existing(n))), label="stream")
        keep_last = data.draw(st.integers(1, 6), label="keep_last")
        auto_only = data.draw(st.booleans(), label="auto_only")
        lineage = self._existing(name)
        start = self._own_start(name)
        anchors = {limit for _, limit in self._descendants(name)}
        wanted = {v for v in lineage[:-keep_last] if v >= start and (not auto_only or (name, v) in self.autos)}
        result = self.store.stream(name).prune(keep_last, auto_only=auto_only)
        assert set(result.removed) == wanted - anchors
        assert set(result.kept_for_forks) == wanted & anchors
        self._drop(name, set(result.removed))

    @precondition(lambda self: any(map(self._existing, self.model)))
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n in self.model if self._existing(n))), label="stream")
        own = [v for v in self._existing(name) if v >= self._own_start(name)]
        if not own:
            return
        version = data.draw(st.sampled_from(own), label="version")
        stream = self.store.stream(name)
        if version in {limit for _, limit in self._descendants(name)}:  # the head too is removable otherwise
            with pytest.raises(eventckpt.VersionInUseError):
                stream.remove(version)
            return
        assert stream.remove(version).removed == (version,)
        self._drop(name, {version})

    @invariant()
    def every_version_restores(self) -> None:
        for name, states in self.model.items():
            stream = self.store.stream(name)
            if not stream.exists():
                assert states == [] and stream.version == 0
                continue
            assert stream.version == max(self._existing(name), default=0)
            assert stream.list_versions() == self._existing(name)
            for version, expected in enumerate(states, 1):
                if expected is None:
                    with pytest.raises(eventckpt.VersionNotFoundError):
                        stream.get(version)
                else:
                    got = stream.state(version)
                    assert strict_equal(got, expected), (name, version, got, expected)
                    assert key_order(got) == key_order(expected), (name, version, got, expected)

    @invariant()
    def remaining_events_fold_to_every_state(self) -> None:
        store = self.store
        for name, states in self.model.items():
            with store.core.session() as journal:
                found = journal.stream_and_head(name)
                if found is None:
                    continue
                row, head = found
                rows = journal.tail(store.core.segments(journal, row, head), 0)
            state: dict[str, Any] = {}
            by_version: dict[int, list[Any]] = {}
            for version, _, op, path, value in rows:
                by_version.setdefault(version, []).append((op, path, value))
            for version in self._existing(name):
                for op, path, value in by_version.get(version, []):
                    ops.apply(state, op, from_text(path), store.codec.decode(value) if value is not None else None)
                assert strict_equal(state, states[version - 1]), (name, version)
                assert key_order(state) == key_order(states[version - 1]), (name, version)

    @invariant()
    def checksums_chain_over_kept_versions(self) -> None:
        store = self.store
        for name in self.model:
            with store.core.session() as journal:
                found = journal.stream_and_head(name)
                if found is None:
                    continue
                row, head = found
                segments = store.core.segments(journal, row, head)
                parent = ROOT
                for vrow in journal.version_rows(segments):
                    owner = next(s for s in segments if s.lo <= vrow.version <= s.hi)
                    events = journal.events_of(owner, vrow.version)
                    expected = version_checksum(parent, vrow.version, vrow.created_at, vrow.name, vrow.auto,
                                                vrow.metadata, vrow.usage, events)
                    assert vrow.checksum == expected, (name, vrow.version)
                    parent = vrow.checksum


class Eager(RetentionMachine):
    """Small thresholds: many snapshots, shared keys based on snapshots and on creation events."""

    policy = SnapshotPolicy(min_tail_bytes=96, event_overhead=16, share_min_bytes=24)


class EveryVersion(RetentionMachine):
    policy = SnapshotPolicy.every_version(share_min_bytes=0)


class Never(RetentionMachine):
    policy = SnapshotPolicy.never()


_EXAMPLES = int(os.environ.get("EVENTCKPT_PROPERTY_EXAMPLES", "60")) // 2


def _case(machine: type[RetentionMachine], examples: int) -> type:
    case = machine.TestCase
    case.settings = settings(max_examples=examples, stateful_step_count=30)
    return case


TestRetentionEager = _case(Eager, _EXAMPLES)
TestRetentionEveryVersion = _case(EveryVersion, _EXAMPLES)
TestRetentionNever = _case(Never, _EXAMPLES)
# On PostgreSQL: two connections with their own caches, on hosts' terms (the tree's generation and the
# versions primary key keep them right).
_PG_EXAMPLES = max(8, _EXAMPLES // 2)
TestRetentionEagerPostgres = _case(type("EagerPostgres", (Eager,), {"engine": "postgresql"}), _PG_EXAMPLES)
TestRetentionEveryVersionPostgres = _case(type("EveryVersionPostgres", (EveryVersion,), {"engine": "postgresql"}), _PG_EXAMPLES)
TestRetentionNeverPostgres = _case(type("NeverPostgres", (Never,), {"engine": "postgresql"}), _PG_EXAMPLES)
