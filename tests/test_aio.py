"""eventckpt.aio: session-keyed async checkpoints, stable ids, and writers that never see 'database is locked'."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import eventckpt
from eventckpt import aio

from .conftest import RawSQL


def run(coro):  # noqa: ANN001, ANN201 - a tiny helper for the sync test functions
    return asyncio.run(coro)


def test_save_load_list_delete(store_target: str) -> None:
    """The llmfy-style calls: save, load latest or by id, list newest first with a limit, delete."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            ids = []
            for step in range(1, 13):
                cp = await store.save("s1", {"step": step}, metadata=eventckpt.meta(node=f"n{step % 3}", step=step))
                ids.append(cp.id)
            assert ids == [str(v) for v in range(1, 13)]
            latest = await store.load("s1")
            assert latest.values == {"step": 12} and latest.step == 12 and latest.node == "n0"
            assert (await store.load("s1", "3")).values == {"step": 3}
            listed = await store.list("s1")
            assert [cp.version for cp in listed] == list(range(12, 2, -1)) and listed[0].values == {"step": 12}
            assert [cp.id for cp in await store.list("s1", limit=2)] == ["12", "11"]
            assert await store.list("s1", limit=0) == []
            assert len(await store.list("s1", limit=None, with_values=False)) == 12
            assert await store.load("nobody") is None and await store.load("s1", "99") is None
            assert await store.list("nobody") == []
            assert await store.delete("s1", "3") is True
            assert await store.load("s1", "3") is None
            assert (await store.load("s1", "4")).values == {"step": 4}  # neighbours still restore
            assert await store.delete("s1", "3") is False
            assert await store.delete("s1") is True and await store.load("s1") is None

    run(main())


def test_caller_checkpoint_ids(store_target: str) -> None:
    """A checkpoint_id given to save is the checkpoint's id; digit-only ids are refused (they read as versions)."""

    async def main() -> None:
        store = await aio.open(store_target)
        try:
            cp = await store.save("s", {"a": 1}, checkpoint_id="after-plan")
            assert cp.id == "after-plan"
            assert (await store.load("s", "after-plan")).values == {"a": 1}
            assert (await store.load("s", "1")).id == "after-plan"
            with pytest.raises(eventckpt.InvalidArgumentError):
                await store.save("s", {"a": 2}, checkpoint_id="42")
            with pytest.raises(eventckpt.InvalidArgumentError):
                await store.load("s", 1)  # type: ignore[arg-type]
            await store.save("other", {"b": 1}, checkpoint_id="theirs")
            fork = await store.fork("s", new_session_id="s-branch")
            await store.save(fork, {"a": 3}, checkpoint_id="branch-only")
            assert await store.load("s", "branch-only") is None  # another session's id is not this one's
            assert (await store.load("s-branch", "after-plan")).values == {"a": 1}  # shared history
        finally:
            await store.close()

    run(main())


def test_ids_are_stable_across_reopen_and_pruning(store_target: str) -> None:
    """An id names the same checkpoint after reopening and after other checkpoints were removed."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            for i in range(10):
                await store.save("s", {"i": i}, auto=i % 2 == 1)
            remembered = {cp.id: cp.values for cp in await store.list("s", limit=None)}
            await store.prune("s", keep_last=2, auto_only=True)
        async with aio.open(store_target) as store:
            for cp in await store.list("s", limit=None):
                assert remembered[cp.id] == cp.values
            assert [cp.id for cp in await store.list("s", limit=None)] == ["10", "9", "7", "5", "3", "1"]

    run(main())


def test_delete_refusals(store_target: str) -> None:
    """A fork's branch point cannot be deleted alone; a forked session needs forks=True."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            for i in range(3):
                await store.save("s", {"i": i})
            await store.fork("s", at=2, new_session_id="b")
            with pytest.raises(eventckpt.VersionInUseError):
                await store.delete("s", "2")
            with pytest.raises(eventckpt.StreamInUseError):
                await store.delete("s")
            assert await store.delete("s", forks=True) is True
            assert await store.sessions() == []

    run(main())


