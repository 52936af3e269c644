"""Token usage has one meaning: cumulative totals per version. save(token_usage=) gives the totals;
save(add_usage=) and tx.add_usage() add to the previous version's; the checkpoints view shows both the
totals and what each version added, readable by the stock sqlite3 program (3.40)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import orjson
import pytest

import eventckpt

from .conftest import journal_rows


def test_totals_and_additions(store: eventckpt.Store) -> None:
    """token_usage sets the totals (counters not named are dropped); add_usage and tx.add_usage add to the
    previous totals; a version with neither keeps them."""
    task = store.stream("t")
    assert task.save({"a": 1}, token_usage={"input_tokens": 100, "output_tokens": 10}).token_usage == \
        {"input_tokens": 100, "output_tokens": 10}
    assert task.save({"a": 2}, add_usage={"input_tokens": 5, "cost": 0.5}).token_usage == \
        {"input_tokens": 105, "output_tokens": 10, "cost": 0.5}
    with task.transaction() as tx:
        tx.set("a", 3)
        tx.add_usage(input_tokens=1).add_usage(input_tokens=2, output_tokens=0)
    assert tx.checkpoint.token_usage == {"input_tokens": 108, "output_tokens": 10, "cost": 0.5}
    assert task.save({"a": 4}).token_usage == {"input_tokens": 108, "output_tokens": 10, "cost": 0.5}
    assert task.save({"a": 5}, {"input_tokens": 7}).token_usage == {"input_tokens": 7}
    assert [task.get(v).token_usage.get("input_tokens") for v in range(1, 6)] == [100, 105, 108, 108, 7]


@pytest.mark.parametrize("call", ["both", "negative add", "negative tx", "not a mapping", "bool"])
def test_what_cannot_be_meant_is_refused(store: eventckpt.Store, store_target: str, call: str) -> None:
    """Totals and additions together, a negative amount to add, and non-numbers raise InvalidArgumentError
    and write nothing."""
    task = store.stream("t")
    task.save({"a": 1}, token_usage={"input_tokens": 10})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.InvalidArgumentError):
        if call == "both":
            task.save({"a": 2}, token_usage={"input_tokens": 1}, add_usage={"input_tokens": 1})
        elif call == "negative add":
            task.save({"a": 2}, add_usage={"input_tokens": -1})
        elif call == "negative tx":
            with task.transaction() as tx:
                tx.add_usage(input_tokens=-3)
        elif call == "not a mapping":
            task.save({"a": 2}, add_usage=[("input_tokens", 1)])
        else:
            task.save({"a": 2}, add_usage={"input_tokens": True})
    assert journal_rows(store_target) == before


def test_the_view_shows_totals_and_what_each_version_added(tmp_path: Path) -> None:
    """The checkpoints view, read by the sqlite3 program, has input_tokens (the total) next to
    input_tokens_added and usage_added; a fork's first own version compares with its fork point, and a
    version after a retention hole with the last version kept before it."""
    assert shutil.which("sqlite3"), "the sqlite3 program is missing (.ci/run installs it)"
    path = tmp_path / "u.db"
    with eventckpt.open(path) as store:
        task = store.stream("t")
        task.save({"s": 0}, token_usage={"input_tokens": 100, "output_tokens": 10})  # v1
        for step in range(1, 5):  # v2..v5: +20 input each, v3 also +1 output
            task.save({"s": step}, add_usage={"input_tokens": 20, **({"output_tokens": 1} if step == 2 else {})},
                      auto=step != 4)
        task.save({"s": 5})  # v6: nothing added
        task.fork(at=3, task_id="f").save({"s": -1}, add_usage={"input_tokens": 1000})  # f v4
        task.prune(keep_last=2, auto_only=True)  # removes the automatic v2 and v4 (v3 stays: f forks there)
    query = ("SELECT stream, version, input_tokens, input_tokens_added, output_tokens_added, usage_added"
             " FROM checkpoints WHERE stream IN ('t', 'f') ORDER BY stream DESC, version")
    out = subprocess.run(["sqlite3", "-json", str(path), query], capture_output=True, text=True, check=True).stdout
    rows = [(r["stream"], r["version"], r["input_tokens"], r["input_tokens_added"], r["output_tokens_added"],
             orjson.loads(r["usage_added"])) for r in orjson.loads(out)]
    assert rows == [
        ("t", 1, 100, 100, 10, {"input_tokens": 100, "output_tokens": 10}),
        ("t", 3, 140, 40, 1, {"input_tokens": 40, "output_tokens": 1}),  # v2 was removed: since v1
        ("t", 5, 180, 40, 0, {"input_tokens": 40, "output_tokens": 0}),  # v4 too: since v3
        ("t", 6, 180, 0, 0, {"input_tokens": 0, "output_tokens": 0}),
        ("f", 1, 100, 100, 10, {"input_tokens": 100, "output_tokens": 10}),
        ("f", 3, 140, 40, 1, {"input_tokens": 40, "output_tokens": 1}),
        ("f", 4, 1140, 1000, 0, {"input_tokens": 1000, "output_tokens": 0}),  # its first own version
    ]
    plan = subprocess.run(["sqlite3", str(path), "EXPLAIN QUERY PLAN SELECT usage_added FROM checkpoints WHERE stream = 'f'"],
                          capture_output=True, text=True, check=True).stdout
    assert "SCAN v" not in plan and "SCAN versions" not in plan, plan
