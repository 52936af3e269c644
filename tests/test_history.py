"""history(path): every change of one path, newest first, from the path index."""

from __future__ import annotations

import copy
import datetime as dt
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import eventckpt
from eventckpt import Unregistered

from .conftest import RawSQL


def ops(entries: list) -> list[tuple]:
    return [(e.version, e.op, e.path, e.value) for e in entries]


def test_changes_of_a_key(store: eventckpt.Store) -> None:
    """A top-level key's sets, increments and deletion, newest first, with times."""
    task = store.stream("t")
    task.save({"step": 1, "other": 0})
    with task.transaction() as tx:
        tx.incr("step", 2)
    task.save({"step": 3, "other": 1})
    task.save({"other": 1})
    entries = task.history("step")
    assert ops(entries) == [(4, "delete", ("step",), None), (2, "incr", ("step",), 2), (1, "set", ("step",), 1)]
    assert entries[0].task_id == "t" and entries[0].created_at == task.get(4).created_at
    assert isinstance(entries[0].created_at, dt.datetime) and entries[0].seq == 0


def test_appends_and_nested_changes_below_the_path(store: eventckpt.Store) -> None:
    """Events below the path (appends to a list, keys inside a dict) are part of its history."""
    task = store.stream("t")
    task.save({"messages": [], "scratch": {"a": 1}})
    for i in range(3):
        with task.transaction() as tx:
            tx.append("messages", {"n": i})
            tx.set(("scratch", "b"), i)
    with task.transaction() as tx:
        tx.set(("messages", 1, "n"), 10)
    assert ops(task.history("messages")) == [
        (5, "set", ("messages", 1, "n"), 10), (4, "append", ("messages",), {"n": 2}),
        (3, "append", ("messages",), {"n": 1}), (2, "append", ("messages",), {"n": 0}), (1, "set", ("messages",), [])]
    assert [e.path for e in task.history("scratch")] == [("scratch", "b")] * 3 + [("scratch",)]
    assert ops(task.history(("messages", 1))) == [(5, "set", ("messages", 1, "n"), 10), (3, "append", ("messages",), {"n": 1})]


def test_ancestors_that_replace_or_remove_the_path(store: eventckpt.Store) -> None:
    """A parent set to a new dict reports the path's new value; one without it reports a delete; an
    unchanged or still-absent path is not reported."""
    task = store.stream("t")
    task.save({"cfg": {"model": "a", "t": 1}})               # v1: created with its parent
    task.save({"cfg": {"model": "b", "t": 1}})               # v2: the path itself
    with task.transaction() as tx:                            # v3: parent replaced, same value
        tx.set("cfg", {"model": "b", "t": 2})
    with task.transaction() as tx:                            # v4: parent replaced, new value
        tx.set("cfg", {"model": "c"})
    with task.transaction() as tx:                            # v5: parent replaced without it
        tx.set("cfg", {"t": 3})
    with task.transaction() as tx:                            # v6: parent replaced, still without it
        tx.set("cfg", {"t": 4})
    task.save({})                                             # v7: parent deleted (path already absent)
    assert ops(task.history(("cfg", "model"))) == [
        (5, "delete", ("cfg",), None), (4, "set", ("cfg",), "c"), (2, "set", ("cfg", "model"), "b"),
        (1, "set", ("cfg",), "a")]


def test_list_items_and_truncation(store: eventckpt.Store) -> None:
    """An item path sees its own edits, a replacement of the list, and a truncation that cut it."""
    task = store.stream("t")
    task.save({"xs": [1, 2, 3]})
    with task.transaction() as tx:
        tx.set(("xs", 2), 30)
        tx.append("xs", 4)
    with task.transaction() as tx:
        tx.truncate("xs", 3)                                  # keeps item 2
    with task.transaction() as tx:
        tx.truncate("xs", 1)                                  # cuts it
    with task.transaction() as tx:
        tx.set("xs", [7, 8, 9])
    assert ops(task.history(("xs", 2))) == [
        (5, "set", ("xs",), 9), (4, "delete", ("xs",), None), (2, "set", ("xs", 2), 30), (1, "set", ("xs",), 3)]


