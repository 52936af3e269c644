"""Invariant 1: restore(stream, v) equals the fold of the lineage's changes, for every v, checked against a
plain-Python model on random sequences of saves, transactions, tracked-state edits and saves (refused when
stale), forks, rollbacks and reopens."""

from __future__ import annotations

import copy
import datetime as dt
import os
import zoneinfo
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import eventckpt
from eventckpt import SnapshotPolicy

from .conftest import canonical, strict_equal
from .engines import TARGETS

KEYS = st.sampled_from(["a", "b", "msgs", "n", "x.y", "$d", "with space", "k"])
NESTED_KEYS = st.text(alphabet="ab$.[ \"é", min_size=0, max_size=3)
NOON = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
REPEATED_HOUR = dt.datetime(2024, 11, 3, 1, 30, tzinfo=zoneinfo.ZoneInfo("America/New_York"))  # fold 0 and 1: two instants
# Values equal by == but stored differently: replacing one by another is a change save() must see.
LOOKALIKE_VALUES = [0, 1, 0.0, -0.0, 1.0, True, False, Decimal("0"), Decimal("-0"), Decimal("1.0"), Decimal("1.00"),
                    NOON, NOON.astimezone(dt.timezone(dt.timedelta(hours=1))), NOON.replace(fold=1),
                    REPEATED_HOUR, REPEATED_HOUR.replace(fold=1)]
LOOKALIKES = st.sampled_from(LOOKALIKE_VALUES)
LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
    st.binary(max_size=3),
    st.tuples(st.integers(-3, 3), st.text(max_size=2)),
    st.frozensets(st.integers(0, 5), max_size=3),
    st.decimals(allow_nan=False, allow_infinity=False, places=2),
    st.datetimes(timezones=st.just(dt.timezone.utc)),
    LOOKALIKES,
    st.frozensets(LOOKALIKES, max_size=2),
)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NESTED_KEYS, inner, max_size=3)
    | st.dictionaries(st.sampled_from([1, 1.0, True, 2]), inner, max_size=2),
    max_leaves=10,
)


