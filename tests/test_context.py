"""Context: state and token usage that snapshot into a stream and restore independently of the checkpoint."""

from __future__ import annotations

from pathlib import Path

import pytest

import eventckpt
from eventckpt import Context


def test_snapshot_and_restore(store: eventckpt.Store) -> None:
    """snapshot() saves state and usage as the next version; restore() gives an equal new Context."""
    ctx = Context("task-1", store)
    ctx.state.set("progress", "step 1")
    ctx.state["plan"] = ["a", "b"]
    ctx.add_tokens({"input_tokens": 100})
    ctx.add_tokens({"input_tokens": 20, "output_tokens": 5})
    cp = ctx.snapshot(metadata={"step": 1}, name="first")
    assert (cp.version, cp.name, cp.step) == (1, "first", 1)
    assert cp.values == {"progress": "step 1", "plan": ["a", "b"]}
    assert cp.token_usage == {"input_tokens": 120, "output_tokens": 5}
    again = Context.restore(cp, store)
    assert again.task_id == "task-1" and again.state.get("plan") == ["a", "b"]
    assert again.token_usage == {"input_tokens": 120, "output_tokens": 5}
    again.state.set("progress", "step 2")
    assert again.snapshot().version == 2 and store.stream("task-1").state(2)["progress"] == "step 2"


def test_restored_context_shares_nothing_with_the_checkpoint(store: eventckpt.Store) -> None:
    """Mutating a restored Context (or the original) never changes the checkpoint, and vice versa."""
    ctx = Context(store.stream("t"))
    ctx.state.set("items", [1])
    cp = ctx.snapshot()
    ctx.state["items"].append(2)
    restored = Context.restore(cp)
    restored.state["items"].append(3)
    cp.values["items"].append(4)
    assert restored.state["items"] == [1, 3]
    assert store.stream("t").state(1) == {"items": [1]}
    usage = restored.token_usage
    usage["input_tokens"] = 10**9
    assert restored.token_usage == {}


def test_private_memory_store_when_none_given() -> None:
    """Without a store a Context snapshots into its own in-memory store (as orbiter's Context does)."""
    ctx = Context("solo")
    ctx.state.set("k", 1)
    assert ctx.snapshot().version == 1 and ctx.snapshot().version == 2
    assert ctx.stream.store.path == ":memory:"


def test_bad_input() -> None:
    """Bad keys, usage and checkpoints raise InvalidArgumentError."""
    ctx = Context("t")
    with pytest.raises(eventckpt.InvalidArgumentError):
        ctx.state.set(1, "x")  # type: ignore[arg-type]
    with pytest.raises(eventckpt.InvalidArgumentError):
        ctx.add_tokens({"input_tokens": "many"})
    with pytest.raises(eventckpt.InvalidArgumentError):
        Context.restore({"values": {}})  # type: ignore[arg-type]
    ctx.state.delete("missing")
    assert len(ctx.state) == 0 and "Context(task_id='t'" in repr(ctx)


def test_a_context_on_a_stream_with_history_goes_on_from_its_head(store: eventckpt.Store) -> None:
    """Context(stream) of a stream that has versions starts from the head's state and counters, so its first
    snapshot drops nothing; given state= (or token_usage=), it starts from that instead."""
    first = Context("t", store)
    first.state["plan"] = ["a"]
    first.add_tokens({"input_tokens": 10})
    first.snapshot()
    again = Context(store.stream("t"))
    assert dict(again.state) == {"plan": ["a"]} and again.token_usage == {"input_tokens": 10}
    again.state["done"] = True
    assert again.snapshot().values == {"plan": ["a"], "done": True}
    assert store.stream("t").get(2).token_usage == {"input_tokens": 10}
    fresh = Context("t", store, state={})
    assert dict(fresh.state) == {} and fresh.token_usage == {}


def test_a_context_copies_through_its_stores_codec(store_target: str) -> None:
    """On a store opened with allow_nan=True, a Context holding a NaN resumes and restores."""
    with eventckpt.open(store_target, allow_nan=True) as store:
        ctx = Context("eval", store)
        ctx.state.set("score", float("nan"))
        cp = ctx.snapshot()
        for again in (Context("eval", store), Context.restore(cp, store)):
            score = again.state["score"]
            assert score != score and again.state.to_dict().keys() == {"score"}


def test_a_path_given_as_the_store_is_an_invalid_argument(tmp_path: Path) -> None:
    """Context(task_id, "agent.db") raises InvalidArgumentError (not AttributeError) and creates nothing."""
    for store in ("agent.db", tmp_path / "agent.db"):
        with pytest.raises(eventckpt.InvalidArgumentError, match="store"):
            Context("task-1", store)  # type: ignore[arg-type]
    assert not (tmp_path / "agent.db").exists()
