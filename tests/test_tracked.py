"""Tracked state (stream.checkout()): every in-place mutation is recorded as the events save() commits,
what has no exact event falls back to a whole-value set, and a stale tracked state is refused."""

from __future__ import annotations

import copy
import dataclasses
import enum
import heapq
import json
import pickle
import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import orjson
import pytest

import eventckpt
from eventckpt import TrackedDict, TrackedList, TrackedState

from .conftest import RawSQL, strict_equal


def events_of(target: str, version: int, stream: str = "t") -> list[tuple[str, str, Any]]:
    """The (op, path, decoded value) rows stored for one version, read beside eventckpt with plain SQL."""
    with RawSQL(target) as raw:
        rows = raw.execute("SELECT op, path, value FROM changes WHERE stream = ? AND version = ? ORDER BY seq",
                           (stream, version))
        decode = json.loads if raw.kind == "sqlite" else (lambda v: v)  # PostgreSQL's driver decodes jsonb
    return [(op, p, decode(v) if v is not None else None) for op, p, v in rows]


BASE = {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}],
        "scratch": {"k1": 1, "k2": "two"}, "items": [0, 1, 2, 3, 4], "step": 1}

# (name, mutation of the tracked state, the events it must store)
MUTATIONS: list[tuple[str, Callable[[Any], Any], list[tuple[str, str, Any]]]] = [
    ("dict set new key", lambda s: s["scratch"].__setitem__("k3", [1]), [("set", "$.scratch.k3", [1])]),
    ("dict set existing key", lambda s: s["scratch"].__setitem__("k1", 3), [("set", "$.scratch.k1", 3)]),
    ("top-level set", lambda s: s.__setitem__("step", 2), [("set", "$.step", 2)]),
    ("top-level key starting with $", lambda s: s.pop("step") and s.__setitem__("$ref", 1), [("delete", "$.step", None), ("set", '$."$ref"', 1)]),
    ("top-level +=", lambda s: s.__setitem__("step", s["step"] + 1), [("set", "$.step", 2)]),
    ("dict del", lambda s: s["scratch"].__delitem__("k2"), [("delete", "$.scratch.k2", None)]),
    ("top-level del", lambda s: s.__delitem__("items"), [("delete", "$.items", None)]),
    ("dict pop", lambda s: s["scratch"].pop("k1"), [("delete", "$.scratch.k1", None)]),
    ("dict pop missing with default", lambda s: s["scratch"].pop("nope", None), []),
    ("dict popitem", lambda s: s["scratch"].popitem(), [("delete", "$.scratch.k2", None)]),
    ("dict clear", lambda s: s["scratch"].clear(), [("set", "$.scratch", {})]),
    ("root clear", lambda s: s.clear(), [("delete", "$.messages", None), ("delete", "$.scratch", None),
                                          ("delete", "$.items", None), ("delete", "$.step", None)]),
    ("dict update", lambda s: s["scratch"].update({"k1": 5}, k4=6), [("set", "$.scratch.k1", 5), ("set", "$.scratch.k4", 6)]),
    ("dict |=", lambda s: s.__setitem__("scratch", s["scratch"].__ior__({"k9": 9})), [("set", "$.scratch.k9", 9)]),
    ("setdefault missing", lambda s: s["scratch"].setdefault("log", []).append("x"),
     [("set", "$.scratch.log", []), ("append", "$.scratch.log", "x")]),
    ("setdefault present", lambda s: s["scratch"].setdefault("k1", 99), []),
    ("nested dict in list item", lambda s: s["messages"][1].__setitem__("content", "edited"),
     [("set", "$.messages[1].content", "edited")]),
    ("list append", lambda s: s["messages"].append({"role": "tool"}), [("append", "$.messages", {"role": "tool"})]),
    ("list extend", lambda s: s["items"].extend([5, 6]), [("extend", "$.items", [5, 6])]),
    ("list extend one", lambda s: s["items"].extend(iter([5])), [("append", "$.items", 5)]),
    ("list extend nothing", lambda s: s["items"].extend([]), []),
    ("list +=", lambda s: s.__setitem__("items", s["items"].__iadd__([7])), [("append", "$.items", 7)]),
    ("list *= 2", lambda s: s["items"].__imul__(2), [("extend", "$.items", [0, 1, 2, 3, 4])]),
    ("list *= 0", lambda s: s["items"].__imul__(0), [("truncate", "$.items", 0)]),
    ("list insert at end", lambda s: s["items"].insert(99, 5), [("append", "$.items", 5)]),
    ("list pop last", lambda s: s["items"].pop(), [("delete", "$.items[4]", None)]),
    ("list pop first", lambda s: s["items"].pop(0), [("delete", "$.items[0]", None)]),
    ("list pop negative", lambda s: s["items"].pop(-2), [("delete", "$.items[3]", None)]),
    ("list remove", lambda s: s["items"].remove(2), [("delete", "$.items[2]", None)]),
    ("list clear", lambda s: s["items"].clear(), [("truncate", "$.items", 0)]),
    ("list del item", lambda s: s["items"].__delitem__(1), [("delete", "$.items[1]", None)]),
    ("list del tail slice", lambda s: s["items"].__delitem__(slice(2, None)), [("truncate", "$.items", 2)]),
    ("list del front slice", lambda s: s["items"].__delitem__(slice(0, 2)),
     [("delete", "$.items[0]", None), ("delete", "$.items[0]", None)]),
    ("list del extended slice", lambda s: s["items"].__delitem__(slice(None, None, 2)),
     [("delete", "$.items[4]", None), ("delete", "$.items[2]", None), ("delete", "$.items[0]", None)]),
    ("list set item", lambda s: s["items"].__setitem__(1, "one"), [("set", "$.items[1]", "one")]),
    ("list set negative item", lambda s: s["items"].__setitem__(-1, 40), [("set", "$.items[4]", 40)]),
    ("list same-length slice", lambda s: s["items"].__setitem__(slice(1, 3), ["a", "b"]),
     [("set", "$.items[1]", "a"), ("set", "$.items[2]", "b")]),
    ("list extended-slice set", lambda s: s["items"].__setitem__(slice(0, None, 2), ["a", "b", "c"]),
     [("set", "$.items[0]", "a"), ("set", "$.items[2]", "b"), ("set", "$.items[4]", "c")]),
    ("list tail slice replace", lambda s: s["items"].__setitem__(slice(3, None), ["x", "y", "z"]),
     [("truncate", "$.items", 3), ("extend", "$.items", ["x", "y", "z"])]),
    ("list slice append", lambda s: s["items"].__setitem__(slice(5, 5), ["x"]), [("append", "$.items", "x")]),
    # no exact event: a set of the whole list
    ("list insert in the middle", lambda s: s["items"].insert(1, "new"), [("set", "$.items", [0, "new", 1, 2, 3, 4])]),
    ("list grow a middle slice", lambda s: s["items"].__setitem__(slice(0, 1), ["a", "b"]),
     [("set", "$.items", ["a", "b", 1, 2, 3, 4])]),
    ("list sort", lambda s: s["items"].sort(reverse=True), [("set", "$.items", [4, 3, 2, 1, 0])]),
    ("list reverse", lambda s: s["items"].reverse(), [("set", "$.items", [4, 3, 2, 1, 0])]),
    ("nested list sort", lambda s: s["messages"].sort(key=lambda m: m["content"], reverse=True),
     [("set", "$.messages", [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "hi"}])]),
]


