"""Invariant 2 under SIGKILL: writer processes running workload W are killed at random and at exact
moments (tests/killkit.py); after every kill the file is intact, holds only whole versions, and every
acknowledged version restores to exactly what was saved."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import killkit

KILLS = 21  # three of each kill kind; `python -m tests.soak` runs 200


def test_killed_writers_lose_nothing_acknowledged(tmp_path: Path) -> None:
    """21 writers are SIGKILLed (by timer, inside a version's events, between events and snapshot, before
    COMMIT, inside a fork, mid-commit WAL write, mid-checkpoint); every check holds after each kill."""
    totals = killkit.run_kills(tmp_path / "w.db", tmp_path, KILLS, seed=7)
    assert sum(totals.kills.values()) == KILLS
    assert set(totals.kills) == {name for name, _, _ in killkit.KILL_KINDS}, "every trigger was reached"
    assert totals.reported > 0 and totals.forks > 0
    assert totals.checked >= 2 * totals.present > 0  # each version compared after its kill and at the end


def test_kill_markers_are_checked(tmp_path: Path) -> None:
    """A kill before COMMIT leaves the version in progress absent (the marker check is not vacuous)."""
    totals = killkit.run_kills(tmp_path / "w.db", tmp_path, 2, seed=3, kinds=["before commit"])
    assert totals.kills == {"before commit": 2}
    markers = [line.split("\t") for f in sorted(tmp_path.glob("life-*.tsv")) for line in f.read_text().splitlines()
               if line.startswith("K")]
    assert len(markers) == 2 and all(m[5] == "absent" and int(m[4]) > 0 for m in markers)
    with pytest.raises(AssertionError, match="exists after a kill before its commit"):
        life = killkit.Life("before commit", None, {}, [markers[0]])
        killkit.check_kill_marker(life, {markers[0][3]: int(markers[0][4])})


@pytest.mark.parametrize("op", ["prune", "import"])
def test_unwired_operations_fail_loudly(tmp_path: Path, op: str) -> None:
    """Kills during prune and import wait for their features: enabling them fails before anything runs."""
    with pytest.raises(killkit.NotWiredError, match=r"issue \d"):
        killkit.run_kills(tmp_path / "w.db", tmp_path, 1, ops=killkit.DEFAULT_OPS + (op,))
    assert not (tmp_path / "w.db").exists()
    with pytest.raises(killkit.NotWiredError):
        killkit.MAINTENANCE[op](None, None)