def test_deleting_the_newest_checkpoint(store_target: str) -> None:
    """delete(session, id) of the newest checkpoint works as llmfy's: the one before becomes the latest, and
    the deleted id never names another checkpoint (the next save gets a new number)."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            for i in range(3):
                await store.save("s", {"i": i})
            assert await store.delete("s", "3") is True
            latest = await store.load("s")
            assert latest.id == "2" and latest.values == {"i": 1}
            assert [cp.id for cp in await store.list("s")] == ["2", "1"]
            assert await store.load("s", "3") is None
            assert (await store.save("s", {"i": "new"})).id == "4" and await store.load("s", "3") is None
            await store.save("t", {"only": 1}, checkpoint_id="c1")
            assert await store.delete("t", "c1") is True and await store.load("t") is None
            assert await store.list("t") == [] and (await store.save("t", {"only": 2})).version == 2

    run(main())


def test_clear_all_and_time_travel(store_target: str) -> None:
    """clear_all deletes every session (forks included); get/state/rollback/list_versions work by session."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            await store.save("a", {"x": 1})
            await store.save("a", {"x": 2})
            assert (await store.get("a", 1)).values == {"x": 1}
            assert await store.state("a", 1) == {"x": 1} and await store.list_versions("a") == [1, 2]
            back = await store.rollback("a", 1)
            assert back.version == 3 and await store.state("a") == {"x": 1}
            await store.fork("a", new_session_id="a2")
            await store.save("b", {"y": 1})
            assert await store.clear_all() == 3
            assert await store.sessions() == []

    run(main())


def test_checkout_saves_exactly_the_edits(store_target: str) -> None:
    """checkout() gives the session's head as a tracked state ({} for a new session); save() of it stores
    exactly the edits made in place on the event loop, and a tracked state whose head moved is refused."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            state = await store.checkout("s")
            assert state == {} and isinstance(state, eventckpt.TrackedState)
            state["messages"] = [{"role": "user", "content": "hi"}]
            state["scratch"] = {"k1": 1, "k2": 2}
            assert (await store.save("s", state)).version == 1
            state = await store.checkout("s")
            state["messages"].append({"role": "assistant", "content": "yo"})
            state["scratch"]["k2"] = 3
            assert (await store.save("s", state)).version == 2
            state["scratch"]["k1"] += 1  # the same tracked state goes on from the version it saved
            assert (await store.save("s", state)).version == 3
            assert await store.state("s") == {"messages": [{"role": "user", "content": "hi"},
                                                           {"role": "assistant", "content": "yo"}],
                                              "scratch": {"k1": 2, "k2": 3}}
            stale = await store.checkout("s")
            await store.save("s", {"messages": []})  # a plain save moves the head
            stale["scratch"]["k1"] = 9
            with pytest.raises(eventckpt.ConflictError):
                await store.save("s", stale)
            assert await store.state("s") == {"messages": []}

    run(main())
    with RawSQL(store_target) as raw:
        rows = raw.execute("SELECT version, op, path FROM changes WHERE stream = 's' AND version IN (2, 3)"
                           " ORDER BY version, seq")
    assert [tuple(r) for r in rows] == [(2, "append", "$.messages"), (2, "set", "$.scratch.k2"),
                                        (3, "set", "$.scratch.k1")]


def test_a_save_stores_the_state_as_it_was_when_called(store_target: str) -> None:
    """save() takes the state when called: edits other coroutines make while the commit waits for the
    worker thread are not in that version; a tracked state's later edits stay recorded for its next save."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            for tracked in (False, True):
                name = f"s{tracked}"
                await store.save(name, {"messages": ["m0"], "scratch": {"k": 0}})
                state = await store.checkout(name) if tracked else {"messages": ["m0"], "scratch": {"k": 0}}
                state["messages"].append("m1")
                state["scratch"]["k"] = 1
                saving = asyncio.ensure_future(store.save(name, state))
                await asyncio.sleep(0)  # save() ran up to handing the commit to the worker thread
                state["messages"].append("late")
                state["scratch"]["k"] = 2
                state["new"] = True
                assert (await saving).version == 2
                assert await store.state(name) == {"messages": ["m0", "m1"], "scratch": {"k": 1}}
                if tracked:  # the late edits were recorded, and the next save commits exactly them
                    assert (await store.save(name, state)).version == 3
                    assert await store.state(name) == {"messages": ["m0", "m1", "late"], "scratch": {"k": 2},
                                                       "new": True}

    run(main())


