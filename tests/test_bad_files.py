"""Bad files and bad disks: a truncated or damaged file, a read-only file or mount, a full disk. Each
gives a typed eventckpt error (never a driver error) and leaves the file as it was. Foreign, non-SQLite
and newer-schema files are in test_open.py. Permissions and a full disk are simulated with
tests/faultvfs.py: chmod does not stop root."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

import eventckpt

from .conftest import RawSQL, journal_rows
from .faultvfs import FaultVFS


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _fill(path: Path) -> dict[str, Any]:
    """A store with three streams, a fork and snapshots; returns each stream's head state."""
    with eventckpt.open(path, snapshots=eventckpt.SnapshotPolicy(min_tail_bytes=4096)) as store:
        for i in range(150):
            store.stream(f"t{i % 3}").save({"log": [f"entry {n}" * 3 for n in range(i // 3)], "i": i})
        store.stream("t0").fork(at=10, task_id="f").save({"forked": True})
        heads = {name: store.stream(name).state() for name in store.streams()}
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()  # everything in the main file
    conn.close()
    return heads


def _read_everything(path: Path, **options: Any) -> dict[str, Any]:
    with eventckpt.open(path, **options) as store:
        out = {}
        for name in store.streams():
            task = store.stream(name)
            out[name] = task.state()
            for v in task.list_versions():
                task.get(v).values
        return out


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = tmp_path_factory.mktemp("filled") / "base.db"
    return path, _fill(path)


@pytest.fixture
def vfs_factory() -> Iterator[Callable[..., FaultVFS]]:
    made: list[FaultVFS] = []

    def make(**faults: Any) -> FaultVFS:
        made.append(FaultVFS(f"test-faults-{len(made)}", **faults))
        return made[-1]

    yield make
    for vfs in made:
        vfs.unregister()


# -- truncated and damaged files ------------------------------------------------------------------


@pytest.mark.parametrize("keep", [0.0, 0.001, 0.05, 0.5, 0.9, 0.999])
def test_truncated_file(filled: tuple[Path, dict[str, Any]], tmp_path: Path, keep: float) -> None:
    """A file cut short is refused (ForeignFileError / CorruptStoreError) or read in full; never a raw
    driver error, and the file is not modified."""
    base, heads = filled
    path = tmp_path / "cut.db"
    shutil.copy(base, path)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(max(1, int(size * keep)))
    before = _digest(path)
    try:
        assert _read_everything(path) == heads
    except (eventckpt.ForeignFileError, eventckpt.CorruptStoreError):
        pass
    assert _digest(path) == before


@pytest.mark.parametrize("where", [0.0, 0.3, 0.6, 0.95])
def test_damaged_page(filled: tuple[Path, dict[str, Any]], tmp_path: Path, where: float) -> None:
    """A page overwritten with garbage is refused or reported as CorruptStoreError when read (or lies in
    free space and reads fine); the file is not modified."""
    base, heads = filled
    path = tmp_path / "damaged.db"
    shutil.copy(base, path)
    page = int(path.stat().st_size * where) // 4096 * 4096
    with open(path, "r+b") as f:
        f.seek(page + (100 if page == 0 else 0))
        f.write(bytes(range(256)) * 15)
    before = _digest(path)
    try:
        _read_everything(path)
    except (eventckpt.ForeignFileError, eventckpt.CorruptStoreError):
        pass
    assert _digest(path) == before


# -- read-only files and mounts -------------------------------------------------------------------

WRITES: dict[str, Callable[[eventckpt.Store], Any]] = {
    "save": lambda s: s.stream("t0").save({"x": 1}),
    "transaction": lambda s: s.stream("t1").transaction().__enter__().set("x", 1).__exit__(None, None, None),
    "new stream": lambda s: s.stream("new").save({"x": 1}),
    "fork": lambda s: s.stream("t2").fork(),
    "rollback": lambda s: s.stream("t0").rollback(1),
    "delete_stream": lambda s: s.delete_stream("f"),
}


@pytest.mark.parametrize("mode", ["file", "mount"])
def test_read_only_file(filled: tuple[Path, dict[str, Any]], tmp_path: Path, mode: str,
                        vfs_factory: Callable[..., FaultVFS]) -> None:
    """On a file without write permission (or a read-only mount) every read works and every write raises
    ReadOnlyStoreError; the file is byte-for-byte unchanged."""
    base, heads = filled
    path = tmp_path / "ro.db"
    shutil.copy(base, path)
    before = _digest(path)
    vfs = vfs_factory(readonly=mode)
    for readonly in (False, True):
        try:
            store = eventckpt.open(path, vfs=vfs.name, readonly=readonly)
        except eventckpt.StorageError as exc:  # a WAL store on a read-only mount without its -shm
            assert mode == "mount" and "cannot open" in str(exc)
            continue
        with store:
            assert {name: store.stream(name).state() for name in store.streams()} == heads
            for name, write in WRITES.items():
                with pytest.raises(eventckpt.ReadOnlyStoreError):
                    write(store)
            assert store.stream("t0").state() == heads["t0"]
    assert _digest(path) == before


def test_read_only_mount_with_wal_files(filled: tuple[Path, dict[str, Any]], tmp_path: Path,
                                        vfs_factory: Callable[..., FaultVFS]) -> None:
    """A store copied with its -wal and -shm while in use opens on a read-only mount: reads include what
    is only in the WAL, writes are refused, and no file changes."""
    base, heads = filled
    live = tmp_path / "live.db"
    shutil.copy(base, live)
    with eventckpt.open(live) as store:
        store.stream("t0").save({"extra": 1})  # only in the WAL
        for suffix in ("", "-wal", "-shm"):
            shutil.copy(f"{live}{suffix}", tmp_path / f"ro.db{suffix}")
    heads = {**heads, "t0": {"extra": 1}}
    path = tmp_path / "ro.db"
    before = {p.name: _digest(p) for p in (path, tmp_path / "ro.db-wal")}  # (-shm is shared memory, not data)
    vfs = vfs_factory(readonly="mount")
    with eventckpt.open(path, vfs=vfs.name) as store:
        assert {name: store.stream(name).state() for name in store.streams()} == heads
        with pytest.raises(eventckpt.ReadOnlyStoreError):
            store.stream("t0").save({"x": 1})
    assert {p.name: _digest(p) for p in (path, tmp_path / "ro.db-wal")} == before


# -- a full disk ----------------------------------------------------------------------------------


def test_full_disk_at_every_budget(tmp_path: Path, vfs_factory: Callable[..., FaultVFS]) -> None:
    """With the disk filling up at any point of a series of writes, each write either lands whole or
    raises StorageFullError and changes no row; once space is back the same store writes again and a
    fresh connection agrees."""
    vfs = vfs_factory()
    failures = 0
    for budget in [0, 1, 100, 4096, 5000, 8192, 12000, 20000, 40000, 70000]:
        path = tmp_path / f"full-{budget}.db"
        with eventckpt.open(path, vfs=vfs.name, snapshots=eventckpt.SnapshotPolicy.every_version()) as store:
            store.core.backend.journal.conn.execute("PRAGMA wal_autocheckpoint = 0")  # see test_full_disk_at_checkpoint
            store.stream("t").save({"log": ["a"], "n": 0})
            vfs.space = vfs.written + budget
            for i, write in enumerate(FULL_DISK_WRITES):
                before = journal_rows(path)
                try:
                    write(store, i)
                except eventckpt.StorageFullError:
                    failures += 1
                    assert journal_rows(path) == before
            vfs.space = None
            store.stream("t").save({"log": ["after"], "n": -1})
            seen = {name: store.stream(name).state() for name in store.streams()}
        with eventckpt.open(path) as fresh:
            assert {name: fresh.stream(name).state() for name in fresh.streams()} == seen
        conn = apsw.Connection(str(path))
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        conn.close()
    assert failures >= 10  # the budgets really ran out


FULL_DISK_WRITES: list[Callable[[eventckpt.Store, int], Any]] = [
    lambda s, i: s.stream("t").save({"log": ["a", "b" * 3000], "n": i}),
    lambda s, i: s.stream("t").transaction().__enter__().append("log", "c" * 9000).incr("n").__exit__(None, None, None),
    lambda s, i: s.stream("u").save({"big": "x" * 30000}),
    lambda s, i: s.stream("t").fork(task_id="t-fork"),
    lambda s, i: s.stream("t").rollback(1),
    lambda s, i: s.delete_stream("u"),
    lambda s, i: s.stream("t").save({"log": [], "n": i}),
]


def test_full_disk_at_checkpoint(tmp_path: Path, vfs_factory: Callable[..., FaultVFS]) -> None:
    """A checkpoint that runs out of space fails without losing or changing anything (the WAL still holds
    every committed version), and completes once space is back.

    (Automatic checkpoints run inside COMMIT; SQLite ignores their errors, but apsw would raise a Python
    VFS's error from the COMMIT anyway, so the budget tests above disable them and this one checkpoints
    explicitly.)"""
    vfs = vfs_factory()
    path = tmp_path / "ckpt.db"
    with eventckpt.open(path, vfs=vfs.name) as store:
        conn = store.core.backend.journal.conn
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        for i in range(40):
            store.stream("t").save({"log": [f"item {n}" * 20 for n in range(i)]})
        rows = journal_rows(path)
        vfs.space = vfs.written + 10000
        with pytest.raises(apsw.FullError):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        assert journal_rows(path) == rows
        vfs.space = None
        assert conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0] == 0
        assert journal_rows(path) == rows
    assert _read_everything(path)["t"]["log"][-1] == "item 38" * 20


# -- damaged values -------------------------------------------------------------------------------


def _small(target: Path | str) -> None:
    with eventckpt.open(target) as store:
        task = store.stream("t")
        task.save({"messages": ["hello"]}, metadata={"node": "input"})
        with task.transaction(metadata={"node": "agent"}) as tx:
            tx.append("messages", "un café")
        task.save({**task.state(), "step": 3}, metadata={"node": "planner"})


def test_a_string_that_is_not_utf8_is_a_corrupt_store(db_path: Path) -> None:
    """A stored string that is not UTF-8 (one flipped bit in 'café') is a CorruptStoreError naming the table,
    for reads and for sql, never Python's UnicodeDecodeError."""
    _small(db_path)
    with RawSQL(db_path) as raw:  # '"caf\xc3)"': the 'é' with one bit of its second byte flipped
        raw.execute("UPDATE events SET value = CAST(X'22636166c32922' AS TEXT) WHERE value LIKE '%caf%'")
    with eventckpt.open(db_path, readonly=True) as store:
        task = store.stream("t")
        for read in (lambda: task.state(2), lambda: task.history("messages"),
                     lambda: store.sql("SELECT value FROM events")):
            with pytest.raises(eventckpt.CorruptStoreError, match="not UTF-8"):
                read()
        assert task.state(1) == {"messages": ["hello"]}  # what lies before the damage still reads


def test_damaged_json_is_a_corrupt_store(store_target: str) -> None:
    """Stored JSON that does not parse (metadata, an event) is a CorruptStoreError wherever it is read: log,
    search, history and restores alike (log and history raised SerializationError)."""
    _small(store_target)
    with RawSQL(store_target) as raw:
        raw.execute("UPDATE events SET value = '\"un caf' WHERE value LIKE '%caf%'")
        if raw.kind == "sqlite":  # JSON5, which SQLite's index on metadata reads (PostgreSQL's refuses the row)
            raw.execute("UPDATE versions SET metadata = '{node: ''agent''}' WHERE version = 2")
    with eventckpt.open(store_target) as store:
        task = store.stream("t")
        reads = [lambda: task.history("messages"), lambda: task.state(2)]
        if not store_target.startswith("postgresql://"):
            reads += [lambda: task.log(), lambda: store.search(metadata={"node": "agent"})]
        for read in reads:
            with pytest.raises(eventckpt.CorruptStoreError, match="damaged"):
                read()
