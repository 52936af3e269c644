"""Named, automatic and owned checkpoints: metadata conventions, Checkpoint accessors and summary()."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

import eventckpt

from .conftest import RawSQL
from eventckpt import meta


def test_meta_builds_convention_keys() -> None:
    """meta() puts owner, node and step under fixed keys next to any extra metadata."""
    assert meta(user_id=7, node="planner", step=3, source="cli") == {"source": "cli", "user_id": 7, "node": "planner", "step": 3}
    assert meta() == {}
    for bad in ({"user_id": 1.5}, {"node": ""}, {"step": -1}, {"step": "3"}):
        with pytest.raises(eventckpt.InvalidArgumentError):
            meta(**bad)


def test_checkpoint_accessors_and_summary(store: eventckpt.Store) -> None:
    """A named manual checkpoint exposes name, auto, user_id, node, step and a one-line summary."""
    stream = store.stream("session")
    stream.save({"counter": 5}, {"input_tokens": 10}, metadata=meta(user_id=42, node="tools", step=2, note="x"),
                name="Before tool call")
    cp = stream.save({"counter": 6}, auto=True)
    named = stream.get(1)
    assert (named.name, named.auto, named.user_id, named.node, named.step, named.id) == ("Before tool call", False, 42, "tools", 2, "1")
    assert (cp.name, cp.auto, cp.user_id, cp.node, cp.step) == (None, True, None, None, None)
    line = named.summary()
    assert line.startswith("session v1 'Before tool call' | manual | ")
    assert "user=42 node='tools' step=2" in line and "tokens: input_tokens=10" in line and "note='x'" in line
    assert "\n" not in line
    assert stream.get(2).summary().startswith("session v2 (unnamed) | auto | ")


def test_conventions_are_queryable_with_sql(store: eventckpt.Store, store_target: str) -> None:
    """What log/search filter on is plain SQL: the name and auto columns, and json_extract on metadata."""
    stream = store.stream("s")
    for step in range(6):
        stream.save({"step": step}, metadata=meta(user_id="u1" if step % 2 else "u2", node="agent", step=step),
                    name="milestone" if step == 3 else None, auto=step != 3)
    with RawSQL(store_target) as raw:
        manual = raw.execute("SELECT version, name FROM versions WHERE auto = 0")
        if raw.kind == "sqlite":
            owned = raw.execute("SELECT version FROM versions WHERE json_extract(metadata, '$.user_id') = 'u1'"
                                " AND json_extract(metadata, '$.step') >= 3 ORDER BY version")
        else:
            owned = raw.execute("SELECT version FROM versions WHERE metadata::json ->> 'user_id' = 'u1'"
                                " AND (metadata::json ->> 'step')::int >= 3 ORDER BY version")
    assert manual == [(4, "milestone")] and owned == [(4,), (6,)]