def test_prepare_save_takes_the_state_now(store_target: str) -> None:
    """CheckpointStore.prepare_save() reads the state (or a tracked state's edits) when called; edits made
    before its commit function runs are not in the version, and a tracked state keeps them for later."""
    with eventckpt.open(store_target) as store:
        plain, tracked = store.stream("p"), store.stream("t")
        state = {"messages": [{"n": 0}], "scratch": {"k": 0}}
        plain.save(state)
        tracked.save(state)
        live = tracked.checkout()
        for values, stream in ((state, plain), (live, tracked)):
            values["messages"].append({"n": 1})
            commit = stream.prepare_save(values)
            values["messages"][0]["n"] = 9
            values["messages"].append({"n": 2})
            values["scratch"]["k"] = 5
            assert commit().version == 2
            assert stream.state() == {"messages": [{"n": 0}, {"n": 1}], "scratch": {"k": 0}}
        assert tracked.save(live).version == 3
        assert tracked.state() == {"messages": [{"n": 9}, {"n": 1}, {"n": 2}], "scratch": {"k": 5}}


def test_load_into_and_expire(store_target: str) -> None:
    """load_into restores an object in place; expire removes old checkpoints, async."""

    class Agent(eventckpt.Checkpointable):
        def __init__(self) -> None:
            self.turns = 0

    async def main() -> None:
        async with aio.open(store_target) as store:
            agent = Agent()
            for turn in range(3):
                agent.turns = turn
                await store.save("s", agent)
            await store.load_into("s", agent, 1)
            assert agent.turns == 0
            import datetime as dt

            assert (await store.expire("s", dt.timedelta(0))).removed == (1, 2)

    run(main())


def test_event_loop_is_not_blocked(db_path: Path) -> None:
    """While a save waits for another connection's write lock, other coroutines keep running."""
    store_target = db_path

    async def main() -> None:
        async with aio.open(store_target) as store:
            await store.save("s", {"n": 0})
            blocker = eventckpt.open(store_target)
            blocker.core.backend.journal.begin()  # holds the write lock
            ticks = 0
            saving = asyncio.ensure_future(store.save("s", {"n": 1}))
            while not saving.done() and ticks < 20:
                await asyncio.sleep(0.01)
                ticks += 1
            blocker.core.backend.journal.rollback()
            blocker.close()
            await saving
            assert ticks >= 20  # the loop ran all the while the save was waiting
            assert await store.state("s") == {"n": 1}

    run(main())


WRITER = """
import sys, eventckpt
with eventckpt.open(sys.argv[1]) as store:
    for i in range(int(sys.argv[2])):
        store.stream("shared").save({"writer": "process", "i": i, "pid": 1})
        with store.stream("proc").transaction() as tx:
            tx.incr("n")
"""


def test_many_writers_never_see_database_locked(store_target: str) -> None:
    """Coroutines, threads, a second async store and another process write at once: all land, none fails."""
    n_coroutines, per = 40, 10

    async def main() -> None:
        async with aio.open(store_target) as first, aio.open(store_target) as second:
            proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(WRITER), str(store_target), "150"],
                                    stderr=subprocess.PIPE)
            errors: list[BaseException] = []

            def thread_writer(k: int) -> None:
                try:
                    for i in range(per):
                        with first.store.stream("threads").transaction() as tx:
                            tx.incr("n")
                        first.store.stream(f"thread-{k}").save({"i": i})
                except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                    errors.append(exc)

            threads = [threading.Thread(target=thread_writer, args=(k,)) for k in range(4)]
            for t in threads:
                t.start()

            async def coroutine_writer(k: int) -> None:
                store = first if k % 2 else second
                for i in range(per):
                    await store.save(f"session-{k}", {"k": k, "i": i})
                    await store.save("shared", {"writer": "coroutine", "k": k, "i": i})

            await asyncio.gather(*(coroutine_writer(k) for k in range(n_coroutines)))
            for t in threads:
                t.join()
            assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
            assert errors == []
            for k in range(n_coroutines):
                assert await first.list_versions(f"session-{k}") == list(range(1, per + 1))
            shared = await second.list_versions("shared")
            assert shared == list(range(1, n_coroutines * per + 150 + 1))
            assert await first.state("threads") == {"n": 4 * per}
            assert await second.state("proc") == {"n": 150}

    run(main())


