"""Every example of the four reference API documents (shared/reference/), adapted to eventckpt's names.

orbiter's CheckpointStore example is tests/test_save.py::test_orbiter_reference_example; agent-checkpoint's
diff and history examples belong to the log/history/diff work and are not repeated here.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import eventckpt
from eventckpt import Checkpoint, Checkpointable, Context, ToolRegistry, aio, meta


# -- 000 orbiter: Context --------------------------------------------------------------------------


def test_orbiter_context_example() -> None:
    """ctx.state.set / add_tokens / snapshot(metadata) / Context.restore(cp), as in orbiter's document."""
    ctx = Context("task-1")
    ctx.state.set("progress", "step 1")
    ctx.add_tokens({"input_tokens": 100})
    cp = ctx.snapshot(metadata={"step": 1})
    restored_ctx = Context.restore(cp)
    assert restored_ctx.state.get("progress") == "step 1"
    assert restored_ctx.token_usage == {"input_tokens": 100}


# -- 001 agentgit: named/automatic checkpoints, user id, tool invocations, summary, branching -------


def test_agentgit_checkpoint_example(store: eventckpt.Store) -> None:
    """Checkpoint(internal_session_id=1, checkpoint_name="Before tool call", session_state={"counter": 5},
    is_auto=True) is a save with name= and auto=; to_dict/from_dict round-trip it."""
    session = store.stream("internal-session-1")
    checkpoint = session.save({"counter": 5}, name="Before tool call", auto=True)
    assert (checkpoint.name, checkpoint.auto, checkpoint.values) == ("Before tool call", True, {"counter": 5})
    again = Checkpoint.from_dict(checkpoint.to_dict())
    assert (again.name, again.auto, again.values, again.created_at) == ("Before tool call", True, {"counter": 5},
                                                                         checkpoint.created_at)


def test_agentgit_from_internal_session(store: eventckpt.Store) -> None:
    """from_internal_session(session, checkpoint_name, is_auto, user_id, tool_invocations): the session's
    state and conversation history saved with a name, the owner in metadata and the tool calls recorded
    in the same version; has_tool_invocations / get_tool_track_position / get_summary read them back."""
    tools = ToolRegistry()
    tools.register("calculator", lambda expression: eval(expression, {"__builtins__": {}}))  # noqa: S307 - test tool
    session = store.stream("session-7")
    session.save({"session_state": {"counter": 1}, "conversation_history": [{"role": "user", "content": "2+2?"}]})
    call = tools.call("calculator", expression="2+2")
    cp = session.save(
        {"session_state": {"counter": 2},
         "conversation_history": [{"role": "user", "content": "2+2?"}, {"role": "tool", "content": "4"}]},
        name="after calculator", auto=False, metadata=meta(user_id=7), tool_calls=[call])
    assert cp.user_id == 7 and cp.values["conversation_history"][-1]["content"] == "4"
    assert bool(session.tool_calls(version=cp.version)) is True       # has_tool_invocations()
    assert bool(session.tool_calls(version=1)) is False
    assert len(session.tool_calls(upto=cp.version)) == 1              # get_tool_track_position()
    assert [c.result for c in session.tool_calls(upto=cp.version)] == [4]  # tool_invocations up to here
    assert "'after calculator' | manual" in cp.summary() and "user=7" in cp.summary()  # get_summary()


def test_agentgit_rollback_creates_a_branch(store: eventckpt.Store, tmp_path: Path) -> None:
    """Rolling back to a checkpoint branches instead of destroying history, and reverses the tool calls
    made since, newest first."""
    removed: list[str] = []
    tools = ToolRegistry()
    tools.register("write", lambda path: (tmp_path / path).write_text("x"),
                   reverse=lambda args, result: removed.append(args["path"]) or (tmp_path / args["path"]).unlink())
    session = store.stream("session")
    session.save({"counter": 0}, name="start")
    session.save({"counter": 1}, tool_calls=[tools.call("write", path="a")])
    session.save({"counter": 2}, tool_calls=[tools.call("write", path="b")])
    report = session.undo_tools(1, tools)
    branch = session.fork(at=1, task_id="session-branch")
    assert report.ok and removed == ["b", "a"]
    assert branch.state() == {"counter": 0} and session.state(3) == {"counter": 2}  # nothing destroyed
    assert session.rollback(1).version == 5 and session.state() == {"counter": 0}  # or in place, appended