def test_since_until_limit(store: eventckpt.Store) -> None:
    """since/until bound the versions (inclusive); limit keeps the newest."""
    task = store.stream("t")
    for i in range(1, 11):
        task.save({"n": i})
    assert [e.version for e in task.history("n", since=3, until=6)] == [6, 5, 4, 3]
    assert [e.version for e in task.history("n", limit=2)] == [10, 9]
    assert [e.version for e in task.history("n", since=8, limit=5)] == [10, 9, 8]
    assert task.history("n", limit=0) == [] and task.history("n", until=0) == []


def test_fork_includes_parent_history(store: eventckpt.Store) -> None:
    """A fork's history continues into the events it shares with its parent, named by their stream."""
    task = store.stream("main")
    for i in range(1, 6):
        task.save({"n": i})
    fork = task.fork(at=3, task_id="f")
    fork.save({"n": 100})
    entries = fork.history("n")
    assert [(e.task_id, e.version, e.value) for e in entries] == [("f", 4, 100), ("main", 3, 3), ("main", 2, 2), ("main", 1, 1)]
    assert [e.version for e in fork.history("n", limit=2)] == [4, 3]
    assert [e.value for e in task.history("n", since=4)] == [5, 4]


def test_tagged_values_and_quoted_keys(store: eventckpt.Store) -> None:
    """Values come back as Python values; keys needing quotes work as paths."""
    task = store.stream("t")
    task.save({"a.b": {"when": (1, 2)}})
    task.save({"a.b": {"when": {3}}})
    assert [e.value for e in task.history(("a.b", "when"))] == [{3}, (1, 2)]


def test_missing_stream_and_bad_paths(store: eventckpt.Store) -> None:
    """A missing stream raises StreamNotFoundError; a bad path or bound raises a typed error."""
    with pytest.raises(eventckpt.StreamNotFoundError):
        store.stream("nobody").history("x")
    task = store.stream("t")
    task.save({"x": 1})
    for bad in ((), (1,), ("x", 1.5), 'a"b', None):
        with pytest.raises(eventckpt.PathError):
            task.history(bad)
    with pytest.raises(eventckpt.InvalidArgumentError):
        task.history("x", since=-1)


def test_the_append_that_created_an_item(store: eventckpt.Store) -> None:
    """history of a list item includes the append that created it, and a path inside the item reports the
    append with the value there; a position appended to twice (after a truncation) has both."""
    task = store.stream("t")
    task.save({"messages": []})
    for i in range(5):
        with task.transaction() as tx:
            tx.append("messages", {"n": i, "text": f"m{i}"})
    assert ops(task.history(("messages", 3))) == [(5, "append", ("messages",), {"n": 3, "text": "m3"})]
    assert ops(task.history("messages[3].text")) == [(5, "append", ("messages",), "m3")]
    assert task.history("messages[3].missing") == [] and task.history(("messages", 9)) == []
    with task.transaction() as tx:
        tx.truncate("messages", 2)
    with task.transaction() as tx:
        tx.append("messages", {"n": 20})
        tx.append("messages", {"n": 30})
    assert ops(task.history(("messages", 3))) == [(8, "append", ("messages",), {"n": 30}), (7, "delete", ("messages",), None),
                                                   (5, "append", ("messages",), {"n": 3, "text": "m3"})]
    assert [(e.version, e.seq) for e in task.history(("messages", 3))][0] == (8, 1)
    assert ops(task.history(("messages", 3), limit=1)) == [(8, "append", ("messages",), {"n": 30})]
    assert [e.version for e in task.history(("messages", 3), until=6)] == [5]
    assert [e.version for e in task.history(("messages", 3), since=6)] == [8, 7]