def containers(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Paths of the dicts and lists inside `value` (plain ones a caller can address)."""
    out = []
    if type(value) is dict:
        out.append(path)
        for k, v in value.items():
            if type(k) is str and '"' not in k:
                out.extend(containers(v, path + (k,)))
    elif type(value) is list:
        out.append(path)
        for i, v in enumerate(value):
            out.extend(containers(v, path + (i,)))
    return out


def lookalikes(value: Any) -> list[Any]:
    """Values == `value` but stored differently (a type, a zero's sign, an exponent or a zone apart)."""
    if type(value) in (tuple, frozenset):
        options = [lookalikes(x) for x in value]
        if not any(options):
            return []
        return [type(value)(opts[0] if opts else x for x, opts in zip(value, options))]
    return [x for x in LOOKALIKE_VALUES if x == value and not strict_equal(x, value)]


def key_order(value: Any) -> Any:
    """The order of the keys of every dict inside `value` (README: a dict restores in the order it was given)."""
    if type(value) is dict:
        return tuple((canonical(k), key_order(v)) for k, v in value.items())
    if type(value) in (list, tuple):
        return tuple(map(key_order, value))
    return None


def top_level_order(head: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """`new` with its keys in the order a save (or rollback) over `head` stores them (README): the state's
    own keys stay where they were and new ones go last; nested dicts keep the order they were given."""
    return {k: new[k] for k in [*(k for k in head if k in new), *(k for k in new if k not in head)]}


def at(state: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        state = state[key]
    return state


def fresh(value: Any) -> Any:
    """A copy sharing nothing mutable, not even between its own parts (deepcopy keeps aliases)."""
    if type(value) is dict:
        return {k: fresh(v) for k, v in value.items()}
    if type(value) is list:
        return [fresh(v) for v in value]
    if type(value) is set:
        return set(value)
    return value


def model_apply(state: dict[str, Any], op: str, path: tuple[Any, ...], value: Any) -> None:
    """The model's own fold of one operation (independent of eventckpt.ops)."""
    parent = at(state, path[:-1])
    key = path[-1]
    if op == "set":
        parent[key] = copy.deepcopy(value)
    elif op == "delete":
        del parent[key]
    elif op == "append":
        parent.setdefault(key, []).append(copy.deepcopy(value)) if type(parent) is dict else parent[key].append(copy.deepcopy(value))
    elif op == "extend":
        if type(parent) is dict and key not in parent:
            parent[key] = []
        parent[key].extend(copy.deepcopy(value))
    elif op == "incr":
        parent[key] = (parent.get(key, 0) if type(parent) is dict else parent[key]) + value
    elif op == "truncate":
        del parent[key][value:]


class StoreMachine(RuleBasedStateMachine):
    policy: SnapshotPolicy = SnapshotPolicy()
    engine = "sqlite"

    def __init__(self) -> None:
        super().__init__()
        self.path = TARGETS.take(self.engine)
        self.store = eventckpt.open(self.path, snapshots=self.policy)
        self.model: dict[str, list[dict[str, Any]]] = {"s0": []}
        self.forks = 0
        # stream -> (its tracked state, the plain data that state must hold: the same edits on plain Python)
        self.tracked: dict[str, tuple[Any, dict[str, Any]]] = {}

    def teardown(self) -> None:
        self.store.close()
        TARGETS.give_back(self.path)

    def _name(self, data: st.DataObject) -> str:
        return data.draw(st.sampled_from(sorted(self.model)), label="stream")

    def _head_version(self, name: str) -> int:
        """The version the stream's head is at (what a tracked state must be based on to be saved)."""
        return len(self.model[name])

    def _head(self, name: str) -> dict[str, Any]:
        states = self.model[name]
        return copy.deepcopy(states[-1]) if states else {}

    @rule(data=st.data())
    def save(self, data: st.DataObject) -> None:
        name = self._name(data)
        state = self._head(name)
        for _ in range(data.draw(st.integers(0, 3), label="edits")):
            self._edit(state, data)
        usage = data.draw(st.none() | st.fixed_dictionaries({"input_tokens": st.integers(0, 10**6)}), label="usage")
        self.store.stream(name).save(state, usage)
        self.model[name].append(top_level_order(self._head(name), copy.deepcopy(state)))

    def _edit(self, state: dict[str, Any], data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["set", "delete", "append", "truncate", "drop_front", "nested", "lookalike"]),
                         label="kind")
        lists = [p for p in containers(state) if type(at(state, p)) is list]
        if kind == "lookalike":  # what == cannot see: a value or a dict key replaced by an equal one stored otherwise
            spots = [(p, k, key) for p in containers(state) for k in (list(at(state, p)) if type(at(state, p)) is dict
                     else range(len(at(state, p)))) for key in (False, True)
                     if (type(at(state, p)) is dict and lookalikes(k) if key else lookalikes(at(state, p)[k]))]
            if spots:
                path, k, key = data.draw(st.sampled_from(spots), label="spot")
                container = at(state, path)
                if key:
                    new_key = data.draw(st.sampled_from(lookalikes(k)), label="key")
                    items = [(new_key if x == k else x, v) for x, v in container.items()]
                    container.clear()
                    container.update(items)
                else:
                    container[k] = data.draw(st.sampled_from(lookalikes(container[k])), label="lookalike")
        if kind == "set":
            key, value = data.draw(KEYS, label="key"), data.draw(VALUES, label="value")
            if key not in state or not strict_equal(state[key], value):  # type-only changes included
                state[key] = value
        elif kind == "delete" and state:
            del state[data.draw(st.sampled_from(sorted(state)), label="del")]
        elif kind == "append" and lists:
            target = at(state, data.draw(st.sampled_from(lists), label="list"))
            target.extend(data.draw(st.lists(VALUES, min_size=1, max_size=3), label="items"))
        elif kind == "truncate" and lists:
            target = at(state, data.draw(st.sampled_from(lists), label="list"))
            del target[data.draw(st.integers(0, len(target)), label="keep") :]
        elif kind == "drop_front" and lists:
            target = at(state, data.draw(st.sampled_from(lists), label="list"))
            del target[: data.draw(st.integers(0, len(target)), label="drop")]
            target.extend(data.draw(st.lists(VALUES, max_size=2), label="items"))
        elif kind == "nested":
            places = [p for p in containers(state) if p and at(state, p)]
            if places:
                path = data.draw(st.sampled_from(places), label="place")
                container = at(state, path)
                key = data.draw(st.sampled_from(list(container) if type(container) is dict else range(len(container))))
                value = data.draw(VALUES, label="value")
                if not strict_equal(container[key], value):
                    container[key] = value

    @rule(data=st.data())
    def transaction(self, data: st.DataObject) -> None:
        name = self._name(data)
        state = self._head(name)
        ops = []
        for _ in range(data.draw(st.integers(1, 4), label="ops")):
            op = self._draw_op(state, data)
            if op is None:
                continue
            model_apply(state, *op)
            ops.append(op)
        stream = self.store.stream(name)
        with stream.transaction(metadata={"ops": len(ops)}) as tx:
            for op, path, value in ops:
                if op in ("delete",):
                    tx.delete(path)
                elif op == "truncate":
                    tx.truncate(path, value)
                else:
                    getattr(tx, op)(path, value)
            tx.add_usage(output_tokens=1)
        self.model[name].append(state)

    def _draw_op(self, state: dict[str, Any], data: st.DataObject) -> tuple[str, tuple[Any, ...], Any] | None:
        kind = data.draw(st.sampled_from(["set", "delete", "append", "extend", "incr", "truncate"]), label="op")
        places = containers(state)
        path_to = data.draw(st.sampled_from(places), label="container")
        container = at(state, path_to)
        if type(container) is dict:
            keys = [k for k in container if type(k) is str and '"' not in k and "\\" not in k]
            key = data.draw(st.sampled_from(keys + ["new", "n"]) if keys else st.sampled_from(["new", "n"]), label="key")
            current = container.get(key, None)
            exists = key in container
        else:
            if not container:
                return None
            key = data.draw(st.integers(0, len(container) - 1), label="index")
            current, exists = container[key], True
        path = path_to + (key,)
        if kind == "set":
            return ("set", path, data.draw(VALUES, label="value"))
        if kind == "delete" and exists:
            return ("delete", path, None)
        if kind in ("append", "extend") and (type(current) is list or (not exists and type(container) is dict)):
            items = data.draw(st.lists(VALUES, max_size=2), label="items")
            return ("append", path, items[0]) if kind == "append" and items else ("extend", path, items)
        if kind == "incr" and (type(current) in (int, float) or (not exists and type(container) is dict)):
            return ("incr", path, data.draw(st.integers(-5, 5), label="n"))
        if kind == "truncate" and type(current) is list:
            return ("truncate", path, data.draw(st.integers(0, len(current)), label="keep"))
        return None

    @rule(data=st.data())
    def bad_transaction(self, data: st.DataObject) -> None:
        """An operation that does not fit the state fails and writes nothing."""
        name = self._name(data)
        stream = self.store.stream(name)
        before = stream.version
        with pytest.raises(eventckpt.PathError):
            with stream.transaction() as tx:
                tx.set("fresh", 1)
                tx.append(("no", "such", "path"), 1)
        assert stream.version == before

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, s in self.model.items() if s)), label="parent")
        where = data.draw(st.integers(1, len(self.model[name])), label="at")
        self.forks += 1
        child = f"f{self.forks}"
        self.store.stream(name).fork(at=where, task_id=child)
        self.model[child] = [copy.deepcopy(s) for s in self.model[name][:where]]

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(n for n, s in self.model.items() if s)), label="stream")
        to = data.draw(st.integers(1, len(self.model[name])), label="to")
        self.store.stream(name).rollback(to)
        self.model[name].append(top_level_order(self._head(name), copy.deepcopy(self.model[name][to - 1])))

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = eventckpt.open(self.path, snapshots=self.policy)
        self.tracked.clear()  # they belong to the closed Store

    @rule(data=st.data())
    def tracked_edit(self, data: st.DataObject) -> None:
        """Edit a stream's tracked state in place (checked out on first use) and the same way a plain copy."""
        name = self._name(data)
        if name not in self.tracked:
            self.tracked[name] = (self.store.stream(name).checkout(), fresh(self._head(name)))
        state, live = self.tracked[name]
        for _ in range(data.draw(st.integers(1, 4), label="tracked edits")):
            self._tracked_edit(state, live, data)
        assert strict_equal(state.plain(), live)

    @precondition(lambda self: self.tracked)
    @rule(data=st.data())
    def tracked_save(self, data: st.DataObject) -> None:
        """Save a tracked state: its edits when the stream is still at its version, else ConflictError
        (nothing written) and a refresh."""
        name = data.draw(st.sampled_from(sorted(self.tracked)), label="tracked")
        state, live = self.tracked[name]
        stream = self.store.stream(name)
        if state.version != self._head_version(name):
            before = stream.version
            with pytest.raises(eventckpt.ConflictError):
                stream.save(state)
            assert stream.version == before
            state.refresh()
            self.tracked[name] = (state, fresh(self._head(name)))
            assert strict_equal(state.plain(), self.tracked[name][1])
            return
        stream.save(state, metadata={"tracked": True})
        self.model[name].append(fresh(live))
        assert state.version == len(self.model[name])

    def _tracked_edit(self, state: Any, live: dict[str, Any], data: st.DataObject) -> None:
        self.tracked_root, self.tracked_root_mirror = state, live
        place = data.draw(st.sampled_from(containers(live)), label="container")
        node, mirror = at(state, place), at(live, place)
        if type(mirror) is dict:
            self._tracked_dict_edit(node, mirror, place == (), data)
        else:
            self._tracked_list_edit(node, mirror, data)

    def _tracked_dict_edit(self, node: Any, mirror: dict[Any, Any], root: bool, data: st.DataObject) -> None:
        kind = data.draw(st.sampled_from(["set", "set", "delete", "pop", "clear", "update", "setdefault", "set a set",
                                          "grow a set"]), label="dict edit")
        keys = list(mirror)
        new_key = data.draw(KEYS if root else NESTED_KEYS, label="new key")
        key = data.draw(st.sampled_from(keys), label="key") if keys and data.draw(st.booleans()) else new_key
        if kind == "set":
            value = data.draw(VALUES, label="value")
            node[key] = value
            mirror[key] = fresh(value)
        elif kind == "set a set":
            value = data.draw(st.sets(st.integers(0, 5), max_size=3), label="set")
            node[key] = value
            mirror[key] = set(value)
        elif kind == "grow a set":  # the tracker cannot see this: the save compares the set
            sets = [(place, k) for place in containers(self.tracked_root_mirror) for k, v in
                    (at(self.tracked_root_mirror, place).items() if type(at(self.tracked_root_mirror, place)) is dict
                     else enumerate(at(self.tracked_root_mirror, place))) if type(v) is set]
            if sets:
                place, k = data.draw(st.sampled_from(sets), label="set")
                n = data.draw(st.integers(0, 9), label="n")
                at(self.tracked_root, place)[k].add(n)
                at(self.tracked_root_mirror, place)[k].add(n)
        elif kind in ("delete", "pop") and key in mirror:
            if kind == "delete":
                del node[key]
            else:
                node.pop(key)
            del mirror[key]
        elif kind == "clear":
            node.clear()
            mirror.clear()
        elif kind == "update":
            values = {new_key: data.draw(VALUES, label="value")}
            node.update(values)
            mirror.update(fresh(values))
        elif kind == "setdefault":
            value = data.draw(VALUES, label="value")
            node.setdefault(key, value)
            mirror.setdefault(key, fresh(value))

    def _tracked_list_edit(self, node: Any, mirror: list[Any], data: st.DataObject) -> None:
        kinds = ["append", "extend", "insert", "set item", "pop", "slice", "delete slice", "clear", "reverse",
                 "sort", "repeat"]
        kind = data.draw(st.sampled_from(kinds), label="list edit")
        n = len(mirror)
        i = data.draw(st.integers(-n - 1, n + 1), label="index")
        if kind == "append":
            value = data.draw(VALUES, label="value")
            node.append(value)
            mirror.append(fresh(value))
        elif kind == "extend":
            values = data.draw(st.lists(VALUES, max_size=3), label="values")
            node += values
            mirror += fresh(values)
        elif kind == "insert":
            value = data.draw(VALUES, label="value")
            node.insert(i, value)
            mirror.insert(i, fresh(value))
        elif kind == "set item" and -n <= i < n:
            value = data.draw(VALUES, label="value")
            node[i] = value
            mirror[i] = fresh(value)
        elif kind == "pop" and -n <= i < n:
            node.pop(i)
            mirror.pop(i)
        elif kind in ("slice", "delete slice"):
            j = data.draw(st.integers(-n - 1, n + 1), label="stop")
            step = data.draw(st.sampled_from([None, None, 1, 2, -1]), label="step")
            where = slice(i, j, step)
            if kind == "delete slice":
                del node[where]
                del mirror[where]
            else:
                size = len(range(*where.indices(n))) if step not in (None, 1) else data.draw(st.integers(0, 3))
                values = data.draw(st.lists(VALUES, min_size=size, max_size=size), label="values")
                node[where] = values
                mirror[where] = fresh(values)
        elif kind == "clear":
            node.clear()
            mirror.clear()
        elif kind == "reverse":
            node.reverse()
            mirror.reverse()
        elif kind == "sort":
            node.sort(key=repr)
            mirror.sort(key=repr)
        elif kind == "repeat":  # each repetition is a copy in a tracked state (values put in are copied)
            times = data.draw(st.integers(0, 2), label="times")
            node *= times
            mirror[:] = [fresh(v) for _ in range(times) for v in mirror]

    @invariant()
    def every_version_restores(self) -> None:
        for name, states in self.model.items():
            stream = self.store.stream(name)
            assert stream.version == len(states)
            for version, expected in enumerate(states, 1):
                got = stream.state(version)
                assert strict_equal(got, expected), (name, version, got, expected)
                assert key_order(got) == key_order(expected), (name, version, got, expected)


