"""eventckpt's native API on W stores of each size: save (whole state, tracked state and transaction),
restore, fork, next to a bare apsw commit of the same rows."""

from __future__ import annotations

import random
from pathlib import Path

import eventckpt
from conftest import steps_after
from systems import Bare, EventckptTx

ROUNDS = 200  # writes per benchmark: the store grows by under 2% even at 10k versions
RESTORES = 30


def test_save_whole_state(benchmark, w_copy: Path, versions: int) -> None:
    """save(values) of W's whole state: diffed against the head, one version per call."""
    with eventckpt.open(w_copy) as store:
        stream = store.stream("w")
        state, work = stream.state(), steps_after(versions)
        assert state["step"] == versions

        def next_state() -> tuple[tuple[object, ...], dict[str, object]]:
            s = next(work)
            state["messages"].append(s.message)
            state["step"] = s.step
            state["scratch"].update(s.scratch)
            return (state, {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens}), {}

        benchmark.pedantic(stream.save, setup=next_state, rounds=ROUNDS)
        assert stream.state() == state


def test_save_tracked_state(benchmark, w_copy: Path, versions: int) -> None:
    """A tracked state (checkout()) edited in place and saved: the edits are recorded as they happen (and
    timed with the save), nothing is compared."""
    with eventckpt.open(w_copy) as store:
        stream = store.stream("w")
        state, work = stream.checkout(), steps_after(versions)
        assert state["step"] == versions

        def step() -> None:
            s = next(work)
            state["messages"].append(s.message)
            state["step"] = s.step
            state["scratch"].update(s.scratch)
            stream.save(state, {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens})

        benchmark.pedantic(step, rounds=ROUNDS)
        assert stream.state() == state and state.version == versions + 1 + ROUNDS


def test_save_transaction(benchmark, w_copy: Path, versions: int) -> None:
    """A transaction per step (append, set, usage): the O(change) path."""
    system = EventckptTx()
    system.open(str(w_copy))
    try:
        work = steps_after(versions)
        done: list[int] = []

        def next_step() -> tuple[tuple[object], dict[str, object]]:
            s = next(work)
            done.append(s.step)
            return (s,), {}

        benchmark.pedantic(system.commit, setup=next_step, rounds=ROUNDS)
        assert system.stream.state()["step"] == done[-1] == versions + len(done)
    finally:
        system.close()


def test_bare_commit(benchmark, w_copy: Path, versions: int) -> None:
    """The same rows as one W step, inserted and committed with bare apsw calls (the physical limit)."""
    bare = Bare()
    bare.open(str(w_copy))
    try:
        work = enumerate(steps_after(versions), start=versions + 2)
        benchmark.pedantic(lambda vs: bare.commit(vs[1], vs[0]), setup=lambda: ((next(work),), {}), rounds=ROUNDS)
    finally:
        bare.close()


def test_restore_random_version(benchmark, w_file: Path, versions: int) -> None:
    """state(v) at a random version: the nearest snapshot plus the tail after it."""
    rng = random.Random(3)
    with eventckpt.open(w_file, readonly=True) as store:
        stream = store.stream("w")
        picked: list[int] = []

        def pick() -> tuple[tuple[int], dict[str, object]]:
            picked.append(rng.randint(1, versions))
            return (picked[-1] + 1,), {}

        state = benchmark.pedantic(stream.state, setup=pick, rounds=RESTORES)
        assert state["step"] == picked[-1] and len(state["messages"]) == picked[-1]


def test_fork(benchmark, w_copy: Path, versions: int) -> None:
    """fork(at=v) at a random version: a new stream sharing history, nothing copied."""
    rng = random.Random(4)
    with eventckpt.open(w_copy) as store:
        stream = store.stream("w")
        picked: list[int] = []

        def pick() -> tuple[tuple[()], dict[str, object]]:
            picked.append(rng.randint(1, versions) + 1)
            return (), {"at": picked[-1], "task_id": f"fork-{len(picked)}"}

        fork = benchmark.pedantic(stream.fork, setup=pick, rounds=ROUNDS)
        assert fork.parent == eventckpt.ForkOrigin("w", picked[-1]) and len(store.streams()) == len(picked) + 1
        assert fork.version == picked[-1]