def test_extends_sets_and_item_deletes(store: eventckpt.Store) -> None:
    """An extend creates the items it adds; a list set whole reports the item's value (the set that
    contained it); deleting an earlier item shifts the list (not reported), so a later append lands one
    position lower."""
    task = store.stream("t")
    task.save({"l": ["a", "b"]})  # v1: created by a set
    with task.transaction() as tx:
        tx.extend("l", ["c", "d", "e"])  # v2: items 2..4
    with task.transaction() as tx:
        tx.delete(("l", 0))  # v3: length 4
        tx.append("l", "f")  # item 4
    assert ops(task.history(("l", 1))) == [(1, "set", ("l",), "b")]
    assert ops(task.history(("l", 3))) == [(2, "extend", ("l",), "d")]
    assert ops(task.history(("l", 4))) == [(3, "append", ("l",), "f"), (2, "extend", ("l",), "e")]
    assert task.state() == {"l": ["b", "c", "d", "e", "f"]}


def test_lists_inside_dicts_and_replaced_parents(store: eventckpt.Store) -> None:
    """A list below a dict key counts from where an ancestor last replaced it; a fork's history includes
    the appends it shares with its parent."""
    task = store.stream("t")
    task.save({"scratch": {"items": [1]}})
    with task.transaction() as tx:
        tx.append("scratch.items", 2)  # v2: item 1
    task.save({"scratch": {"items": [5, 6, 7], "x": 1}, "y": 0})  # v3
    with task.transaction() as tx:
        tx.append("scratch.items", 8)  # v4: item 3
    assert ops(task.history("scratch.items[3]")) == [(4, "append", ("scratch", "items"), 8)]
    with task.transaction() as tx:
        tx.set("scratch", {"items": []})  # v5: the parent replaced, the item gone
        tx.append("scratch.items", 9)  # item 0
    assert ops(task.history("scratch.items[3]")) == [(5, "delete", ("scratch",), None), (4, "append", ("scratch", "items"), 8)]
    assert ops(task.history("scratch.items[0]"))[0] == (5, "append", ("scratch", "items"), 9)
    fork = task.fork(at=4, task_id="f")
    with fork.transaction() as tx:
        tx.append("scratch.items", 10)  # f v5: item 4
    assert ops(fork.history("scratch.items[4]")) == [(5, "append", ("scratch", "items"), 10)]
    assert ops(fork.history("scratch.items[3]")) == [(4, "append", ("scratch", "items"), 8)]
    assert fork.history("scratch.items[3]")[0].task_id == "t"


LIST_OPS = st.lists(st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 99)),
    st.tuples(st.just("extend"), st.lists(st.integers(0, 99), max_size=3)),
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("truncate"), st.integers(0, 4)),
    st.tuples(st.just("set"), st.lists(st.integers(0, 99), max_size=4)),
    st.tuples(st.just("drop"), st.none()),
), min_size=1, max_size=4), min_size=1, max_size=12)


@settings(max_examples=60)
@given(LIST_OPS)
def test_creations_match_a_model(tmp_path_factory: pytest.TempPathFactory, versions: list) -> None:
    """On random appends, extends, item deletes, truncations, sets and deletions of a list, the appends and
    extends history reports for each position are exactly those that put an item there (a model follows
    the list's length event by event)."""
    path = tmp_path_factory.mktemp("creations") / "h.db"
    created: dict[int, list[tuple[int, int, str, int]]] = {}
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"other": 0})
        model: list[int] | None = None
        for version, steps in enumerate(versions, 2):
            with task.transaction() as tx:
                tx.incr("other")
                for seq, (op, arg) in enumerate(steps, 1):
                    if op == "append":
                        created.setdefault(len(model or []), []).append((version, seq, op, arg))
                        model = (model or []) + [arg]
                        tx.append("l", arg)
                    elif op == "extend":
                        for k, item in enumerate(arg):
                            created.setdefault(len(model or []) + k, []).append((version, seq, op, item))
                        model = (model or []) + arg
                        tx.extend("l", arg)
                    elif op == "delete" and model and arg < len(model):
                        del model[arg]
                        tx.delete(("l", arg))
                    elif op == "truncate" and model is not None:
                        model = model[:arg]
                        tx.truncate("l", arg)
                    elif op == "set":
                        model = list(arg)
                        tx.set("l", arg)
                    elif op == "drop" and model is not None:
                        model = None
                        tx.delete("l")
                    else:
                        tx.incr("other")  # keeps seq numbers in step with the model
        assert task.state().get("l") == model
        for index in range(max(created, default=-1) + 2):
            got = [(e.version, e.seq, e.op, e.value) for e in task.history(("l", index)) if e.op in ("append", "extend")]
            assert got == sorted(created.get(index, []), reverse=True), index