@pytest.mark.parametrize("mutate, expected", [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_every_mutation_kind_is_recorded(store: eventckpt.Store, store_target: str, mutate: Callable[[Any], Any],
                                         expected: list[tuple[str, str, Any]]) -> None:
    """Each mutation of a tracked state is stored as exactly the expected events, and the stored state
    equals the live one (the same mutation applied to a plain copy)."""
    stream = store.stream("t")
    stream.save(copy.deepcopy(BASE))
    state = stream.checkout()
    model = copy.deepcopy(BASE)
    mutate(state)
    mutate(model)
    assert state == model
    stream.save(state)
    assert events_of(store_target, 2) == expected
    assert strict_equal(stream.state(), model) and strict_equal(state.plain(), model)


def test_checkout_is_plain_data_to_everyone(store: eventckpt.Store, store_target: str) -> None:
    """A checkout is a dict of dicts and lists (subclasses), json and orjson write it as plain data,
    and saving it to another stream stores plain data (it is compared there, as any dict)."""
    stream = store.stream("t")
    stream.save(copy.deepcopy(BASE))
    state = stream.checkout()
    assert isinstance(state, dict) and isinstance(state["messages"], list) and isinstance(state["scratch"], dict)
    assert type(state) is TrackedState and type(state["messages"]) is TrackedList
    assert type(state["messages"][0]) is TrackedDict
    assert json.loads(json.dumps(state)) == BASE and orjson.loads(orjson.dumps(state)) == BASE
    assert state == BASE and state.version == 1 and state.task_id == "t"
    other = store.stream("other")
    other.save(state)
    assert strict_equal(other.state(), BASE)
    assert [op for op, _, _ in events_of(store_target, 1, "other")] == ["set"] * 4


def test_copies_of_nodes_are_plain_and_record_nothing(store: eventckpt.Store, store_target: str) -> None:
    """copy.copy, copy.deepcopy, pickle, dict.copy and slices give plain data: changing them records
    nothing, while changing a node reached through a shallow copy is a change of the state."""
    stream = store.stream("t")
    stream.save(copy.deepcopy(BASE))
    state = stream.checkout()
    deep, shallow = copy.deepcopy(state), copy.copy(state["scratch"])
    assert type(deep) is dict and type(deep["messages"]) is list and type(shallow) is dict
    unpickled = pickle.loads(pickle.dumps(state["messages"]))
    assert type(unpickled) is list and type(unpickled[0]) is dict
    for plain in (deep, shallow, state["scratch"].copy(), state["items"][:], unpickled):
        plain.clear()
    state_copy = copy.copy(state)
    state_copy["messages"].append("through a shallow copy")
    stream.save(state)
    assert events_of(store_target, 2) == [("append", "$.messages", "through a shallow copy")]
    assert stream.state()["scratch"] == BASE["scratch"] and stream.state()["items"] == BASE["items"]


def test_unexpressible_changes_in_a_row_are_one_set(store: eventckpt.Store, store_target: str) -> None:
    """Several changes without an exact event inside one container are one set of its final value, and
    changes elsewhere keep their order around it."""
    stream = store.stream("t")
    stream.save(copy.deepcopy(BASE))
    state = stream.checkout()
    state["items"].sort(reverse=True)
    state["items"].insert(0, "a")
    state["items"][1] = "b"  # inside the open set: no event of its own
    state["step"] = 2
    state["items"].append("z")
    stream.save(state)
    assert events_of(store_target, 2) == [("set", "$.items", ["a", "b", 3, 2, 1, 0]), ("set", "$.step", 2),
                                     ("append", "$.items", "z")]
    assert stream.state() == state


@dataclasses.dataclass
class Box:
    n: int
    tags: list[str]


def test_changes_inside_untrackable_values_fall_back_to_a_whole_set(store_target: str) -> None:
    """In-place changes of values that cannot report them (a set, a bytearray, a dataclass instance, a list
    inside a tuple) are found at the save and stored as a set of that whole value; unchanged ones cost
    nothing."""
    with eventckpt.open(store_target, types=[Box]) as store:
        stream = store.stream("t")
        stream.save({"tags": {1, 2}, "raw": bytearray(b"ab"), "box": Box(1, ["x"]), "pair": (1, [2]),
                     "same": {"s": {9}}})
        state = stream.checkout()
        state["tags"].add(3)
        state["raw"].extend(b"c")
        state["box"].tags.append("y")
        state["pair"][1].append(3)
        stream.save(state)
        stored = dict((p, v) for _, p, v in events_of(store_target, 2))
        assert sorted(stored) == ["$.box", "$.pair", "$.raw", "$.tags"]
        assert stream.state() == {"tags": {1, 2, 3}, "raw": bytearray(b"abc"), "box": Box(1, ["x", "y"]),
                                  "pair": (1, [2, 3]), "same": {"s": {9}}}
        state["box"].n = 2  # the next save compares with what the last one stored
        stream.save(state)
        assert [p for _, p, _ in events_of(store_target, 3)] == ["$.box"]
        stream.save(state)
        assert events_of(store_target, 4) == []


# (the state at v1, the watched value in it, a change of its container with no exact event)
WATCHED_IN_WHOLE_SETS: list[tuple[dict[str, Any], Callable[[Any], Any], Callable[[Any], Any]]] = [
    ({"jobs": ["b", {"a"}]}, lambda s: s["jobs"][1], lambda s: s["jobs"].reverse()),
    ({"jobs": [{"a"}, "b"]}, lambda s: s["jobs"][0], lambda s: s["jobs"].insert(0, "c")),
    ({"raw": [[1], bytearray(b"a")]}, lambda s: s["raw"][1], lambda s: s["raw"].sort(key=len)),
    ({"box": {1: Box(1, ["x"])}}, lambda s: s["box"][1], lambda s: s["box"].__setitem__(2, Box(2, []))),
    ({"deep": {"by_id": {1: {"s": {"a"}}}}}, lambda s: s["deep"]["by_id"][1]["s"],
     lambda s: s["deep"]["by_id"][1].__setitem__("k", 1)),
]


def _change(value: Any, back: bool) -> None:
    """An in-place change of a watched value (a set, a bytearray, a Box), or its undoing."""
    if isinstance(value, set):
        value.discard("x") if back else value.add("x")
    elif isinstance(value, bytearray):
        value[:] = value[:-1] if back else value + b"x"
    else:
        value.n = value.n - 1 if back else value.n + 1


@pytest.mark.parametrize("base, watched, whole", WATCHED_IN_WHOLE_SETS)
def test_a_watched_value_changed_back_after_a_whole_set_is_saved_as_it_is(
        store_target: str, base: dict[str, Any], watched: Callable[[Any], Any], whole: Callable[[Any], Any]) -> None:
    """A watched value changed, set whole with its container, then changed back is saved as it is at the save."""
    with eventckpt.open(store_target, types=[Box]) as store:
        stream = store.stream("t")
        stream.save({**base, "step": 0})
        state = stream.checkout()
        value = watched(state)
        whole(state)
        _change(value, back=False)
        state["step"] += 1  # the whole set is encoded now, holding the changed value
        _change(value, back=True)
        stream.save(state)
        assert strict_equal(stream.state(), state.plain())
        _change(value, back=False)  # and later saves go on comparing with what is stored
        stream.save(state)
        assert strict_equal(stream.state(), state.plain())


def test_a_whole_set_recorded_while_a_save_commits_keeps_its_watched_values(store_target: str) -> None:
    """A whole set recorded while a prepared save waits to commit is what the next save compares watched values with."""
    with eventckpt.open(store_target) as store:
        stream = store.stream("t")
        stream.save({"jobs": ["b", {"a"}], "step": 0})
        state = stream.checkout()
        running = state["jobs"][1]
        running.add("x")
        commit = stream.prepare_save(state)  # takes a set of {"a", "x"}
        running.add("y")
        state["jobs"].reverse()
        state["step"] += 1  # the whole list is encoded now, holding {"a", "x", "y"}
        running.discard("y")  # back to what the prepared save holds
        commit()
        stream.save(state)
        assert strict_equal(stream.state(), state.plain())


def test_dicts_whose_keys_are_not_paths_are_set_whole(store: eventckpt.Store, store_target: str) -> None:
    """A change inside a dict with a key that cannot be a path (not a str, or starting with "$") is a set of
    that whole dict, as save() stores it; a dict that gains such a key is set whole too."""
    stream = store.stream("t")
    stream.save({"by_id": {1: {"n": [1]}}, "plain": {"a": 1}})
    state = stream.checkout()
    state["by_id"][1]["n"].append(2)
    state["plain"]["$ref"] = 1
    stream.save(state)
    assert [(op, p) for op, p, _ in events_of(store_target, 2)] == [("set", "$.by_id"), ("set", "$.plain")]
    assert strict_equal(stream.state(), {"by_id": {1: {"n": [1, 2]}}, "plain": {"a": 1, "$ref": 1}})
    del state["plain"]["$ref"]
    state["plain"]["b"] = 2
    stream.save(state)
    assert events_of(store_target, 3) == [("set", "$.plain", {"a": 1, "b": 2})]


def test_the_next_save_commits_only_the_new_changes(store: eventckpt.Store, store_target: str) -> None:
    """After a save, the same tracked object keeps tracking: the next version holds only what changed since."""
    stream = store.stream("t")
    state = stream.checkout()
    assert state == {} and state.version == 0
    state["messages"] = []
    stream.save(state)
    for i in range(3):
        state["messages"].append({"i": i})
        state["step"] = i
        stream.save(state, {"input_tokens": 10 * (i + 1)})
    assert state.version == 4
    assert events_of(store_target, 4) == [("append", "$.messages", {"i": 2}), ("set", "$.step", 2)]
    assert stream.state() == state and stream.get(4).token_usage == {"input_tokens": 30}
    stream.save(state)
    assert events_of(store_target, 5) == [] and stream.get(5).token_usage == {"input_tokens": 30}


def test_save_options_mean_the_same_for_tracked_states(store: eventckpt.Store) -> None:
    """metadata, name, auto, checkpoint_id, tool_calls, token_usage and expected_version act as in a plain save."""
    stream = store.stream("t")
    stream.save({"n": 0}, {"input_tokens": 5})
    state = stream.checkout()
    state["n"] = 1
    call = eventckpt.ToolCall("search", {"q": "x"}, result=1)
    cp = stream.save(state, {"input_tokens": 7}, metadata={"node": "agent"}, name="after", auto=True,
                     checkpoint_id="c-1", tool_calls=[call], expected_version=1)
    assert (cp.version, cp.name, cp.auto, cp.metadata, cp.token_usage) == (2, "after", True, {"node": "agent"}, {"input_tokens": 7})
    assert stream.find("c-1").version == 2 and [c.name for c in stream.tool_calls(version=2)] == ["search"]
    state["n"] = 2
    with pytest.raises(eventckpt.ConflictError):
        stream.save(state, expected_version=1)
    assert stream.save(state).token_usage == {"input_tokens": 7} and stream.state() == {"n": 2}


def test_a_stale_tracked_state_is_refused(store: eventckpt.Store) -> None:
    """When another save, a transaction or a rollback moved the head, saving the tracked state raises
    ConflictError and writes nothing; refresh() (or a new checkout) continues from the new head."""
    stream = store.stream("t")
    stream.save({"n": 0, "log": []})
    for move in (lambda: stream.save({"n": 5, "log": []}), lambda: stream.transaction().__exit__(None, None, None),
                 lambda: stream.rollback(1)):
        state = stream.checkout()
        state["log"].append("mine")
        move()
        head = stream.version
        with pytest.raises(eventckpt.ConflictError) as info:
            stream.save(state)
        assert (info.value.expected, info.value.actual) == (head - 1, head)
        assert stream.version == head and "mine" not in stream.state()["log"]
        assert state.refresh() is state and state == stream.state() and state.version == head
        state["log"].append("mine")
        stream.save(state)
        assert stream.state()["log"] == ["mine"]
        stream.save({"n": 0, "log": []})


def test_a_write_from_another_process_makes_the_tracked_state_stale(store_target: str) -> None:
    """A version committed by another process is caught at save (the cached head is not trusted blindly)."""
    with eventckpt.open(store_target) as store:
        stream = store.stream("t")
        stream.save({"log": []})
        state = stream.checkout()
        state["log"].append("here")
        child = textwrap.dedent("""
            import sys, eventckpt
            with eventckpt.open(sys.argv[1]) as store:
                with store.stream("t").transaction() as tx:
                    tx.append("log", "there")
        """)
        done = subprocess.run([sys.executable, "-c", child, store_target], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        with pytest.raises(eventckpt.ConflictError):
            stream.save(state)
        assert stream.state() == {"log": ["there"]}
        state.refresh()["log"].append("here")
        stream.save(state)
        assert stream.state() == {"log": ["there", "here"]}


def test_a_recreated_stream_at_the_same_version_is_refused(store: eventckpt.Store) -> None:
    """The head is identified by its stream too: a stream deleted and saved again to the same version
    number is not the head the tracked state was checked out from, and the ConflictError says it was
    deleted and created again (its versions alone are equal)."""
    stream = store.stream("t")
    stream.save({"log": ["a"]})
    state = stream.checkout()
    state["log"].append("b")
    store.delete_stream("t")
    stream.save({"log": ["other"]})
    with pytest.raises(eventckpt.ConflictError, match="deleted and created again") as info:
        stream.save(state)
    assert stream.state() == {"log": ["other"]}
    assert (info.value.expected, info.value.actual, info.value.recreated) == (1, 1, True)
    state.refresh()["log"].append("c")
    stream.save({"log": ["more"]})
    with pytest.raises(eventckpt.ConflictError, match="expected head version 1, but it is 2") as moved:
        stream.save(state)  # the same stream, only moved on
    assert not moved.value.recreated


def test_retention_does_not_make_a_tracked_state_stale(store: eventckpt.Store) -> None:
    """Pruning old versions rewrites checksums but keeps the head: a tracked state of it still saves."""
    stream = store.stream("t")
    for i in range(4):
        stream.save({"log": list(range(i))}, auto=True)
    state = stream.checkout()
    state["log"].append("mine")
    assert stream.prune(keep_last=1).removed
    stream.save(state)
    assert stream.state() == {"log": [0, 1, 2, "mine"]} and stream.list_versions() == [4, 5]


def test_a_failed_save_can_be_retried(store: eventckpt.Store) -> None:
    """A save that fails after folding its events (a duplicate checkpoint id) writes nothing, and saving
    again stores the state exactly once (the recorded values are not reused after being folded)."""
    stream = store.stream("t")
    stream.save({"n": 0}, checkpoint_id="taken")
    state = stream.checkout()
    state["log"] = [1]
    state["log"].append(2)
    with pytest.raises(eventckpt.DuplicateCheckpointIdError):
        stream.save(state, checkpoint_id="taken")
    assert stream.version == 1
    stream.save(state)
    assert stream.state() == {"n": 0, "log": [1, 2]} == state


@pytest.mark.parametrize("mutate, path", [
    (lambda s: s.__setitem__("scratch", {"k": lambda: 0}), ("scratch", "k")),
    (lambda s: s["scratch"].__setitem__("k", [0, {"f": open}]), ("scratch", "k", 1, "f")),
    (lambda s: s["msgs"].append({"f": open}), ("msgs", 1, "f")),
    (lambda s: s["msgs"].extend([{"ok": 1}, {"f": open}]), ("msgs", 2, "f")),
    (lambda s: s["msgs"].insert(0, {"f": open}), ("msgs", 0, "f")),
    (lambda s: s["msgs"].__setitem__(0, {"f": open}), ("msgs", 0, "f")),
    (lambda s: s["msgs"][0].update(g=[open]), ("msgs", 0, "g", 0)),
    (lambda s: s["msgs"].__setitem__(slice(0, 1), [1, {"f": open}]), ("msgs", 1, "f")),
    (lambda s: s["scratch"].__setitem__(open, 1), ("scratch", open)),
])
def test_bad_values_name_their_path_in_the_state(store: eventckpt.Store, mutate, path: tuple) -> None:
    """A value (or key) a tracked state cannot store raises SerializationError naming its full path in the
    state, and the state is unchanged."""
    stream = store.stream("t")
    stream.save({"msgs": [{"a": 1}], "scratch": {}})
    state = stream.checkout()
    with pytest.raises(eventckpt.SerializationError) as info:
        mutate(state)
    assert info.value.path == path
    assert state == {"msgs": [{"a": 1}], "scratch": {}}
    stream.save(state)
    assert stream.state(2) == {"msgs": [{"a": 1}], "scratch": {}}


def test_bad_values_and_keys_fail_at_the_mutation(store: eventckpt.Store) -> None:
    """A value that cannot be stored, or a top-level key that cannot be a path, raises at the mutation,
    and the state and what it recorded are unchanged."""
    stream = store.stream("t")
    stream.save({"log": [1], "d": {}})
    state = stream.checkout()
    with pytest.raises(eventckpt.SerializationError):
        state["log"].append(lambda: 0)
    with pytest.raises(eventckpt.SerializationError):
        state["d"]["x"] = {"nan": float("nan")}
    with pytest.raises(eventckpt.SerializationError):
        state["d"][object()] = 1
    with pytest.raises(eventckpt.InvalidArgumentError):
        state['bad"key'] = 1
    with pytest.raises(eventckpt.InvalidArgumentError):
        state[3] = 1
    with pytest.raises(IndexError):
        state["log"].pop(5)
    assert state == {"log": [1], "d": {}}
    stream.save(state)
    assert stream.get(2).values == {"log": [1], "d": {}} and len(stream) == 2



class Role(str, enum.Enum):
    USER = "user"


def _bump(d: dict[Any, Any], key: Any) -> None:
    d[key] += 1


@pytest.mark.parametrize("mutate", [
    lambda s: _bump(s["counts"], Role.USER),
    lambda s: s["counts"].pop(Role.USER),
    lambda s: s["counts"].__delitem__(Role.USER),
    lambda s: s["counts"].update({Role.USER: 5}),
    lambda s: s["nested"].__setitem__(Role.USER, {"n": 1}) or s["nested"]["user"].__setitem__("n", 2),
    lambda s: _bump(s["nested"][Role.USER], "n") or s["nested"]["user"]["tags"].append(1),
    lambda s: s.pop(Role.USER),
    lambda s: s.__setitem__("odd", {Role.USER: 1}) or s["odd"].__setitem__("user", 2),
    lambda s: s.__setitem__("odd", {Role.USER: 1}) or s["odd"].pop("user"),
])
def test_a_key_set_through_an_equal_key_of_another_type_is_recorded_at_the_key_the_dict_holds(
        store: eventckpt.Store, mutate) -> None:
    """A dict set or popped through an equal key of another type (a str enum) records the key it holds."""
    stream = store.stream("t")
    stream.save({"counts": {"user": 0, "x": 1}, "nested": {"user": {"n": 0, "tags": []}}, "user": 1, "log": []})
    state = stream.checkout()
    mutate(state)
    for step in range(2):
        state["log"].append(step)
        stream.save(state)
        assert strict_equal(stream.state(), state.plain())
    assert strict_equal(stream.checkout().plain(), state.plain())


@pytest.mark.parametrize("mutate", [
    lambda s: s["cfg"].update({"model": "b", "new": 1, "client": object()}),
    lambda s: s["cfg"].__ior__({"model": "b", "client": object()}),
    lambda s: s["cfg"].update([("model", "b"), (object(), 1)]),
    lambda s: s.update({"step": 2, 'bad"key': 1}),
    lambda s: s.update(step=2, log=[lambda: 0]),
])
def test_a_failed_update_changes_nothing(store: eventckpt.Store, mutate) -> None:
    """update() and |= are all or nothing: one key or value that cannot be stored leaves every key as it was."""
    stream = store.stream("t")
    stream.save({"cfg": {"model": "a"}, "step": 1})
    state = stream.checkout()
    with pytest.raises((eventckpt.SerializationError, eventckpt.InvalidArgumentError)):
        mutate(state)
    assert state == {"cfg": {"model": "a"}, "step": 1}
    stream.save(state)
    assert stream.state(2) == {"cfg": {"model": "a"}, "step": 1}


def test_values_put_in_are_copied(store: eventckpt.Store, store_target: str) -> None:
    """Aliasing, the caller's side: a dict or list put into the state is copied, so changing the caller's
    object afterwards changes neither the state nor what is saved, and one object put at two places
    becomes two independent values."""
    stream = store.stream("t")
    stream.save({})
    state = stream.checkout()
    mine = {"tags": ["a"]}
    state["x"] = mine
    state["y"] = mine
    mine["tags"].append("caller")
    mine["new"] = 1
    assert state["x"] == {"tags": ["a"]} and state["x"] is not state["y"]
    state["x"]["tags"].append("x only")
    stream.save(state)
    assert stream.state() == {"x": {"tags": ["a", "x only"]}, "y": {"tags": ["a"]}}
    assert events_of(store_target, 2)[-1] == ("append", "$.x.tags", "x only")


def test_nodes_taken_out_or_aliased(store: eventckpt.Store, store_target: str) -> None:
    """Aliasing, the state's side: a node held in a variable is the state's node (changing it is recorded
    at its current path, even after items before it were removed); a node that left the state (popped,
    replaced, deleted) is detached, and changing it records nothing; moving a node copies it."""
    stream = store.stream("t")
    stream.save({"messages": [{"i": 0}, {"i": 1}, {"i": 2}], "cfg": {"a": 1}})
    state = stream.checkout()
    last, cfg = state["messages"][2], state["cfg"]
    popped = state["messages"].pop(0)
    last["seen"] = True  # now at index 1
    popped["seen"] = True  # no longer in the state
    state["cfg"] = {"a": 2}
    cfg["a"] = 99  # replaced: detached
    state["moved"] = state["messages"][0]  # a copy, not the same node
    state["messages"][0]["i"] = 10
    stream.save(state)
    assert events_of(store_target, 2) == [("delete", "$.messages[0]", None), ("set", "$.messages[1].seen", True),
                                     ("set", "$.cfg", {"a": 2}), ("set", "$.moved", {"i": 1}),
                                     ("set", "$.messages[0].i", 10)]
    assert stream.state() == {"messages": [{"i": 10}, {"i": 2, "seen": True}], "cfg": {"a": 2}, "moved": {"i": 1}}
    assert stream.state() == state


def test_bypassing_the_methods_is_not_recorded_and_a_plain_save_repairs_it(store: eventckpt.Store) -> None:
    """Documented limit: base-class methods called unbound and C functions writing into a list directly
    (heapq) are not seen by the tracker; a plain save of state.plain() compares everything and stores
    them, and refresh() continues tracking from there."""
    stream = store.stream("t")
    stream.save({"heap": [3, 5], "d": {}})
    state = stream.checkout()
    heapq.heappush(state["heap"], 1)
    dict.__setitem__(state["d"], "k", 1)
    state["d"]["seen"] = True
    stream.save(state)
    assert stream.state() == {"heap": [3, 5], "d": {"seen": True}}  # the two bypasses were not recorded
    stream.save(state.plain())
    assert stream.state() == {"heap": [1, 5, 3], "d": {"k": 1, "seen": True}} == state
    state.refresh()["heap"].append(7)
    stream.save(state)
    assert stream.state()["heap"] == [1, 5, 3, 7]


def test_checkout_after_reopen_and_of_a_fork(store_target: str) -> None:
    """A checkout reads the head from the file when nothing is cached, and a fork's checkout saves to the fork."""
    with eventckpt.open(store_target) as store:
        store.stream("t").save({"log": ["a"]})
        store.stream("t").save({"log": ["a", "b"]})
    with eventckpt.open(store_target) as store:
        stream = store.stream("t")
        state = stream.checkout()
        assert state == {"log": ["a", "b"]} and state.version == 2
        fork = stream.fork(at=1, task_id="f")
        forked = fork.checkout()
        forked["log"].append("f")
        fork.save(forked)
        state["log"].append("c")
        stream.save(state)
        assert fork.state() == {"log": ["a", "f"]} and stream.state() == {"log": ["a", "b", "c"]}
        stream.save(forked)  # another stream's tracked state: plain data here
        assert stream.state() == {"log": ["a", "f"]}


def test_the_head_never_shares_mutable_values_with_the_tracked_state(store: eventckpt.Store) -> None:
    """After a save, changing the tracked state in place (nested lists of appended items, a set, a value
    set whole by a sort) changes neither the saved version nor the head a plain read returns."""
    stream = store.stream("t")
    stream.save({"messages": [], "tags": {1}})
    state = stream.checkout()
    state["messages"].append({"parts": [{"t": "a"}]})
    state["messages"].append({"parts": [{"t": "b"}]})
    state["messages"].sort(key=lambda m: m["parts"][0]["t"], reverse=True)
    state["tags"].add(2)
    stream.save(state)
    saved = {"messages": [{"parts": [{"t": "b"}]}, {"parts": [{"t": "a"}]}], "tags": {1, 2}}
    state["messages"][0]["parts"][0]["t"] = "changed"
    state["messages"][1]["parts"].append({"t": "more"})
    state["tags"].add(3)
    assert stream.state() == saved == stream.get(2).values
    stream.save(state)
    assert stream.state() == state and stream.state(2) == saved


def test_prepared_saves_of_one_tracked_state_build_on_each_other(store: eventckpt.Store) -> None:
    """A second prepare_save of a tracked state builds on the version the first will make: run in order both
    commit; another writer moving the head between them still gives ConflictError."""
    stream = store.stream("t")
    stream.save({"log": []})
    state = stream.checkout()
    state["log"].append(1)
    first = stream.prepare_save(state)
    state["log"].append(2)
    second = stream.prepare_save(state, name="second")
    assert (first().version, second().version) == (2, 3)
    assert stream.state(2) == {"log": [1]} and stream.state() == {"log": [1, 2]} and state.version == 3
    state["log"].append(3)
    first = stream.prepare_save(state)
    state["log"].append(4)
    second = stream.prepare_save(state)
    assert first().version == 4
    stream.save({"log": ["other"]})  # another writer
    with pytest.raises(eventckpt.ConflictError):
        second()
    assert stream.state() == {"log": ["other"]}
    assert state.refresh() == {"log": ["other"]}


def test_a_prepared_save_after_one_that_did_not_commit_is_refused(store: eventckpt.Store) -> None:
    """The next prepared save of a tracked state is refused (ConflictError, nothing written) when the one it
    builds on failed or was never run; the edits of both stay recorded, and the next save commits them."""
    stream = store.stream("t")
    stream.save({"log": []})
    state = stream.checkout()
    state["log"].append(1)
    doomed = stream.prepare_save(state, expected_version=0)  # will fail: the head is 1
    state["log"].append(2)
    after = stream.prepare_save(state)
    with pytest.raises(eventckpt.ConflictError):
        doomed()
    with pytest.raises(eventckpt.ConflictError, match="did not commit"):
        after()
    assert stream.version == 1
    state["log"].append(3)
    assert stream.save(state).version == 2 and stream.state() == {"log": [1, 2, 3]}
    state["log"].append(4)
    never_run = stream.prepare_save(state)
    state["log"].append(5)
    out_of_order = stream.prepare_save(state)
    with pytest.raises(eventckpt.ConflictError, match="did not commit"):
        out_of_order()  # the save it builds on has not run: it never will
    with pytest.raises(eventckpt.ConflictError):
        never_run()
    assert stream.version == 2
    assert stream.save(state).version == 3 and stream.state() == {"log": [1, 2, 3, 4, 5]}
    assert stream.save(state).version == 4 and stream.state() == {"log": [1, 2, 3, 4, 5]}  # nothing left
