"""Checkpointable: field capture, nested objects, clone, schema versions and migrations, save/load_into."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import apsw
import attrs
import pytest

import eventckpt

from .conftest import RawSQL
from eventckpt import Checkpointable, Migrations, MigrationError


class Memory(Checkpointable):
    def __init__(self) -> None:
        self.items: list[str] = []
        self._index: dict[str, int] = {}  # private: rebuilt, never saved


class Agent(Checkpointable):
    def __init__(self) -> None:
        self.name = "agent"
        self.memory = Memory()
        self.calls = 0
        self._client = object()  # not storable, and private: never captured


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_public_attributes_captured_private_excluded() -> None:
    """state_dict holds the public attributes, nested state dicts, and the class and version markers."""
    agent = Agent()
    agent.memory.items.append("hi")
    assert agent.state_dict() == {
        "name": "agent",
        "memory": {"items": ["hi"], "__class__": "Memory", "__version__": "1.0"},
        "calls": 0,
        "__class__": "Agent",
        "__version__": "1.0",
    }


def test_state_dict_is_independent() -> None:
    """Mutating a returned state dict never changes the object, and vice versa."""
    agent = Agent()
    state = agent.state_dict()
    state["memory"]["items"].append("x")
    agent.memory.items.append("y")
    assert agent.memory.items == ["y"] and state["memory"]["items"] == ["x"]


def test_load_state_dict_copies_and_loads_nested_in_place() -> None:
    """load_state_dict fills the existing nested object and never aliases the given dict."""
    source = Agent()
    source.memory.items.extend(["a", "b"])
    source.calls = 2
    target = Agent()
    nested = target.memory
    state = source.state_dict()
    target.load_state_dict(state)
    assert target.memory is nested and nested.items == ["a", "b"] and target.calls == 2
    state["memory"]["items"].append("c")
    assert nested.items == ["a", "b"]


def test_pinned_fields() -> None:
    """_checkpoint_fields pins the captured names; a stored key outside them is refused on load."""

    class Pinned(Checkpointable):
        def __init__(self) -> None:
            self.memory: list[str] = []
            self.call_count = 0
            self.scratch = "not saved"

        def _checkpoint_fields(self) -> list[str]:
            return ["memory", "call_count"]

    obj = Pinned()
    assert set(obj.state_dict()) == {"memory", "call_count", "__class__", "__version__"}
    with pytest.raises(eventckpt.InvalidArgumentError, match="scratch"):
        obj.load_state_dict({"memory": [], "scratch": 1})
    assert obj.scratch == "not saved"


def test_pinned_missing_attribute_is_a_clear_error() -> None:
    """A pinned field the object lacks raises InvalidArgumentError naming it."""

    class Broken(Checkpointable):
        def _checkpoint_fields(self) -> list[str]:
            return ["absent"]

    with pytest.raises(eventckpt.InvalidArgumentError, match="absent"):
        Broken().state_dict()


def test_load_refuses_other_class_and_private_keys() -> None:
    """State of another class, or a key naming a private attribute, is refused and nothing changes."""
    agent = Agent()
    with pytest.raises(eventckpt.InvalidArgumentError, match="Memory"):
        agent.load_state_dict({"__class__": "Memory", "__version__": "1.0", "items": []})
    with pytest.raises(eventckpt.InvalidArgumentError, match="_client"):
        agent.load_state_dict({"calls": 5, "_client": None})
    assert agent.calls == 0


def test_load_is_all_or_nothing_across_nested_objects() -> None:
    """A bad nested state leaves both the outer and the nested object unchanged."""
    agent = Agent()
    bad = {"calls": 9, "memory": {"__class__": "Other", "__version__": "1.0", "items": ["x"]}}
    with pytest.raises(eventckpt.InvalidArgumentError):
        agent.load_state_dict(bad)
    assert agent.calls == 0 and agent.memory.items == []


def test_nested_state_without_an_object_to_load_into() -> None:
    """Stored data never chooses a class: a nested state needs a Checkpointable already in place."""
    agent = Agent()
    agent.memory = None  # type: ignore[assignment]
    with pytest.raises(eventckpt.InvalidArgumentError, match="no Checkpointable"):
        agent.load_state_dict(Agent().state_dict())


def test_clone_is_deep_and_independent() -> None:
    """clone() gives a new object with equal state sharing nothing with the original."""
    agent = Agent()
    agent.memory.items.append("hello")
    twin = agent.clone()
    assert twin is not agent and twin.memory is not agent.memory
    twin.memory.items.append("world")
    assert agent.memory.items == ["hello"] and twin.memory.items == ["hello", "world"]
    assert twin.state_dict() != agent.state_dict()


def test_clone_keeps_exact_types() -> None:
    """Tuples, sets, dataclasses and non-str keys survive a clone exactly (codec round trip, no pickle)."""

    class Typed(Checkpointable):
        def __init__(self) -> None:
            self.pair = (1, "a")
            self.tags = {"x", "y"}
            self.where = Point(1, 2)
            self.by_id = {1: "one"}

    twin = Typed().clone()
    assert twin.pair == (1, "a") and twin.tags == {"x", "y"} and twin.where == Point(1, 2) and twin.by_id == {1: "one"}


class Player(Checkpointable):
    """A class at schema version VERSION (subclasses move it)."""

    VERSION = "2.0"

    def __init__(self) -> None:
        self.score = 0
        self.level = "novice"

    def _checkpoint_version(self) -> str:
        return self.VERSION


def old_state(version: str = "1.0", **fields: Any) -> dict[str, Any]:
    return {**fields, "__class__": "Player", "__version__": version}


def test_migration_chain_runs_in_order() -> None:
    """State saved at 1.0 is migrated 1.0 -> 1.5 -> 2.0 on load; the object sees the current schema."""
    migrations = Migrations()

    def rename(state: dict[str, Any]) -> dict[str, Any]:
        state["score"] = state.pop("points", 0)
        return state

    def scale(state: dict[str, Any]) -> dict[str, Any]:
        state["score"] *= 10
        return state

    migrations.register("Player", "1.0", rename, to_version="1.5")
    migrations.register("Player", "1.5", scale)
    obj = Player()
    obj.load_state_dict(old_state(points=4, level="pro"), migrations=migrations)
    assert (obj.score, obj.level) == (40, "pro")


def test_missing_migration_is_a_migration_error() -> None:
    """No chain from the stored version raises MigrationError naming the class and versions."""

    class Player3(Player):
        VERSION = "3.0"

        def _checkpoint_name(self) -> str:
            return "Player"

    migrations = Migrations()
    migrations.register("Player", "1.0", lambda s: s, to_version="2.0")
    obj = Player3()
    with pytest.raises(MigrationError) as info:
        obj.load_state_dict(old_state(score=1), migrations=migrations)
    assert info.value.class_name == "Player" and info.value.found == "1.0" and info.value.wanted == "3.0"
    assert "'2.0'" in str(info.value)
    assert obj.score == 0


def test_failing_or_looping_migration() -> None:
    """A migration that raises, returns a non-dict or loops raises MigrationError; the object is unchanged."""
    for steps in ({"1.0": (lambda s: 1 / 0, None)}, {"1.0": (lambda s: None, None)},
                  {"1.0": (lambda s: s, "1.5"), "1.5": (lambda s: s, "1.0")}):
        migrations = Migrations()
        for version, (fn, to) in steps.items():
            migrations.register("Player", version, fn, to_version=to)
        obj = Player()
        with pytest.raises(MigrationError):
            obj.load_state_dict(old_state(score=1), migrations=migrations)
        assert obj.score == 0


def test_default_registry_can_be_scoped(store: eventckpt.Store) -> None:
    """register_migration writes to default_migrations (used by load_into); scoped() undoes it on exit."""
    stream = store.stream("player")
    stream.save(old_state(points=7))
    with eventckpt.default_migrations.scoped():
        eventckpt.register_migration("Player", "1.0", lambda s: {"score": s["points"]})
        obj = Player()
        stream.load_into(obj)
        assert obj.score == 7
    with pytest.raises(MigrationError):
        stream.load_into(Player())


def test_save_and_load_into(store: eventckpt.Store) -> None:
    """CheckpointStore.save accepts a Checkpointable; load_into restores it in place from any version."""
    stream = store.stream("agent")
    agent = Agent()
    agent.memory.items.append("one")
    stream.save(agent)
    agent.memory.items.append("two")
    agent.calls = 2
    stream.save(agent)
    agent.memory.items.clear()
    cp = stream.load_into(agent, 1)
    assert cp.version == 1 and agent.memory.items == ["one"] and agent.calls == 0
    stream.load_into(agent)
    assert agent.memory.items == ["one", "two"] and agent.calls == 2
    cp.values["memory"]["items"].append("x")  # the returned checkpoint does not alias the object
    assert agent.memory.items == ["one", "two"]


def test_saved_object_is_plain_json(store: eventckpt.Store, store_target: str) -> None:
    """A saved object is readable JSON in the file (never pickle): nested values go through the codec."""

    class Rich(Checkpointable):
        def __init__(self) -> None:
            self.pair = (1, 2)
            self.where = Point(3, 4)

    store.stream("rich").save(Rich())
    with RawSQL(store_target) as raw:
        values = dict(raw.execute("SELECT path, value FROM events"))
    assert values["$.pair"] == '{"$tuple":[1,2]}'
    assert '"x":3' in values["$.where"] and "pickle" not in str(values)


def test_unstorable_public_attribute_names_the_field(store: eventckpt.Store) -> None:
    """A public attribute the codec cannot store raises SerializationError naming it; nothing is written."""

    class Leaky(Checkpointable):
        def __init__(self) -> None:
            self.ok = 1
            self.client = object()

    stream = store.stream("leaky")
    with pytest.raises(eventckpt.SerializationError, match="client"):
        stream.save(Leaky())
    assert stream.version == 0


def test_load_into_a_dict_and_bad_targets(store: eventckpt.Store) -> None:
    """load_into fills a plain dict in place; other objects, and an empty stream, are refused."""
    stream = store.stream("plain")
    with pytest.raises(eventckpt.StreamNotFoundError):
        stream.load_into({})
    stream.save({"a": 1})
    target = {"stale": True}
    stream.load_into(target)
    assert target == {"a": 1}
    with pytest.raises(eventckpt.InvalidArgumentError):
        stream.load_into(object())


@attrs.define
class AttrsAgent(Checkpointable):
    messages: list[str] = attrs.Factory(list)
    steps: int = 0
    _client: Any = None


@dataclasses.dataclass(slots=True)
class SlotsAgent(Checkpointable):
    messages: list[str] = dataclasses.field(default_factory=list)
    steps: int = 0


@pytest.mark.parametrize("cls", [AttrsAgent, SlotsAgent])
def test_slotted_checkpointable_captures_its_public_slots(store: eventckpt.Store, cls: type) -> None:
    """A slotted Checkpointable (attrs @define, @dataclass(slots=True)) saves, clones and restores its public slots."""
    agent = cls(["hi", "search"], 2)
    assert agent.state_dict() == {"messages": ["hi", "search"], "steps": 2,
                                  "__class__": cls.__name__, "__version__": "1.0"}
    assert agent.clone() == agent
    stream = store.stream("slots")
    stream.save(agent)
    fresh = cls()
    stream.load_into(fresh)
    assert fresh == agent and stream.state()["messages"] == ["hi", "search"]


class LazyAgent(Checkpointable):
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.memory: Memory | None = None  # created on first use


def test_rollback_restores_the_saved_object_exactly(store: eventckpt.Store) -> None:
    """rollback_on_error removes attributes the failed block created and puts None back where a sub-object was set."""
    stream = store.stream("agent")
    agent = LazyAgent()
    agent.messages.append("hi")
    with pytest.raises(RuntimeError):
        with stream.rollback_on_error(agent):
            agent.messages.append("half-done")
            agent.memory = Memory()
            agent.pending_plan = ["charge card"]  # type: ignore[attr-defined]
            raise RuntimeError("tool failed")
    assert agent.messages == ["hi"] and agent.memory is None and not hasattr(agent, "pending_plan")
    stream.save(agent)
    assert stream.state() == stream.state(1) == {"messages": ["hi"], "memory": None, "__class__": "LazyAgent", "__version__": "1.0"}
    agent.extra = 1  # type: ignore[attr-defined]
    agent.load_state_dict(stream.state())  # any other load keeps what the state lacks (a class may have grown)
    assert agent.extra == 1 and stream.load_into(agent, 1) and agent.extra == 1  # type: ignore[attr-defined]


class SearchTool(Checkpointable):
    def __init__(self, agent: Any = None) -> None:
        self.agent = agent  # a back-reference to the owner: a cycle
        self.calls = 0


class ToolAgent(Checkpointable):
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.search = SearchTool(self)


def test_a_cycle_of_checkpointables_is_a_serialization_error(store: eventckpt.Store) -> None:
    """A reference cycle through Checkpointables raises SerializationError naming its path; nothing is written."""
    agent = ToolAgent()
    for call in (agent.state_dict, agent.clone, lambda: store.stream("a").save(agent)):
        with pytest.raises(eventckpt.SerializationError, match="cycle") as caught:
            call()
        assert caught.value.path == ("search", "agent")
    assert store.stream("a").version == 0


class Measured(Checkpointable):
    def __init__(self) -> None:
        self.loss = float("nan")
        self.steps = [1, 2]


def test_state_dict_and_clone_copy_a_nan() -> None:
    """state_dict() and clone() copy a NaN (a copy is not storage: a store opened with allow_nan=True saves
    it, any other refuses it when it is saved)."""
    import math

    agent = Measured()
    assert math.isnan(agent.state_dict()["loss"]) and math.isnan(agent.clone().loss)