def test_an_ancestor_set_reports_what_it_left_not_what_the_version_ended_with(store: eventckpt.Store) -> None:
    """An ancestor's set followed by other events in the same version is reported with the path's value
    right after it: a delete when the new value has no such item (not the item a later event added), a
    null as a set of None, a value under "$" keys from the decoded event."""
    task = store.stream("h")
    task.save({"d": {"b": [1, 2, 3]}})
    with task.transaction() as tx:
        tx.set("d.b", [])
        tx.extend("d.b", [7, 8, 9])
        tx.set("d.b[1]", "x")
    with task.transaction() as tx:
        tx.set("d.b", [None, {"$k": 1}])
        tx.set("d.b[0]", 5)
    got = [(e.version, e.seq, e.op, e.path, e.value) for e in task.history("d.b[0]")]
    assert got == [(3, 1, "set", ("d", "b", 0), 5), (3, 0, "set", ("d", "b"), None), (2, 1, "extend", ("d", "b"), 7),
                   (2, 0, "delete", ("d", "b"), None), (1, 0, "set", ("d",), 1)]
    assert [(e.version, e.seq, e.op, e.value) for e in task.history(("d", "b", 1, "$k"))] == [(3, 0, "set", 1)]


def test_a_limit_counts_only_changes_of_the_path(store: eventckpt.Store) -> None:
    """limit=N gives the N newest changes, however many ancestors' events that left the path as it was lie
    between them."""
    task = store.stream("t")
    task.save({"c": [1, 2], "cfg": {"model": "a"}})  # v1
    task.save({"z": 0})  # v2: c and cfg deleted, with c[1] and cfg.model
    for i in range(3, 9):  # v3..v8: both set again, c without an item 1, cfg without a model
        with task.transaction() as tx:
            tx.set("c", [i])
            tx.set("cfg", {"t": i})
    assert ops(task.history("c[1]", limit=1)) == [(2, "delete", ("c",), None)]
    assert ops(task.history("c[1]", limit=2)) == [(2, "delete", ("c",), None), (1, "set", ("c",), 2)]
    assert ops(task.history("cfg.model", limit=1)) == [(2, "delete", ("cfg",), None)]
    assert ops(task.history("cfg.model", until=7, limit=3)) == [(2, "delete", ("cfg",), None), (1, "set", ("cfg",), "a")]


def test_appends_after_an_ancestor_set_with_tagged_values_in_one_version(store: eventckpt.Store) -> None:
    """The appends that created items are found when an ancestor was set earlier in the same version to a
    value holding tagged forms (a Decimal, a dict with an int key), as when it holds plain values."""
    task = store.stream("t")
    with task.transaction() as tx:  # v1
        tx.set("c", {"e": Decimal("1.00")})
        tx.append("c.l", "x")
        tx.append("c.l", "y")
    with task.transaction() as tx:  # v2: the list inside the set, then one more item
        tx.set("c", {"e": Decimal("2.00"), "l": ["a"]})
        tx.append("c.l", "z")
    with task.transaction() as tx:  # v3: a dict with an int key is stored tagged whole
        tx.set("d", {1: "one", "l": [5]})
        tx.append("d.l", 6)
    assert ops(task.history("c.l[0]")) == [(2, "set", ("c",), "a"), (1, "append", ("c", "l"), "x")]
    assert ops(task.history("c.l[1]")) == [(2, "append", ("c", "l"), "z"), (2, "delete", ("c",), None),
                                           (1, "append", ("c", "l"), "y")]
    assert ops(task.history("d.l[1]")) == [(3, "append", ("d", "l"), 6)]


