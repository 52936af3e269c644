"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against EventCkptSaver, and the
DeltaChannel support the suite does not cover yet."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.conformance import checkpointer_test, spec, validate
from langgraph.checkpoint.conformance.capabilities import (
    ALL_CAPABILITIES,
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.checkpoint.sqlite import SqliteSaver

from eventckpt.langgraph import EventCkptSaver


def test_conformance_level_is_full_with_every_capability(new_target: Callable[[], str]) -> None:
    """Every base and every optional capability is implemented and passes on each engine: conformance
    level FULL."""
    files = iter(new_target, None)

    @checkpointer_test(name="EventCkptSaver")
    async def saver() -> AsyncIterator[EventCkptSaver]:
        with EventCkptSaver(next(files)) as s:  # a fresh file per capability suite
            yield s

    report = asyncio.run(validate(saver))
    failures = {name: r.failures for name, r in report.results.items() if r.failures}
    assert failures == {}
    assert report.conformance_level() == "FULL"
    assert {c.value for c in BASE_CAPABILITIES} | {c.value for c in EXTENDED_CAPABILITIES} == {
        c.value for c in ALL_CAPABILITIES
    }
    for capability in ALL_CAPABILITIES:
        result = report.results[capability.value]
        assert result.detected and result.passed is True, capability
        assert result.tests_passed > 0 and result.tests_failed == 0, capability
    every_test = sum(
        len(tests)
        for module in vars(spec).values() if getattr(module, "__name__", "").startswith(spec.__name__ + ".")
        for name, tests in vars(module).items() if name.startswith("ALL_") and name.endswith("_TESTS")
    )
    assert every_test >= 80 and sum(r.tests_passed for r in report.results.values()) == every_test


# -- DeltaChannel support: get_delta_channel_history --------------------------------------------------
# langgraph-checkpoint-conformance 0.0.2 (the newest release) has no delta-channel capability yet, so
# these checks of BaseCheckpointSaver's documented contract run here, against EventCkptSaver and against
# LangGraph's own InMemorySaver and SqliteSaver, which must all give the same answers.


VERSIONS = itertools.count(1)


def delta_savers(tmp_path: Path) -> Iterator[tuple[str, BaseCheckpointSaver]]:
    yield "memory", InMemorySaver()
    conn = sqlite3.connect(tmp_path / "delta-sqlite.db", check_same_thread=False)
    try:
        yield "sqlite", SqliteSaver(conn)
    finally:
        conn.close()
    with EventCkptSaver(tmp_path / "delta-eventckpt.db") as saver:
        yield "eventckpt", saver


def step(saver: BaseCheckpointSaver, thread: str, parent: dict[str, Any] | None, values: dict[str, Any],
         writes: list[tuple[str, Any]] = (), task_path: str = "") -> dict[str, Any]:
    """Put a checkpoint (after `parent`) holding `values` (each at a new channel version), then one
    task's `writes` on it."""
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = values
    cp["channel_versions"] = {k: next(VERSIONS) for k in values}
    conf = {"thread_id": thread, "checkpoint_ns": ""}
    if parent is not None:
        conf["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    stored = saver.put({"configurable": conf}, cp, {"source": "loop", "step": 0}, dict(cp["channel_versions"]))
    if writes:
        saver.put_writes(stored, list(writes), str(uuid4()), task_path)
    return stored


def history(saver: BaseCheckpointSaver, config: dict[str, Any], channels: list[str]) -> dict[str, Any]:
    """The delta history with seeds unwrapped and writes as their values, sync and async alike."""
    out = saver.get_delta_channel_history(config=config, channels=channels)
    if not isinstance(saver, SqliteSaver):  # it has no async methods (that is AsyncSqliteSaver)
        assert asyncio.run(saver.aget_delta_channel_history(config=config, channels=channels)) == out
    return {ch: ([w[2] for w in h["writes"]],
                 h["seed"].value if isinstance(h.get("seed"), _DeltaSnapshot) else h.get("seed", "none"))
            for ch, h in out.items()}


def delta_scenarios(saver: BaseCheckpointSaver) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # snapshots at steps 0 and 3 of six; every step writes its number
    configs: list[dict[str, Any]] = []
    for n in range(6):
        values = {"ch": _DeltaSnapshot(n)} if n in (0, 3) else {}
        configs.append(step(saver, "a", configs[-1] if configs else None, values, [("ch", n)]))
    saver.put_writes(configs[-1], [("ch", "pending at the target")], str(uuid4()))
    out["nearest seed"] = history(saver, configs[-1], ["ch"])
    out["seed at the root"] = history(saver, configs[2], ["ch"])
    out["no channels"] = saver.get_delta_channel_history(config=configs[-1], channels=[])
    out["first checkpoint"] = history(saver, configs[0], ["ch"])
    # two channels ending their walks apart, one never stored, a migrated plain value
    configs = []
    for n in range(5):
        values = {"a": _DeltaSnapshot(f"a{n}")} if n == 1 else {"b": [10, n]} if n == 3 else {}
        configs.append(step(saver, "b", configs[-1] if configs else None, values, [("a", n), ("b", n), ("c", n)]))
    out["several channels"] = history(saver, configs[-1], ["a", "b", "c"])
    # parallel tasks of one step replay in task path order, writes without a path first
    configs = [step(saver, "c", None, {"ch": _DeltaSnapshot(0)})]
    configs.append(step(saver, "c", configs[0], {}))
    saver.put_writes(configs[1], [("ch", "second")], "00000000-0000-0000-0000-000000000000", "~pull, 02")
    saver.put_writes(configs[1], [("ch", "first")], "ffffffff-ffff-ffff-ffff-ffffffffffff", "~pull, 01")
    saver.put_writes(configs[1], [("ch", "input")], "ffffffff-ffff-ffff-ffff-fffffffffff0")
    configs.append(step(saver, "c", configs[1], {}))
    out["task order"] = history(saver, configs[-1], ["ch"])
    # a fork: only the checkpoints on the target's own path count
    base = [step(saver, "d", None, {"ch": _DeltaSnapshot("root")}, [("ch", "r")])]
    base.append(step(saver, "d", base[0], {}, [("ch", "main 1")]))
    base.append(step(saver, "d", base[1], {}, [("ch", "main 2")]))
    fork = step(saver, "d", base[0], {}, [("ch", "fork 1")])
    out["fork"] = history(saver, step(saver, "d", fork, {}), ["ch"])
    out["main"] = history(saver, step(saver, "d", base[2], {}), ["ch"])
    out["unknown checkpoint"] = history(saver, {"configurable": {"thread_id": "d", "checkpoint_ns": "",
                                                                 "checkpoint_id": "no-such-id"}}, ["ch"])
    return out


def test_delta_channel_history_agrees_with_langgraphs_savers(tmp_path: Path) -> None:
    """get_delta_channel_history (and its async form) gives what InMemorySaver and SqliteSaver give: the
    nearest seed, the writes since it oldest first and in task-path order, per channel, on-path only."""
    results = {name: delta_scenarios(saver) for name, saver in delta_savers(tmp_path)}
    expected = results["memory"]
    assert expected["nearest seed"] == {"ch": ([3, 4], 3)}
    assert expected["seed at the root"] == {"ch": ([0, 1], 0)}
    assert expected["no channels"] == {} and expected["first checkpoint"] == {"ch": ([], "none")}
    assert expected["several channels"] == {"a": ([1, 2, 3], "a1"), "b": ([3], [10, 3]), "c": ([0, 1, 2, 3], "none")}
    assert expected["task order"] == {"ch": (["input", "first", "second"], 0)}
    assert expected["fork"] == {"ch": (["r", "fork 1"], "root")}
    assert expected["main"] == {"ch": (["r", "main 1", "main 2"], "root")}
    assert expected["unknown checkpoint"] == {"ch": ([], "none")}
    assert results["sqlite"] == expected
    assert results["eventckpt"] == expected


def test_delta_channel_history_is_read_in_a_few_queries(tmp_path: Path) -> None:
    """EventCkptSaver answers from its own tables (the capability is its own, not the base class's walk of
    one get_tuple per ancestor): the statements run do not grow with the number of ancestors."""
    assert "get_delta_channel_history" in vars(EventCkptSaver) and "aget_delta_channel_history" in vars(EventCkptSaver)
    counts = []
    with EventCkptSaver(tmp_path / "few.db") as saver:
        for thread, steps in (("short", 5), ("long", 60)):
            configs = [step(saver, thread, None, {"ch": _DeltaSnapshot(0)}, [("ch", 0)])]
            for n in range(1, steps):
                configs.append(step(saver, thread, configs[-1], {}, [("ch", n)]))
            statements: list[str] = []
            saver.store.core.backend.journal.conn.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
            result = saver.get_delta_channel_history(config=configs[-1], channels=["ch"])
            saver.store.core.backend.journal.conn.exec_trace = None
            assert [w[2] for w in result["ch"]["writes"]] == list(range(steps - 1))
            counts.append(len(statements))
    assert counts[0] == counts[1] < 25
