"""rollback_on_error and the @checkpoint decorator: saves around risky blocks and every N calls."""

from __future__ import annotations

import asyncio
import threading

import pytest

import eventckpt
from eventckpt import Checkpointable

from .conftest import RawSQL


class Counter(Checkpointable):
    def __init__(self) -> None:
        self.history: list[str] = []
        self.n = 0

    def step(self, msg: str) -> str:
        self.history.append(msg)
        self.n += 1
        return f"#{self.n}"


def test_rollback_restores_and_reraises(store: eventckpt.Store) -> None:
    """The block's exception propagates unchanged and the object is back at the saved state."""
    stream = store.stream("t")
    obj = Counter()
    obj.step("a")
    error = RuntimeError("API call failed")
    with pytest.raises(RuntimeError) as info:
        with stream.rollback_on_error(obj) as cp:
            assert cp.version == 1
            obj.step("CORRUPTED")
            raise error
    assert info.value is error
    assert obj.history == ["a"] and obj.n == 1


def test_rollback_saves_only_when_changed(store: eventckpt.Store) -> None:
    """No new version when the object equals the head; one when it changed since."""
    stream = store.stream("t")
    obj = Counter()
    with stream.rollback_on_error(obj):
        pass
    with stream.rollback_on_error(obj):
        pass
    assert stream.version == 1
    obj.step("b")
    with stream.rollback_on_error(obj, name="before b2", metadata={"node": "tools"}) as cp:
        obj.step("in block")
    assert stream.version == 2 and cp.name == "before b2" and cp.metadata == {"node": "tools"}
    assert obj.history == ["b", "in block"]  # a clean block keeps its changes (nothing saved after it)


def test_rollback_of_a_plain_dict(store: eventckpt.Store) -> None:
    """A dict is restored in place too (same object, old contents)."""
    state = {"messages": ["hi"]}
    stream = store.stream("d")
    with pytest.raises(KeyError):
        with stream.rollback_on_error(state):
            state["messages"].append("oops")
            state["extra"] = 1
            raise KeyError("x")
    assert state == {"messages": ["hi"]}


def test_rollback_of_a_tracked_state_drops_its_unsaved_edits(store: eventckpt.Store, store_target: str) -> None:
    """A tracked state goes back by dropping the block's recorded edits: the same object holds the saved
    version again, an unchanged one is not saved twice, and the next save writes only what came after."""
    stream = store.stream("t")
    stream.save({"messages": ["a"], "n": 1})
    state = stream.checkout()
    with stream.rollback_on_error(state):  # unchanged since the head: no new version
        pass
    assert stream.version == 1
    state["messages"].append("b")
    with pytest.raises(RuntimeError):
        with stream.rollback_on_error(state) as cp:
            assert cp.version == 2
            state["messages"].append("oops")
            state["n"] = 5
            raise RuntimeError()
    assert dict(state) == {"messages": ["a", "b"], "n": 1} and type(state) is eventckpt.TrackedState
    state["messages"].append("c")
    assert stream.save(state).version == 3 and stream.state() == {"messages": ["a", "b", "c"], "n": 1}
    with RawSQL(store_target) as raw:
        rows = raw.execute("SELECT op, path FROM changes WHERE stream = 't' AND version = 3")
    assert [tuple(r) for r in rows] == [("append", "$.messages")]


def test_rollback_of_a_tracked_state_the_block_saved(store: eventckpt.Store) -> None:
    """When the block saved the tracked state, it goes back to the version saved before the block (as a
    change the next save records), and stays usable."""
    stream = store.stream("t")
    state = stream.checkout()
    state["messages"] = ["a"]
    with pytest.raises(RuntimeError):
        with stream.rollback_on_error(state) as cp:
            state["messages"].append("b")
            stream.save(state)
            raise RuntimeError()
    assert cp.version == 1 and dict(state) == {"messages": ["a"]}
    assert stream.save(state).version == 3 and stream.state() == stream.state(1) == {"messages": ["a"]}


def test_rollback_restores_to_the_version_it_saved(store: eventckpt.Store) -> None:
    """Another writer moving the head during the block does not change what the object goes back to."""
    stream = store.stream("t")
    obj = Counter()
    obj.step("mine")
    with pytest.raises(ValueError):
        with stream.rollback_on_error(obj):
            stream.save({"history": ["someone else"], "n": 99})
            raise ValueError()
    assert obj.history == ["mine"] and obj.n == 1