# -- 002 llmfy: BaseCheckpointer --------------------------------------------------------------------


def test_llmfy_checkpointer(store_target: str) -> None:
    """save(checkpoint), load(session_id, checkpoint_id=None) latest/by id, list(session_id, limit=10)
    newest first, delete(session_id, checkpoint_id=None); metadata carries node_name and step."""

    async def main() -> None:
        checkpointer = await aio.open(store_target)
        saved = []
        for step, node in enumerate(["start", "plan", "act", "reflect"]):
            saved.append(await checkpointer.save("session-1", {"messages": [node] * (step + 1)},
                                                 metadata=meta(node=node, step=step)))
        latest = await checkpointer.load("session-1")
        assert latest.node == "reflect" and latest.step == 3 and latest.id == saved[-1].id
        by_id = await checkpointer.load("session-1", saved[1].id)
        assert by_id.values == {"messages": ["plan", "plan"]} and by_id.task_id == "session-1"
        assert by_id.created_at == saved[1].created_at                      # CheckpointMetadata.timestamp
        assert [cp.node for cp in await checkpointer.list("session-1", limit=10)] == ["reflect", "act", "plan", "start"]
        assert Checkpoint.from_dict(by_id.to_dict()).values == by_id.values  # to_dict / from_dict
        await checkpointer.delete("session-1", saved[0].id)
        assert await checkpointer.load("session-1", saved[0].id) is None
        await checkpointer.delete("session-1")
        assert await checkpointer.list("session-1") == []
        await checkpointer.close()

    asyncio.run(main())


# -- 003 agent-checkpoint ---------------------------------------------------------------------------


class MyAgent(Checkpointable):
    def __init__(self) -> None:
        self.memory: list[str] = []
        self.config: dict[str, Any] = {}
        self.call_count = 0

    def reply(self, msg: str) -> str:
        self.memory.append(msg)
        self.call_count += 1
        return f"Reply #{self.call_count}"


def test_agent_checkpoint_quick_start() -> None:
    """state_dict() / load_state_dict() into a new instance."""
    agent = MyAgent()
    agent.reply("hello")
    agent.reply("world")
    state = agent.state_dict()
    assert state == {"memory": ["hello", "world"], "config": {}, "call_count": 2, "__version__": "1.0", "__class__": "MyAgent"}
    new_agent = MyAgent()
    new_agent.load_state_dict(state)
    assert new_agent.call_count == 2
    assert new_agent.memory == ["hello", "world"]


def test_agent_checkpoint_manager(store_target: str) -> None:
    """CheckpointManager(backend="memory" | "file") is eventckpt.open(":memory:" | path); save(key, agent)
    / load(key, agent) / list_keys() / history(key, n) are stream(key).save / load_into / streams() /
    list_versions + get."""
    for target in (":memory:", store_target):
        with eventckpt.open(target) as manager:
            agent = MyAgent()
            agent.reply("hi")
            manager.stream("session_123").save(agent)
            new_agent = MyAgent()
            manager.stream("session_123").load_into(new_agent)
            assert new_agent.memory == ["hi"]
            assert manager.streams() == ["session_123"]
            history = [manager.stream("session_123").get(v) for v in manager.stream("session_123").list_versions()[-5:]]
            assert [(cp.id, cp.created_at.tzinfo is not None) for cp in history] == [("1", True)]


class ConversationAgent(Checkpointable):
    def __init__(self) -> None:
        self.history: list[str] = []
        self.tokens_used = 0

    def send(self, msg: str, tokens: int = 10) -> None:
        self.history.append(msg)
        self.tokens_used += tokens


