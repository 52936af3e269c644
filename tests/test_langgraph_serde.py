"""Values that are not plain JSON go through the saver's serde: its allowlist decides, pickle never."""

from __future__ import annotations

import dataclasses
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import BaseCheckpointSaver, empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver

import eventckpt
from eventckpt.langgraph import EventCkptSaver
from tests.conftest import journal_rows


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Opaque:
    """Not msgpack-serializable; only pickle could store it."""

    def __init__(self) -> None:
        self.secret = 42


def put(saver: BaseCheckpointSaver, thread: str, values: dict[str, Any]) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = {k: 1 for k in values}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, checkpoint, {"source": "input", "step": -1}, dict(checkpoint["channel_versions"]))


def read(saver: BaseCheckpointSaver, stored: dict[str, Any]) -> dict[str, Any]:
    return saver.get_tuple(stored).checkpoint["channel_values"]


def both(tmp_path: Path, serde: Any, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(what SqliteSaver gives back, what EventCkptSaver gives back) with the same serde, from fresh savers."""
    conn = sqlite3.connect(tmp_path / "sqlite.db", check_same_thread=False)
    try:
        stored = put(SqliteSaver(conn, serde=serde), "t", values)
        expected = read(SqliteSaver(conn, serde=serde), stored)
    finally:
        conn.close()
    with EventCkptSaver(tmp_path / "ours.db", serde=serde) as saver:
        stored = put(saver, "t", values)
    with EventCkptSaver(tmp_path / "ours.db", serde=serde) as saver:
        return expected, read(saver, stored)


def test_strict_serde_refuses_classes_outside_its_allowlist(tmp_path: Path) -> None:
    """A strict serde gives back the fields of a class it does not allow, exactly as SqliteSaver does."""
    strict = JsonPlusSerializer(allowed_msgpack_modules=None)
    expected, got = both(tmp_path, strict, {"point": Point(1, 2), "points": [Point(3, 4)]})
    assert got == expected == {"point": {"x": 1, "y": 2}, "points": [{"x": 3, "y": 4}]}


def test_allowlisted_classes_come_back_as_themselves(tmp_path: Path) -> None:
    """With the class on the serde's allowlist, the stored value decodes into the class."""
    allowing = JsonPlusSerializer(allowed_msgpack_modules=[(Point.__module__, "Point")])
    expected, got = both(tmp_path, allowing, {"point": Point(1, 2)})
    assert got == expected == {"point": Point(1, 2)}


def test_with_allowlist_clone_decodes_with_the_new_allowlist(tmp_path: Path) -> None:
    """LangGraph's with_allowlist() clone reads through its own serde, not the original's."""
    with EventCkptSaver(tmp_path / "a.db", serde=JsonPlusSerializer(allowed_msgpack_modules=None)) as saver:
        stored = put(saver, "t", {"point": Point(5, 6)})
        assert read(saver, stored) == {"point": {"x": 5, "y": 6}}
        assert read(saver.with_allowlist([(Point.__module__, "Point")]), stored) == {"point": Point(5, 6)}


def test_pickle_is_never_written(tmp_path: Path) -> None:
    """Even a serde allowed to fall back to pickle cannot store a pickle: SerializationError, nothing written."""
    with EventCkptSaver(tmp_path / "p.db", serde=JsonPlusSerializer(pickle_fallback=True)) as saver:
        put(saver, "t", {"ok": 1})
        before = journal_rows(saver.store.path)
        with pytest.raises(eventckpt.SerializationError) as info:
            put(saver, "t", {"bad": Opaque()})
        assert "pickle" in str(info.value) and info.value.path == ("bad",)
        assert journal_rows(saver.store.path) == before


def test_a_stored_pickle_is_never_loaded(tmp_path: Path) -> None:
    """A value whose stored encoding claims to be a pickle is refused as damaged, not unpickled."""
    with EventCkptSaver(tmp_path / "p.db") as saver:
        stored = put(saver, "t", {"when": Point(1, 1)})
    conn = sqlite3.connect(tmp_path / "p.db")
    conn.execute("""UPDATE events SET value = '["pickle","bytes"]' WHERE path = '$."__serde__:when"'""")
    conn.commit()
    conn.close()
    with EventCkptSaver(tmp_path / "p.db", serde=JsonPlusSerializer(pickle_fallback=True)) as saver:
        with pytest.raises(eventckpt.CorruptStoreError):
            saver.get_tuple(stored)


class Reversing:
    """A serde that does not write msgpack (like an encrypting one): its bytes are stored as they are."""

    inner = JsonPlusSerializer()

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        type_, data = self.inner.dumps_typed(obj)
        return "reversed+" + type_, data[::-1]

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed((data[0].removeprefix("reversed+"), data[1][::-1]))


def test_a_serde_without_msgpack_stores_its_bytes(tmp_path: Path) -> None:
    """A serde writing its own format round-trips through stored bytes, like SqliteSaver."""
    values = {"point": Point(1, 2), "plain": {"a": [1, 2]}}
    expected, got = both(tmp_path, Reversing(), values)
    assert got == expected and got["plain"] == {"a": [1, 2]}


def test_values_json_cannot_hold_round_trip(tmp_path: Path) -> None:
    """NaN, infinities, bytes and tuples come back as SqliteSaver gives them back."""
    values = {"nan": {"x": math.nan, "inf": -math.inf}, "raw": b"\x00\xff", "pair": (1, "a")}
    expected, got = both(tmp_path, JsonPlusSerializer(), values)
    assert math.isnan(got["nan"]["x"]) and math.isnan(expected["nan"]["x"])
    assert got["nan"]["inf"] == expected["nan"]["inf"] == -math.inf
    assert got["raw"] == expected["raw"] == b"\x00\xff"
    assert got["pair"] == expected["pair"] == [1, "a"]  # msgpack has no tuple, for either saver


def test_a_damaged_tree_is_a_corrupt_store(tmp_path: Path) -> None:
    """A serde value whose stored JSON was edited into something msgpack cannot hold is CorruptStoreError."""
    with EventCkptSaver(tmp_path / "d.db") as saver:
        stored = put(saver, "t", {"point": Point(1, 2)})
    conn = sqlite3.connect(tmp_path / "d.db")
    conn.execute("""UPDATE events SET value = '{"$tuple": ["not", "an", "extension"]}' WHERE path = '$.point'""")
    conn.commit()
    conn.close()
    with EventCkptSaver(tmp_path / "d.db") as saver:
        with pytest.raises(eventckpt.CorruptStoreError):
            saver.get_tuple(stored)