def test_async_log_history_diff_search(store_target: str) -> None:
    """The time-travel queries have async versions: log, history, diff and search, as the sync ones answer."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            for step in range(1, 6):
                await store.save("s", {"step": step, "plan": ["a"] * step}, name="five" if step == 5 else None,
                                 metadata=eventckpt.meta(node="planner" if step % 2 else "tools", step=step))
            assert [cp.version for cp in await store.log("s", 2)] == [5, 4]
            assert [cp.version for cp in await store.log("s", metadata={"node": "tools"})] == [4, 2]
            assert [e.value for e in await store.history("s", "step", limit=2)] == [5, 4]
            diff = await store.diff("s", 2, 5)
            assert {c.path for c in diff.changes} == {("step",), ("plan", 2), ("plan", 3), ("plan", 4)}
            assert [cp.version for cp in await store.search(name="five")] == [5]
            with eventckpt.open(store_target) as sync:
                assert await store.diff("s", 2, 5) == sync.stream("s").diff(2, 5)

    run(main())


def test_ids_in_other_digits_are_ids(store_target: str) -> None:
    """Only ASCII digits read as a version number: "²" names no checkpoint (None / False, not ValueError),
    and "٣" can be a checkpoint id that load finds."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            await store.save("s", {"a": 1})
            await store.save("s", {"a": 2})
            await store.save("s", {"a": 3}, checkpoint_id="٣")
            assert await store.load("s", "²") is None and await store.delete("s", "²") is False
            assert (await store.load("s", "٣")).values == {"a": 3} and (await store.load("s", "2")).values == {"a": 2}

    run(main())


