"""Invariant 2 under SIGKILL: writer processes running workload W are killed at random and at exact
moments (tests/killkit.py); after every kill the file is intact, holds only whole versions, and every
acknowledged version restores to exactly what was saved."""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest

from . import killkit

KILLS = 27  # three of each kill kind; `python -m tests.soak` runs 200


def test_killed_writers_lose_nothing_acknowledged(tmp_path: Path) -> None:
    """27 writers are SIGKILLed (by timer, inside a version's events, between events and snapshot, before
    COMMIT, inside a fork, a prune or an import, mid-commit WAL write, mid-checkpoint), while they also
    prune and import now and then; every check holds after each kill."""
    totals = killkit.run_kills(tmp_path / "w.db", tmp_path, KILLS, seed=7)
    assert sum(totals.kills.values()) == KILLS
    assert set(totals.kills) == {name for name, _, _ in killkit.KILL_KINDS}, "every trigger was reached"
    assert totals.reported > 0 and totals.forks > 0
    assert totals.prunes > 0 and totals.copies > 0, "prune and import ran between the kills"
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


def test_a_hole_no_prune_made_is_caught(tmp_path: Path) -> None:
    """The Verifier accepts retention's holes only where a prune ran: a version deleted behind its back
    (events and row) in a stream no prune touched fails the check."""
    db = tmp_path / "w.db"
    killkit.run_kills(db, tmp_path, 2, seed=5, ops=("tx", "save"), kinds=["timer"])
    conn = apsw.Connection(str(db))
    sid, version = conn.execute("SELECT stream_id, max(version) - 2 FROM versions GROUP BY stream_id LIMIT 1").fetchall()[0]
    for table in ("snapshots", "events", "versions"):
        conn.execute(f"DELETE FROM {table} WHERE stream_id = ? AND version = ?", (sid, version))
    conn.close()
    with pytest.raises(AssertionError, match="has a gap|checksum chain broken"):
        killkit.Verifier(db, random.Random(0)).verify([], killkit.Totals())