def test_a_list_under_a_list_item_deleted_and_appended_to_in_one_version(store: eventckpt.Store) -> None:
    """The append that created an item is found when, earlier in the same version, the list holding it
    (inside a list item) was deleted."""
    task = store.stream("t")
    task.save({"x": [{"a": [1]}]})  # v1
    with task.transaction() as tx:  # v2: x[0].a deleted and created again by an append
        tx.delete("x[0].a")
        tx.append("x[0].a", 5)
    assert ops(task.history("x[0].a[0]")) == [(2, "append", ("x", 0, "a"), 5), (2, "delete", ("x", 0, "a"), None),
                                              (1, "set", ("x",), 1)]


def test_lists_inside_appended_or_shifted_list_items(store: eventckpt.Store) -> None:
    """A list inside a list item counts from the list the append that created the item held, and from
    the next item's list when the item is deleted and the next moves in: history reports the appends that
    created its items, never one that created another item."""
    task = store.stream("t")
    task.save({"c": []})  # v1
    with task.transaction() as tx:  # v2
        tx.append("c", {"l": [1]})
        tx.append("c[0].l", 2)
    with task.transaction() as tx:  # v3
        tx.append("c", {"l": [7, 8]})
        tx.append("c[0].l", 3)
    assert ops(task.history("c[0].l[0]")) == [(2, "append", ("c",), 1)]
    assert ops(task.history("c[0].l[1]")) == [(2, "append", ("c", 0, "l"), 2)]
    assert ops(task.history("c[0].l[2]")) == [(3, "append", ("c", 0, "l"), 3)]
    with task.transaction() as tx:  # v4: c[0] deleted, c[1] moves in; an append to its list
        tx.delete("c[0]")
        tx.append("c[0].l", 9)
    assert task.state() == {"c": [{"l": [7, 8, 9]}]}
    assert ops(task.history("c[0].l[2]")) == [(4, "append", ("c", 0, "l"), 9), (4, "delete", ("c", 0), None),
                                              (3, "append", ("c", 0, "l"), 3)]
    assert ops(task.history("c[0].l[3]")) == []


def test_a_list_on_the_way_set_to_something_else(store: eventckpt.Store) -> None:
    """A list on the way to the path set to a value that is not a list removes the path: history reports
    that set as a delete, as it does a dict's, also after many appends to the list and in a fork; a second
    set in the same version finds the path already gone and is not reported."""
    task = store.stream("t")
    task.save({"e": [[1, 2]], "m": []})  # v1
    task.save({"e": "gone", "m": []})  # v2: e[0] removed
    assert ops(task.history("e[0]")) == [(2, "delete", ("e",), None), (1, "set", ("e",), [1, 2])]
    task.save({"e": [[1, 2]], "m": []})  # v3
    task.save({"e": [5], "m": []})  # v4: a set of e[0] to 5 removes e[0][1]
    assert ops(task.history("e[0][1]")) == [(4, "delete", ("e", 0), None), (3, "set", ("e",), 2), (2, "delete", ("e",), None),
                                            (1, "set", ("e",), 2)]
    for i in range(5, 45):  # v5..v44
        with task.transaction() as tx:
            tx.append("m", i)
    with task.transaction() as tx:  # v45: the first set removes m[3]; the second finds it gone
        tx.set("m", 0)
        tx.set("m", {"k": 1})
    with task.transaction() as tx:  # v46: a list again, and appended to
        tx.set("m", [])
        tx.extend("m", [7, 8, 9, 10])
    with task.transaction() as tx:  # v47
        tx.set("m", None)
    assert ops(task.history("m[3]")) == [(47, "delete", ("m",), None), (46, "extend", ("m",), 10), (45, "delete", ("m",), None),
                                         (8, "append", ("m",), 8)]
    assert [(e.version, e.seq) for e in task.history("m[3]", since=45, until=45)] == [(45, 0)]
    assert ops(task.history("m[3]", limit=1)) == [(47, "delete", ("m",), None)]
    fork = task.fork(at=45, task_id="f")
    fork.save({"e": [5], "m": 3})
    assert [(e.task_id, e.version, e.op) for e in fork.history("m[3]")] == [("t", 45, "delete"), ("t", 8, "append")]