def test_agent_checkpoint_rollback_methods(store: eventckpt.Store) -> None:
    """Method 1: save, then load on failure. Method 2: a context manager that saves before the block and
    restores on exception, suppressing nothing."""
    agent = ConversationAgent()
    agent.send("Hello", tokens=5)
    agent.send("How are you?", tokens=8)
    stream = store.stream("checkpoint_1")
    stream.save(agent)  # snapshot before risky call
    try:
        agent.send("CORRUPTED", tokens=9999)
        raise RuntimeError("API call failed mid-way")
    except RuntimeError:
        stream.load_into(agent)  # rollback -> state restored
    assert agent.tokens_used == 13
    assert agent.history == ["Hello", "How are you?"]

    suppressed = True
    try:
        with store.stream("before_risky_op").rollback_on_error(agent):
            agent.send("CORRUPTED", tokens=9999)
            raise RuntimeError("API call failed mid-way")
    except RuntimeError:
        suppressed = False
    assert not suppressed and agent.tokens_used == 13 and agent.history == ["Hello", "How are you?"]


def test_agent_checkpoint_decorator(store: eventckpt.Store) -> None:
    """@checkpoint(manager, key="my_agent", every=5): checkpoints saved at calls 5, 10, 15, 20."""

    @eventckpt.checkpoint(store, key="my_agent", every=5)
    def process(agent: MyAgent, msg: str) -> str:
        return agent.reply(msg)

    agent = MyAgent()
    for i in range(20):
        process(agent, f"message {i}")
    stream = store.stream("my_agent")
    assert [stream.get(v).metadata["call"] for v in stream.list_versions()] == [5, 10, 15, 20]
    assert all(stream.get(v).auto for v in stream.list_versions())


def test_agent_checkpoint_versioning_and_migrations(store: eventckpt.Store) -> None:
    """register_migration("MyAgent", from_version="1.0", fn=migrate_v1_to_v2) upgrades stored v1.0 state."""

    class OldAgent(Checkpointable):
        def __init__(self) -> None:
            self.points = 7

        def _checkpoint_name(self) -> str:
            return "MyAgent"

    class NewAgent(Checkpointable):
        def __init__(self) -> None:
            self.score = 0

        def _checkpoint_name(self) -> str:
            return "MyAgent"

        def _checkpoint_version(self) -> str:
            return "2.0"

    def migrate_v1_to_v2(state: dict[str, Any]) -> dict[str, Any]:
        state["score"] = state.pop("points", 0) * 10  # rename + scale
        return state

    store.stream("agent").save(OldAgent())
    with eventckpt.default_migrations.scoped():
        eventckpt.register_migration("MyAgent", from_version="1.0", fn=migrate_v1_to_v2)
        agent = NewAgent()
        store.stream("agent").load_into(agent)
    assert agent.score == 70


def test_agent_checkpoint_customising_fields() -> None:
    """`_`-prefixed attributes are excluded by default; _checkpoint_fields pins the list."""

    class Pinned(Checkpointable):
        def __init__(self) -> None:
            self.memory: list[str] = []
            self.call_count = 0
            self._cache: dict[str, Any] = {}
            self._runtime_state = None
            self.extra = "ignored when pinned"

        def _checkpoint_fields(self) -> list[str]:
            return ["memory", "call_count"]

    assert set(Pinned().state_dict()) == {"memory", "call_count", "__class__", "__version__"}


def test_agent_checkpoint_clone() -> None:
    """clone() deep-copies via a state round trip; mutating the clone does not affect the original."""
    agent = MyAgent()
    agent.reply("hello")
    cloned = agent.clone()
    cloned.reply("world")
    assert agent.call_count == 1
    assert cloned.call_count == 2


def test_agent_checkpoint_supported_types(store: eventckpt.Store) -> None:
    """tuple, set, dicts with non-str keys and nested Checkpointables round-trip through the store,
    without pickle (objects need to be dataclasses/attrs classes or Checkpointables)."""

    class Inner(Checkpointable):
        def __init__(self) -> None:
            self.level = 1

    class Typed(Checkpointable):
        def __init__(self) -> None:
            self.pair = ("a", 1)
            self.tags = {"x", "y"}
            self.by_id = {1: "one", (2, 3): "pair"}
            self.inner = Inner()

    original = Typed()
    original.inner.level = 5
    store.stream("typed").save(original)
    loaded = Typed()
    store.stream("typed").load_into(loaded)
    assert (loaded.pair, loaded.tags, loaded.by_id, loaded.inner.level) == (("a", 1), {"x", "y"}, {1: "one", (2, 3): "pair"}, 5)
