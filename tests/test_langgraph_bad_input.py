"""Bad input to EventCkptSaver raises a typed eventckpt error and writes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

import eventckpt
from eventckpt.langgraph import EventCkptSaver
from tests.conftest import journal_rows


@pytest.fixture
def saver(store_target: str) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(store_target) as s:
        yield s


def checkpoint(**values: Any) -> Any:
    cp = empty_checkpoint()
    cp["channel_values"] = values
    cp["channel_versions"] = {k: 1 for k in values}
    return cp


def config(thread: Any = "t", **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": "", **extra}}


@pytest.fixture
def stored(saver: EventCkptSaver) -> dict[str, Any]:
    """A thread with one checkpoint, so that "nothing written" is checked against a real file."""
    return saver.put(config(), checkpoint(a=1), {"source": "input", "step": -1}, {"a": 1})


def unchanged(saver: EventCkptSaver, call: Any, error: type[Exception]) -> Exception:
    before = journal_rows(saver.store.path)
    with pytest.raises(error) as info:
        call()
    assert journal_rows(saver.store.path) == before
    return info.value


def test_configs_without_a_thread_or_with_a_bad_namespace(saver: EventCkptSaver, stored: Any) -> None:
    """A config without thread_id, or whose checkpoint_ns is not a str, is refused by every method."""
    md = {"source": "loop", "step": 0}
    for bad in ({"configurable": {}}, {"configurable": {"thread_id": "t", "checkpoint_ns": 5}}):
        for call in (lambda c=bad: saver.put(c, checkpoint(a=2), md, {"a": 2}), lambda c=bad: saver.get_tuple(c),
                     lambda c=bad: saver.put_writes(c, [("a", 1)], "task")):
            unchanged(saver, call, eventckpt.InvalidArgumentError)


def test_put_writes_needs_a_checkpoint_id(saver: EventCkptSaver, stored: Any) -> None:
    """Writes must name the checkpoint they belong to."""
    unchanged(saver, lambda: saver.put_writes(config(), [("a", 1)], "task"), eventckpt.InvalidArgumentError)


def test_a_checkpoint_without_an_id(saver: EventCkptSaver, stored: Any) -> None:
    """A checkpoint whose id is empty or not a str is refused."""
    for bad in ("", None, 5):
        unchanged(saver, lambda b=bad: saver.put(config(), {**checkpoint(a=3), "id": b}, {}, {}),
                  eventckpt.InvalidArgumentError)


def test_a_value_no_serializer_can_store(saver: EventCkptSaver, stored: Any) -> None:
    """A channel value neither JSON nor the serde can hold is a SerializationError naming the channel."""
    error = unchanged(saver, lambda: saver.put(stored, checkpoint(a=1, lock=object()), {}, {"lock": 1}),
                      eventckpt.SerializationError)
    assert error.path == ("lock",)
    unchanged(saver, lambda: saver.put_writes(stored, [("w", object())], "task"), eventckpt.SerializationError)


def test_listing_arguments(saver: EventCkptSaver, stored: Any) -> None:
    """A negative limit or a metadata key that is not a path is refused."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        list(saver.list(config(), limit=-1))
    for key in ('a"b', "", ".a", "a.", 5):
        with pytest.raises(eventckpt.InvalidArgumentError, match="Invalid filter key"):
            list(saver.list(config(), filter={key: 1}))
    assert len(list(saver.list(config(), limit=0))) == 0


def test_a_saver_needs_a_store_or_a_path(tmp_path: Path) -> None:
    """Anything else is an InvalidArgumentError; a closed store refuses further work."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        EventCkptSaver(42)  # type: ignore[arg-type]
    store = eventckpt.open(tmp_path / "s.db")
    saver = EventCkptSaver(store)
    saver.close()  # the saver did not open it: the store stays open
    saver.put(config(), checkpoint(a=1), {}, {"a": 1})
    store.close()
    with pytest.raises(eventckpt.StoreClosedError):
        saver.get_tuple(config())


def test_a_thread_whose_name_is_too_long_is_refused(saver: EventCkptSaver, stored: Any) -> None:
    """A thread id and namespace whose stream name passes 1,000 characters once percent-encoded (112 CJK
    characters; 110 still fit) is refused before anything is written."""
    md = {"source": "input", "step": -1}
    assert saver.put(config("中" * 110), checkpoint(a=1), md, {"a": 1})
    for thread, ns in (("中" * 112, ""), ("t", "中" * 112)):
        conf = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
        error = unchanged(saver, lambda c=conf: saver.put(c, checkpoint(a=1), md, {"a": 1}),
                          eventckpt.InvalidArgumentError)
        assert "too long" in str(error)