NESTED_OPS = st.lists(st.lists(st.one_of(
    st.tuples(st.just("append item"), st.lists(st.integers(0, 99), max_size=3)),
    st.tuples(st.just("extend items"), st.lists(st.lists(st.integers(0, 99), max_size=2), max_size=2)),
    st.tuples(st.just("delete item"), st.integers(0, 3)),
    st.tuples(st.just("truncate items"), st.integers(0, 3)),
    st.tuples(st.just("set items"), st.lists(st.lists(st.integers(0, 99), max_size=2), max_size=3)),
    st.tuples(st.just("unlist items"), st.none()),
    st.tuples(st.just("append"), st.tuples(st.integers(0, 3), st.integers(0, 99))),
    st.tuples(st.just("extend"), st.tuples(st.integers(0, 3), st.lists(st.integers(0, 99), max_size=2))),
    st.tuples(st.just("delete"), st.tuples(st.integers(0, 3), st.integers(0, 3))),
    st.tuples(st.just("drop"), st.integers(0, 3)),
    st.tuples(st.just("unlist"), st.integers(0, 3)),
    st.tuples(st.just("tagged item"), st.tuples(st.integers(0, 3), st.lists(st.integers(0, 99), max_size=2))),
), min_size=1, max_size=5), min_size=1, max_size=10)


