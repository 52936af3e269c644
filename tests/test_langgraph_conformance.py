"""LangGraph's own conformance suite (langgraph-checkpoint-conformance) against EventCkptSaver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from langgraph.checkpoint.conformance import checkpointer_test, spec, validate
from langgraph.checkpoint.conformance.capabilities import (
    ALL_CAPABILITIES,
    BASE_CAPABILITIES,
    EXTENDED_CAPABILITIES,
)

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
