"""Invariant 4: nothing returned aliases stored or cached state, and nothing saved aliases the caller's."""

from __future__ import annotations

from pathlib import Path

import eventckpt


def test_mutating_returned_values_never_changes_the_store(store: eventckpt.Store) -> None:
    """Mutating values from state(), get(), latest, or a save's checkpoint leaves the store as it was."""
    task = store.stream("t")
    cp = task.save({"m": [{"c": "a"}], "d": {"k": 1}}, {"input_tokens": 1}, metadata={"tag": ["x"]})
    for grab in (lambda: task.state(), lambda: task.get(1).values, lambda: task.latest.values, lambda: cp.values):
        value = grab()
        value["m"][0]["c"] = "MUTATED"
        value["m"].append("extra")
        value["d"].clear()
        value["new"] = 1
    for record in (cp, task.get(1), task.latest):
        record.token_usage["input_tokens"] = 10**6
        record.metadata["tag"].append("y")
    assert task.state() == {"m": [{"c": "a"}], "d": {"k": 1}}
    assert task.get(1).token_usage == {"input_tokens": 1}
    assert task.get(1).metadata == {"tag": ["x"]}


def test_mutating_the_callers_object_after_save_never_changes_the_version(store: eventckpt.Store) -> None:
    """The saved version keeps the values of save time, whatever the caller does to its objects after."""
    task = store.stream("t")
    state = {"m": [{"c": "a"}], "d": {"k": [1]}}
    task.save(state)
    state["m"][0]["c"] = "changed in place"
    state["d"]["k"].append(2)
    assert task.state(1) == {"m": [{"c": "a"}], "d": {"k": [1]}}
    task.save(state)  # the in-place changes are seen as changes, since the head cache kept its own copy
    assert task.state(2) == state and task.state(1) == {"m": [{"c": "a"}], "d": {"k": [1]}}


def test_head_cache_is_not_the_callers_state(store: eventckpt.Store) -> None:
    """After save(values), appending to the caller's list in place is detected by the next save."""
    task = store.stream("t")
    messages: list[dict] = []
    state = {"messages": messages}
    for i in range(5):
        messages.append({"i": i})
        task.save(state)
    assert [task.state(v)["messages"] for v in (1, 5)] == [[{"i": 0}], [{"i": i} for i in range(5)]]


def test_two_reads_are_independent(store: eventckpt.Store) -> None:
    """Two reads of one version are two independent objects."""
    task = store.stream("t")
    task.save({"a": [1]})
    first, second = task.state(), task.state()
    first["a"].append(2)
    assert second == {"a": [1]}


def test_reads_after_reopen_are_independent(store_target: str) -> None:
    """Values read from the file (not the cache) are fresh objects too."""
    with eventckpt.open(store_target) as store:
        store.stream("t").save({"a": [1]})
        store.stream("t").save({"a": [1, 2]})
    with eventckpt.open(store_target) as store:
        task = store.stream("t")
        value = task.state(1)
        value["a"].append(99)
        assert task.state(1) == {"a": [1]}


def test_saved_copies_are_deep_though_scalars_are_shared(store: eventckpt.Store) -> None:
    """save() shares only immutable scalars with the caller: editing a nested dict or list of an appended
    item afterwards changes neither the saved version nor the head, and the next save records the edit."""
    task = store.stream("t")
    item = {"role": "tool", "parts": [{"text": "a"}], "meta": {"tags": ["x"]}}
    state = {"messages": [item]}
    task.save(state)
    item["parts"][0]["text"] = "b"
    item["parts"].append({"text": "c"})
    item["meta"]["tags"].append("y")
    assert task.state(1) == {"messages": [{"role": "tool", "parts": [{"text": "a"}], "meta": {"tags": ["x"]}}]}
    task.save(state)
    assert task.state(2) == state and task.state(1)["messages"][0]["parts"] == [{"text": "a"}]