@settings(max_examples=80, deadline=None)
@given(NESTED_OPS)
def test_lists_inside_list_items_match_a_model(tmp_path_factory: pytest.TempPathFactory, versions: list) -> None:
    """On random changes of a list of items that hold lists (appends, extends, deletes, truncations and sets
    of both, sets of either to something that is not a list, an item set with tagged values), history of
    c[i].l[j] reports exactly the appends and extends that put an item there, and a delete for each set
    or truncation of c or c[i].l that removed it (compared with the state right before that event)."""
    path = tmp_path_factory.mktemp("nested") / "h.db"
    created: dict[tuple[int, int], list[tuple]] = {}  # (i, j) -> (version, seq, op, path, value)
    removed: dict[tuple[int, int], list[tuple]] = {}
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"c": [], "other": 0})
        model: Any = []
        for version, steps in enumerate(versions, 2):
            before: Any = None  # history compares an ancestor's event with the state right before it

            def present(i: int, j: int) -> bool:
                inner = before[i].get("l") if type(before) is list and i < len(before) else None
                return type(inner) is list and j < len(inner)

            def made(i: int, item: dict, seq: int, op: str, where: tuple) -> None:
                for j, value in enumerate(item["l"]):
                    created.setdefault((i, j), []).append((version, seq, op, where, value))

            with task.transaction() as tx:
                tx.incr("other")
                for seq, (op, arg) in enumerate(steps, 1):
                    before = copy.deepcopy(model)
                    items = model if type(model) is list else None
                    lists = [x.get("l") for x in items] if items is not None else []
                    if op == "append item" and items is not None:
                        made(len(items), {"l": arg}, seq, "append", ("c",))
                        items.append({"l": list(arg)})
                        tx.append("c", {"l": arg})
                    elif op == "extend items" and items is not None:
                        for n, inner in enumerate(arg):
                            made(len(items) + n, {"l": inner}, seq, "extend", ("c",))
                        items.extend({"l": list(inner)} for inner in arg)
                        tx.extend("c", [{"l": inner} for inner in arg])
                    elif op == "delete item" and items is not None and arg < len(items):
                        del items[arg]
                        tx.delete(("c", arg))
                    elif op == "truncate items" and items is not None:
                        for i, j in [(i, j) for i in range(arg, len(before) if type(before) is list else 0) for j in range(4)]:
                            if present(i, j):
                                removed.setdefault((i, j), []).append((version, seq, "delete", ("c",), None))
                        del items[arg:]
                        tx.truncate("c", arg)
                    elif op in ("set items", "unlist items"):
                        model = [{"l": list(inner)} for inner in arg] if op == "set items" else "gone"
                        for i, j in [(i, j) for i in range(4) for j in range(4)]:
                            if present(i, j) and not (type(model) is list and i < len(model) and j < len(model[i]["l"])):
                                removed.setdefault((i, j), []).append((version, seq, "delete", ("c",), None))
                        tx.set("c", model)
                    elif op in ("append", "extend") and arg[0] < len(lists) and type(lists[arg[0]]) in (list, type(None)):
                        i, new = arg[0], [arg[1]] if op == "append" else arg[1]
                        inner = items[i].setdefault("l", [])
                        for n, value in enumerate(new):
                            created.setdefault((i, len(inner) + n), []).append((version, seq, op, ("c", i, "l"), value))
                        inner.extend(new)
                        getattr(tx, op)(("c", i, "l"), arg[1])
                    elif op == "delete" and arg[0] < len(lists) and type(lists[arg[0]]) is list and arg[1] < len(lists[arg[0]]):
                        del lists[arg[0]][arg[1]]
                        tx.delete(("c", *arg[:1], "l", arg[1]))
                    elif op in ("drop", "unlist") and arg < len(lists) and lists[arg] is not None:
                        for j in range(4):
                            if present(arg, j):
                                removed.setdefault((arg, j), []).append((version, seq, "delete", ("c", arg, "l"), None))
                        if op == "drop":
                            del items[arg]["l"]
                            tx.delete(("c", arg, "l"))
                        else:
                            items[arg]["l"] = "x"
                            tx.set(("c", arg, "l"), "x")
                    elif op == "tagged item" and items is not None and arg[0] < len(items):
                        items[arg[0]] = {"d": Decimal("1.0"), "l": list(arg[1])}
                        tx.set(("c", arg[0]), items[arg[0]])
                    else:
                        tx.incr("other")  # keeps seq numbers in step with the model
        assert task.state()["c"] == model
        for i in range(4):
            for j in range(4):
                got = [(e.version, e.seq, e.op, e.path, e.value) for e in task.history(("c", i, "l", j))
                       if e.op in ("append", "extend") or e.op == "delete" and e.path in (("c",), ("c", i, "l"))]
                want = sorted(created.get((i, j), []) + removed.get((i, j), []), key=lambda w: w[:2], reverse=True)
                assert got == want, (i, j)


def test_an_ancestor_set_changing_only_a_class_is_a_change_where_the_class_is_unknown(store_target: str) -> None:
    """With unknown_types="keep", a process without the class (as the CLI) lists an ancestor's set that left
    an enum where the int of its value was, and not a later one that left the same enum again."""
    with eventckpt.open(store_target) as store:
        task = store.stream("t")
        task.save({"cfg": {"mode": 1}})
        for _ in range(2):
            with task.transaction() as tx:
                tx.set("cfg", {"mode": 0})
    with RawSQL(store_target) as raw:  # what a program with the class stored
        raw.execute("UPDATE events SET value = ? WHERE version > 1 AND path = '$.cfg'",
                    ('{"mode": {"$enum": ["tests.gone.Mode", 1]}}',))
    with eventckpt.open(store_target, unknown_types="keep") as store:
        entries = store.stream("t").history(("cfg", "mode"))
        assert [(e.version, e.value) for e in entries] == [(2, Unregistered("enum", "tests.gone.Mode", 1)), (1, 1)]
    with eventckpt.open(store_target) as store:
        assert [e.version for e in store.stream("t").history(("cfg", "mode"))] == [1]