def test_close_is_idempotent_and_later_calls_raise_store_closed(store_target: str) -> None:
    """close() twice (also inside `async with`) is fine, and every call made after it raises StoreClosedError."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            await store.save("s", {"a": 1})
            await asyncio.gather(store.close(), store.close())  # a second close waits for the same one
            await store.close()
            assert store.store.closed
            calls = [store.sessions(), store.search(name="n"), store.clear_all(), store.load("s"),
                     store.list("s"), store.state("s"), store.checkout("s"), store.save("s", {"a": 2})]
            for call in calls:
                with pytest.raises(eventckpt.StoreClosedError):
                    await call
        # __aexit__ closed it once more

    run(main())


def test_save_takes_the_state_at_the_call_not_at_the_first_step(store_target: str) -> None:
    """save() copies the state (or takes a tracked state's edits) when called: changes made before the
    returned awaitable first runs (create_task) are not in the version; bad input raises at the await."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            state = {"step": 1, "messages": ["hi"]}
            pending = asyncio.create_task(store.save("s", state))
            state["step"] = 2
            state["messages"].append("next")
            assert (await pending).version == 1 and await store.state("s") == {"step": 1, "messages": ["hi"]}
            tracked = await store.checkout("s")
            tracked["step"] = 3
            pending = asyncio.create_task(store.save("s", tracked))
            tracked["step"] = 4
            assert (await pending).version == 2 and await store.state("s") == {"step": 3, "messages": ["hi"]}
            bad = store.save("s", {"a": 1}, checkpoint_id="7")  # nothing raised at the call
            with pytest.raises(eventckpt.InvalidArgumentError):
                await bad
            with pytest.raises(eventckpt.InvalidArgumentError):
                await store.save("s", {"a": 1}, metadata={"x": 1}, token_usage={"t": "many"})  # type: ignore[dict-item]

    run(main())


def test_a_save_commits_even_when_its_await_is_cancelled(store_target: str) -> None:
    """Once save() was called its version is written, also when the caller cancels or times out the await
    while the commit is queued; a retry made idempotent with expected_version then raises ConflictError."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            gate = threading.Event()
            held = asyncio.ensure_future(store._run(gate.wait))  # the worker is busy: the saves below queue
            await asyncio.sleep(0)
            started = asyncio.ensure_future(store.save("s", {"n": 1}))
            await asyncio.sleep(0)  # its await has begun
            never_started = asyncio.ensure_future(store.save("s", {"n": 2}))
            started.cancel()
            never_started.cancel()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(store.save("s", {"n": 3}), 0.01)
            gate.set()
            await held
            for task in (started, never_started):
                with pytest.raises(asyncio.CancelledError):
                    await task
            assert await store.list_versions("s") == [1, 2, 3] and await store.state("s") == {"n": 3}
            with pytest.raises(eventckpt.ConflictError):  # the retry of the timed-out save, made idempotent
                await store.save("s", {"n": 3}, expected_version=2)

    run(main())


def test_a_started_call_runs_to_the_end_when_its_await_is_cancelled(store_target: str) -> None:
    """A fork or delete whose coroutine started while the worker was busy still runs when its await is
    cancelled or times out, as a save does: the caller knows it happened."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            await store.save("s", {"n": 1})
            await store.save("gone", {"n": 1})
            gate = threading.Event()
            held = asyncio.ensure_future(store._run(gate.wait))  # the worker is busy: the calls below queue
            await asyncio.sleep(0)
            fork = asyncio.ensure_future(store.fork("s", new_session_id="s-fork"))
            await asyncio.sleep(0)  # its coroutine has started: the fork is queued
            fork.cancel()
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(store.delete("gone"), 0.01)
            gate.set()
            await held
            with pytest.raises(asyncio.CancelledError):
                await fork
            assert sorted(await store.sessions()) == ["s", "s-fork"]

    run(main())


def test_digit_ids_are_version_numbers(store_target: str) -> None:
    """An id made only of digits is a version number: a caller id "3" stored by the sync save is not the
    checkpoint's id (its version is), so every id aio hands out loads and deletes that same checkpoint."""
    with eventckpt.open(store_target) as sync:
        stream = sync.stream("s")
        assert stream.save({"step": 1}, checkpoint_id="3").id == "1"
        stream.save({"step": 2})
        stream.save({"step": 3})
        assert stream.get(1).checkpoint_id == "3"  # still stored, and found by the sync API
        assert stream.find("3").version == 1

    async def main() -> None:
        async with aio.open(store_target) as store:
            assert [cp.id for cp in await store.list("s")] == ["3", "2", "1"]
            for cp in await store.list("s"):
                assert (await store.load("s", cp.id)).version == cp.version
            latest = await store.load("s")
            assert await store.delete("s", latest.id) is True
            assert await store.list_versions("s") == [1, 2]

    run(main())


def test_saving_a_tracked_state_again_while_its_commit_runs(store_target: str) -> None:
    """A second save of a tracked state made while its first commit is queued or running builds on the
    version the first makes (both commit, each with its own edits); another writer still gives ConflictError."""

    async def main() -> None:
        async with aio.open(store_target) as store:
            await store.save("s", {"msgs": []})
            state = await store.checkout("s")
            state["msgs"].append(1)
            first = store.save("s", state)
            state["msgs"].append(2)
            second = store.save("s", state)
            assert [cp.version for cp in await asyncio.gather(first, second)] == [2, 3]
            assert await store.state("s", 2) == {"msgs": [1]} and await store.state("s") == {"msgs": [1, 2]}
            state["msgs"].append(3)
            first = store.save("s", state)
            other = store.save("s", {"msgs": ["other"]})
            state["msgs"].append(4)
            second = store.save("s", state)
            assert (await first).version == 4 and (await other).version == 5
            with pytest.raises(eventckpt.ConflictError):
                await second
            assert await store.state("s") == {"msgs": ["other"]}

    run(main())
