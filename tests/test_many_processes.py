"""Invariant 3 with many processes on one file: optimistic writers on one stream end with dense versions
and no lost update; writers on their own streams never see "database is locked"; readers during writes
always see whole versions. The children are tests/contenders.py."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson

import eventckpt

from .contenders import check_whole, entry

REPO = Path(__file__).resolve().parent.parent
PROCESSES = 8
SAVES = 500  # per process on the shared stream: 4000 versions
OWN_SAVES = 300  # per process on its own stream


def start(role: str, db: Path, stream: str, writer: int = 0, count: int = 0) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.contenders", role, str(db), stream, str(writer), str(count)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(proc: subprocess.Popen[bytes]) -> dict[str, int]:
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err.decode()[-3000:]
    return orjson.loads(out)


def run_with_readers(db: Path, writers: list[tuple[str, str, int, int]], streams: list[str]) -> list[dict[str, int]]:
    """Start readers, then the writers (role, stream, writer, count); wait for the writers, stop the readers."""
    readers = [start("reader", db, stream) for stream in streams]
    results = [finish(p) for p in [start(role, db, stream, i, n) for role, stream, i, n in writers]]
    Path(str(db) + ".stop").touch()
    reads = [finish(p)["reads"] for p in readers]
    assert all(n > 0 for n in reads), f"a reader never saw a version: {reads}"
    return results


def test_optimistic_writers_on_one_stream_end_dense(tmp_path: Path) -> None:
    """8 processes x 500 saves on one stream (save and transaction styles, expected_version, retry on
    ConflictError) while 2 readers read: exactly 4000 dense versions, every save exactly once, in order."""
    db = tmp_path / "shared.db"
    eventckpt.open(db).close()
    writers = [("save" if i % 2 else "tx", "shared", i, SAVES) for i in range(PROCESSES)]
    results = run_with_readers(db, writers, ["shared", "shared"])
    total = PROCESSES * SAVES
    with eventckpt.open(db) as store:
        task = store.stream("shared")
        assert task.list_versions() == list(range(1, total + 1))
        head = task.state()
        assert head["n"] == total
        log = [tuple(map(int, e.split(":"))) for e in head["log"]]
        assert Counter(w for w, _ in log) == {i: SAVES for i in range(PROCESSES)}
        for i in range(PROCESSES):  # each writer's saves landed once, in its own order
            assert [s for w, s in log if w == i] == list(range(SAVES))
        for v in range(1, total + 1):
            cp = task.get(v)
            assert cp.token_usage == {"saves": v} and head["log"][v - 1] == entry(cp.metadata["writer"], cp.metadata["seq"])
        for v in range(1, total + 1, 97):
            check_whole(task.get(v))
    assert sum(r["conflicts"] for r in results) > 0  # the writers really contended


def test_writers_on_their_own_streams_never_see_locked(tmp_path: Path) -> None:
    """8 processes start at once on a file that does not exist yet and save 300 versions each to their own
    stream with the default busy timeout: none fails (no StoreBusyError), every version is there."""
    db = tmp_path / "own.db"
    writers = [start("plain", db, f"s{i}", i, OWN_SAVES) for i in range(PROCESSES)]
    for proc in writers:
        finish(proc)
    with eventckpt.open(db) as store:
        assert sorted(store.streams()) == [f"s{i}" for i in range(PROCESSES)]
        for i in range(PROCESSES):
            task = store.stream(f"s{i}")
            assert task.list_versions() == list(range(1, OWN_SAVES + 1))
            check_whole(task.latest)


def test_readers_during_writes_see_whole_versions(tmp_path: Path) -> None:
    """Readers in other processes, reading while 4 writers save to their streams, only ever see whole versions."""
    db = tmp_path / "read.db"
    eventckpt.open(db).close()
    run_with_readers(db, [("plain", f"s{i}", i, OWN_SAVES) for i in range(4)], ["s0", "s1", "s2"])
