"""Invariant 2 under SIGKILL: writer processes running workload W are killed at random and at exact
moments (tests/killkit.py); after every kill the file is intact, holds only whole versions, and every
acknowledged version restores to exactly what was saved."""

from __future__ import annotations

import random
from pathlib import Path

import apsw
import pytest

import eventckpt

from . import killkit, wmodel

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


def write_w(db: Path, name: str, upto: int) -> None:
    """Versions 1..upto of a W stream, written directly (each as a whole-state save)."""
    with eventckpt.open(db) as store:
        task = store.stream(name)
        for _, model in wmodel.versions(name, upto):
            task.save(model.state, model.usage, metadata=model.metadata, auto=model.auto,
                      checkpoint_id=model.checkpoint_id)


def delete_version(db: Path, name: str, version: int) -> None:
    conn = apsw.Connection(str(db))
    (sid,) = conn.execute("SELECT id FROM streams WHERE name = ?", (name,)).fetchone()
    for table in ("snapshots", "events", "checkpoint_ids", "versions"):
        conn.execute(f"DELETE FROM {table} WHERE stream_id = ? AND version = ?", (sid, version))
    conn.close()


def test_a_half_done_prune_is_caught(tmp_path: Path) -> None:
    """A prune that was to remove versions 2 and 3 but removed only 2 fails the all-or-nothing check."""
    db = tmp_path / "w.db"
    write_w(db, "w0", 12)
    verifier = killkit.Verifier(db, random.Random(0))
    verifier.note([["p", "w0", "12", "2,3"]])
    verifier.verify([], killkit.Totals())  # nothing removed yet: the prune did not happen
    delete_version(db, "w0", 2)
    verifier.note([["p", "w0", "12", "2,3"]])
    with pytest.raises(AssertionError, match="was half done"):
        verifier.verify([], killkit.Totals())


def test_a_partial_copy_is_caught(tmp_path: Path) -> None:
    """A copy that holds less than the export it was imported from (a partial import) fails the check."""
    db = tmp_path / "w.db"
    write_w(db, "w0", 12)
    with eventckpt.open(db) as store:
        lines, versions = killkit.copy_lines(store, "w0", "copy:0:w0")
        store.import_lines(lines)
    verifier = killkit.Verifier(db, random.Random(0))
    verifier.note([["i", "copy:0:w0", "w0", "12", ",".join(map(str, versions))]])
    totals = killkit.Totals()
    verifier.verify([], totals)
    assert totals.checked == 24  # every version of the stream and of its copy restores to the model
    delete_version(db, "copy:0:w0", 12)
    with pytest.raises(AssertionError, match="partial import"):
        verifier.verify([], killkit.Totals())


def test_a_hole_no_prune_made_is_caught(tmp_path: Path) -> None:
    """The Verifier accepts retention's holes only where a prune planned them: a version deleted behind
    its back (events and row) fails the check, even in a stream a prune touched."""
    db = tmp_path / "w.db"
    write_w(db, "w0", 12)
    delete_version(db, "w0", 10)
    verifier = killkit.Verifier(db, random.Random(0))
    verifier.note([["p", "w0", "12", "2,3"]])
    with pytest.raises(AssertionError, match=r"has a gap no prune made or a version a prune removed: \[10\]"):
        verifier.verify([], killkit.Totals())
