"""Strings holding NUL characters are data like any other on every engine: values and metadata values with
NUL (next to the literal text \\u0000 and the character U+FFFE, which PostgreSQL's json_safe() uses in
their place) restore, show in history, diff and filters exactly; names that an engine stores as text (a
checkpoint's name and id, metadata keys, counter names, tool names) refuse NUL with a typed error on
every engine, and nothing is written."""

from __future__ import annotations

from typing import Any

import pytest

import eventckpt

from .conftest import journal_rows

NUL, LITERAL, FFFE = "a\x00b", "a\\u0000b", "a\ufffeb"  # LITERAL is backslash, u, 0, 0, 0, 0


def _states() -> list[dict[str, Any]]:
    """Three versions whose values hold NUL, the literal text \\u0000 and U+FFFE side by side, in nested
    dicts and in a list that grows (stored by reference to its snapshot base)."""
    first = {"s": NUL, "n": {"lit": LITERAL, "odd": "\\" + NUL, "fffe": FFFE}, "log": [NUL, LITERAL]}
    second = {**first, "log": [*first["log"], {"m": NUL + NUL}], "n": {**first["n"], "lit": NUL}}
    third = {**second, "log": [*second["log"], FFFE], "s": LITERAL}
    return [first, second, third]


def test_values_holding_nul_restore_and_read_exactly(store_target: str) -> None:
    """Every version restores exactly (from snapshots that share the growing list too), and history of a
    key inside a value, diff and the state of an old version see the NUL, literal and U+FFFE strings apart."""
    policy = eventckpt.SnapshotPolicy.every_version(share_min_bytes=0)
    with eventckpt.open(store_target, snapshots=policy) as store:
        task = store.stream("t")
        states = _states()
        for state in states:
            task.save(state)
    with eventckpt.open(store_target) as store:  # a fresh process's view: nothing cached
        task = store.stream("t")
        for version, state in enumerate(states, 1):
            assert task.state(version) == state
        assert [(e.version, e.value) for e in task.history("n.lit")] == [(2, NUL), (1, LITERAL)]
        assert [(e.version, e.value) for e in task.history("n.odd")] == [(1, "\\" + NUL)]
        assert [(e.version, e.value) for e in task.history("log[2].m")] == [(2, NUL + NUL)]
        changes = {c.path: c for c in task.diff(1, 3).changes}
        assert (changes[("s",)].old, changes[("s",)].new) == (NUL, LITERAL)
        assert (changes[("n", "lit")].old, changes[("n", "lit")].new) == (LITERAL, NUL)
        assert changes[("log", 3)].kind == "added" and changes[("log", 3)].new == FFFE
        assert store.verify().ok


def test_metadata_values_holding_nul_are_found_exactly(store: eventckpt.Store) -> None:
    """Metadata values with NUL are stored and found by log and search (alone, where the metadata index
    answers, and next to another filter); a NUL, the literal text and U+FFFE never match each other."""
    task = store.stream("t")
    for value in (NUL, LITERAL, FFFE):
        task.save({"v": value}, metadata={"node": value, "kind": "x", "doc": {"inner": value}})
    for version, value in enumerate((NUL, LITERAL, FFFE), 1):
        assert [cp.version for cp in task.log(metadata={"node": value})] == [version]
        assert [cp.version for cp in task.log(metadata={"kind": "x", "node": value})] == [version]
        assert [cp.version for cp in task.log(metadata={"doc": {"inner": value}})] == [version]
        assert [(cp.task_id, cp.version) for cp in store.search(metadata={"node": value})] == [("t", version)]
        assert task.get(version).metadata["node"] == value
    assert store.verify().ok


@pytest.mark.parametrize("case", ["name", "checkpoint_id", "metadata key", "token_usage", "add_usage", "tool name",
                                  "tool call_id", "tool error"])
def test_names_holding_nul_are_refused_everywhere(store_target: str, case: str) -> None:
    """A NUL in a name stored as text is an InvalidArgumentError on every engine (PostgreSQL's text could
    not hold it), raised before anything is written."""
    tool = {"tool name": eventckpt.ToolCall("t\x00", {}), "tool call_id": eventckpt.ToolCall("t", {}, call_id="c\x00"),
            "tool error": eventckpt.ToolCall("t", {}, error="E: \x00")}
    kwargs: dict[str, Any] = {
        "name": {"name": NUL}, "checkpoint_id": {"checkpoint_id": NUL}, "metadata key": {"metadata": {NUL: 1}},
        "token_usage": {"token_usage": {NUL: 1}}, "add_usage": {"add_usage": {NUL: 1}},
    }.get(case) or {"tool_calls": [tool[case]]}
    with eventckpt.open(store_target) as store:
        task = store.stream("t")
        task.save({"a": 1})
        before = journal_rows(store_target)
        with pytest.raises(eventckpt.InvalidArgumentError):
            task.save({"a": 2}, **kwargs)
        assert journal_rows(store_target) == before and task.version == 1