def test_failed_restore_raises_rollback_error(store: eventckpt.Store) -> None:
    """If restoring fails too, RollbackError carries the block's exception; nothing is swallowed."""
    stream = store.stream("t")
    obj = Counter()
    original = RuntimeError("block failed")
    with pytest.raises(eventckpt.RollbackError) as info:
        with stream.rollback_on_error(obj):
            store.close()
            raise original
    assert info.value.original is original and info.value.version == 1
    assert isinstance(info.value.__cause__, eventckpt.StoreClosedError)


def test_an_object_that_cannot_be_restored_is_refused_before_anything_is_saved(store: eventckpt.Store) -> None:
    """A dataclass (saved, but not restorable in place) is refused with InvalidArgumentError on entry, before
    a version is written and before the block runs; it used to be saved and then fail to roll back."""
    import dataclasses

    @dataclasses.dataclass
    class AgentState:
        step: int = 0

    stream = store.stream("t")
    ran = []
    with pytest.raises(eventckpt.InvalidArgumentError, match="restored in place"):
        with stream.rollback_on_error(AgentState()):
            ran.append(True)
    assert not ran and not stream.exists()


def test_decorator_saves_every_n_calls_as_auto(store: eventckpt.Store) -> None:
    """@checkpoint(stream, every=5) saves the first argument after calls 5, 10, 15, 20, marked auto."""
    stream = store.stream("agent")

    @eventckpt.checkpoint(stream, every=5)
    def process(agent: Counter, msg: str) -> str:
        return agent.step(msg)

    agent = Counter()
    replies = [process(agent, f"message {i}") for i in range(20)]
    assert replies[-1] == "#20"
    assert stream.list_versions() == [1, 2, 3, 4]
    assert [stream.state(v)["n"] for v in (1, 2, 3, 4)] == [5, 10, 15, 20]
    cp = stream.latest
    assert cp.auto and cp.metadata == {"function": process.__qualname__, "call": 20}


def test_decorator_with_store_and_key(store: eventckpt.Store) -> None:
    """Given a Store, the key names the stream (default: the function's qualified name)."""

    @eventckpt.checkpoint(store, key="my_agent", every=2)
    def keyed(agent: Counter) -> None:
        agent.step("k")

    @eventckpt.checkpoint(store, every=1)
    def unkeyed(agent: Counter) -> None:
        agent.step("u")

    agent = Counter()
    for _ in range(4):
        keyed(agent)
    unkeyed(agent)
    assert store.stream("my_agent").list_versions() == [1, 2]
    assert store.stream(f"{__name__}.{unkeyed.__qualname__}").state()["n"] == 5


def test_decorator_skips_failed_calls(store: eventckpt.Store) -> None:
    """A call that raises is not counted and saves nothing; its exception propagates."""
    stream = store.stream("flaky")

    @eventckpt.checkpoint(stream, every=2)
    def maybe(agent: Counter, fail: bool) -> None:
        agent.step("x")
        if fail:
            raise OSError("tool down")

    agent = Counter()
    maybe(agent, False)
    with pytest.raises(OSError):
        maybe(agent, True)
    assert stream.version == 0
    maybe(agent, False)
    assert stream.version == 1 and stream.latest.metadata["call"] == 2


def test_decorator_on_async_function(store: eventckpt.Store) -> None:
    """Async functions are wrapped as coroutines and save the same way."""
    stream = store.stream("async")

    @eventckpt.checkpoint(stream, every=3)
    async def step(agent: Counter, msg: str) -> str:
        await asyncio.sleep(0)
        return agent.step(msg)

    assert asyncio.iscoroutinefunction(step)

    async def main() -> None:
        agent = Counter()
        for i in range(7):
            await step(agent, str(i))

    asyncio.run(main())
    assert stream.list_versions() == [1, 2] and stream.state()["n"] == 6 and stream.latest.auto


def test_decorator_counts_calls_from_threads(store: eventckpt.Store) -> None:
    """Calls from several threads are counted once each: 4 x 25 calls with every=10 make 10 versions."""
    stream = store.stream("threads")

    @eventckpt.checkpoint(stream, every=10)
    def work(state: dict) -> None:
        pass

    threads = [threading.Thread(target=lambda: [work({"k": 1}) for _ in range(25)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert stream.version == 10


def test_decorator_bad_arguments(store: eventckpt.Store) -> None:
    """Bad every/target/key and a call without a first argument raise InvalidArgumentError."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.checkpoint(store.stream("s"), every=0)
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.checkpoint("not a store")  # type: ignore[arg-type]
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.checkpoint(store.stream("s"), key="other")

    @eventckpt.checkpoint(store.stream("s"), every=1)
    def nothing() -> None:
        pass

    with pytest.raises(eventckpt.InvalidArgumentError):
        nothing()
    assert store.stream("s").version == 0