def test_an_append_then_a_set_of_the_list_to_something_else_in_one_version(store: eventckpt.Store) -> None:
    """An item appended, then removed by a set of its list to a non-list in one version, has both events in history."""
    task = store.stream("t")
    task.save({"m": [], "k": 0})  # v1
    with task.transaction() as tx:  # v2
        tx.append("m", {"n": 1})
        tx.set("m", "gone")
    assert ops(task.history("m[0]")) == [(2, "delete", ("m",), None), (2, "append", ("m",), {"n": 1})]
    assert ops(task.history("m[0].n")) == [(2, "delete", ("m",), None), (2, "append", ("m",), 1)]
    with task.transaction() as tx:  # v3: a list again, appended to and set to another list without the item
        tx.set("m", [])
        tx.append("m", 5)
        tx.set("m", [])
    assert ops(task.history("m[0]", since=3)) == [(3, "delete", ("m",), None), (3, "append", ("m",), 5)]


def test_an_ancestor_event_is_compared_with_the_path_right_before_it(store: eventckpt.Store) -> None:
    """An ancestor's set or delete is compared with what the path held right before it, not at the version before."""
    task = store.stream("t")
    task.save({"cfg": {"t": 0}, "x": {"a": 1}, "xs": [{"n": 1}, {"n": 2}]})  # v1
    with task.transaction() as tx:  # v2: the path created, then removed by its parent's set
        tx.set("cfg.model", "b")
        tx.set("cfg", {"t": 1})
    with task.transaction() as tx:  # v3: the path deleted, then its parent set without it: nothing left to remove
        tx.set("x", {"a": 2})
        tx.delete("x.a")
        tx.delete("x")
    with task.transaction() as tx:  # v4: two sets of the parent: the second leaves what the first set
        tx.set("cfg", {"model": "c"})
        tx.set("cfg", {"model": "c", "t": 2})
        tx.set("cfg", {"model": "d"})
    with task.transaction() as tx:  # v5: an earlier item deleted moves xs[1] to xs[0], which the set keeps
        tx.delete("xs[0]")
        tx.set("xs", [{"n": 2}])
    assert ops(task.history("cfg.model")) == [(4, "set", ("cfg",), "d"), (4, "set", ("cfg",), "c"), (2, "delete", ("cfg",), None),
                                              (2, "set", ("cfg", "model"), "b")]
    assert ops(task.history("x.a")) == [(3, "delete", ("x", "a"), None), (3, "set", ("x",), 2), (1, "set", ("x",), 1)]
    assert [(e.version, e.seq, e.op) for e in task.history("xs[0].n")] == [(5, 0, "delete"), (1, 2, "set")]


def test_an_incr_of_an_ancestor_already_replaced_is_not_a_change(store: eventckpt.Store) -> None:
    """An incr of an ancestor already set to a number in the same version leaves the path absent: it is not reported."""
    task = store.stream("t")
    task.save({"a": {"b": 1}, "l": [1]})  # v1
    with task.transaction() as tx:  # v2
        tx.set("a", 5)
        tx.incr("a", 1)
        tx.delete("l")
        tx.incr("l", 2)
    assert ops(task.history("a.b")) == [(2, "delete", ("a",), None), (1, "set", ("a",), 1)]
    assert ops(task.history("l[0]")) == [(2, "delete", ("l",), None), (1, "set", ("l",), 1)]