class EveryVersion(StoreMachine):
    policy = SnapshotPolicy.every_version(share_min_bytes=0)


class Never(StoreMachine):
    policy = SnapshotPolicy.never()


class Eager(StoreMachine):
    """The default rule with small thresholds, so short runs cross many snapshots and shared keys."""

    policy = SnapshotPolicy(min_tail_bytes=96, event_overhead=16, share_min_bytes=24)


class NoSharing(StoreMachine):
    policy = SnapshotPolicy(min_tail_bytes=96, event_overhead=16, share_min_bytes=None)


_EXAMPLES = int(os.environ.get("EVENTCKPT_PROPERTY_EXAMPLES", "60"))


def _case(machine: type[StoreMachine], examples: int) -> type:
    case = machine.TestCase
    case.settings = settings(max_examples=examples, stateful_step_count=25)
    return case


TestEveryVersion = _case(EveryVersion, _EXAMPLES)
TestNever = _case(Never, _EXAMPLES)
TestEager = _case(Eager, _EXAMPLES)
TestNoSharing = _case(NoSharing, _EXAMPLES)
# The same machines on PostgreSQL (a database of the session's throw-away server per example; fewer
# examples, since every step round-trips to the server).
_PG_EXAMPLES = max(10, _EXAMPLES // 2)
TestEveryVersionPostgres = _case(type("EveryVersionPostgres", (EveryVersion,), {"engine": "postgresql"}), _PG_EXAMPLES)
TestNeverPostgres = _case(type("NeverPostgres", (Never,), {"engine": "postgresql"}), _PG_EXAMPLES)
TestEagerPostgres = _case(type("EagerPostgres", (Eager,), {"engine": "postgresql"}), _PG_EXAMPLES)
TestNoSharingPostgres = _case(type("NoSharingPostgres", (NoSharing,), {"engine": "postgresql"}), _PG_EXAMPLES)
