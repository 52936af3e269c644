"""Opening a store: the schema ladder, file identity, refusal of foreign and newer files."""

from __future__ import annotations

import gc
import os
import weakref
from pathlib import Path
from typing import Any

import apsw
import pytest

import eventckpt
from eventckpt.journal import APPLICATION_ID, SCHEMA_VERSION, schema_files


def test_fresh_file_gets_schema_and_identity(db_path: Path) -> None:
    """A new file is stamped with eventckpt's application_id and the latest user_version, in WAL mode."""
    eventckpt.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA application_id").fetchall()[0][0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    assert conn.execute("PRAGMA auto_vacuum").fetchall()[0][0] == 2  # incremental: prune can give space back
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    assert {"streams", "versions", "events", "snapshots", "checkpoint_ids"} <= tables


def test_schema_files_are_a_ladder() -> None:
    """Schema files start at 001 and are numbered uniquely in order; the highest is the schema version."""
    numbers = [n for n, _, _ in schema_files()]
    assert numbers[0] == 1 and numbers == sorted(set(numbers))
    assert SCHEMA_VERSION == numbers[-1]


def test_reopen_keeps_data(db_path: Path) -> None:
    """Closing and reopening a store keeps every version."""
    with eventckpt.open(db_path) as store:
        store.stream("t").save({"a": 1})
    with eventckpt.open(db_path) as store:
        assert store.stream("t").state() == {"a": 1}
        assert store.streams() == ["t"]


def test_memory_store() -> None:
    """':memory:' gives a working store that lives as long as the connection."""
    with eventckpt.open(":memory:") as store:
        store.stream("t").save({"a": [1, 2]})
        assert store.stream("t").state() == {"a": [1, 2]}


def test_pathlike_accepted(tmp_path: Path) -> None:
    """open() accepts str and os.PathLike paths."""
    eventckpt.open(str(tmp_path / "a.db")).close()
    eventckpt.open(tmp_path / "b.db").close()
    assert os.path.exists(tmp_path / "a.db") and os.path.exists(tmp_path / "b.db")


def test_foreign_sqlite_file_refused_untouched(tmp_path: Path) -> None:
    """A SQLite database that is not an eventckpt store is refused and not modified."""
    path = tmp_path / "other.db"
    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute("INSERT INTO customers (name) VALUES ('ada')")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(eventckpt.ForeignFileError) as info:
        eventckpt.open(path)
    assert "not an eventckpt store" in str(info.value)
    assert path.read_bytes() == before
    assert not os.path.exists(str(path) + "-wal")


def test_other_application_id_refused(tmp_path: Path) -> None:
    """An empty SQLite file stamped by another application is refused."""
    path = tmp_path / "other.db"
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA application_id = 1234")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(eventckpt.ForeignFileError):
        eventckpt.open(path)
    assert path.read_bytes() == before


def test_non_sqlite_file_refused_untouched(tmp_path: Path) -> None:
    """A file that is not SQLite at all is refused with ForeignFileError and left as it was."""
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = path.read_bytes()
    with pytest.raises(eventckpt.ForeignFileError) as info:
        eventckpt.open(path)
    assert "not a SQLite database" in str(info.value)
    assert path.read_bytes() == before


def test_newer_schema_refused_untouched(db_path: Path) -> None:
    """A store written by a newer eventckpt (higher user_version) is refused without modification."""
    eventckpt.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    before = db_path.read_bytes()
    with pytest.raises(eventckpt.NewerSchemaError) as info:
        eventckpt.open(db_path)
    assert info.value.found == SCHEMA_VERSION + 1 and info.value.supported == SCHEMA_VERSION
    assert db_path.read_bytes() == before


def test_older_schema_upgraded_in_one_step(db_path: Path) -> None:
    """A file at an older rung of the ladder is brought to the latest version on open."""
    first = schema_files()[0]
    conn = apsw.Connection(str(db_path))
    conn.execute(first[2])
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    eventckpt.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA user_version").fetchall()[0][0] == SCHEMA_VERSION


def test_readonly_open_reads_but_refuses_writes(db_path: Path) -> None:
    """readonly=True reads every version and refuses writes with ReadOnlyStoreError."""
    with eventckpt.open(db_path) as store:
        store.stream("t").save({"a": 1})
    with eventckpt.open(db_path, readonly=True) as store:
        assert store.stream("t").state() == {"a": 1}
        with pytest.raises(eventckpt.ReadOnlyStoreError):
            store.stream("t").save({"a": 2})
        assert store.stream("t").version == 1


def test_readonly_open_leaves_no_wal_files(db_path: Path) -> None:
    """A read-only store that found no -wal/-shm leaves none behind when it closes, and the database's
    bytes are unchanged; while another connection has the file open, both files stay (it uses them)."""
    with eventckpt.open(db_path) as store:
        store.stream("t").save({"a": 1})
    listing = sorted(os.listdir(db_path.parent))
    before = db_path.read_bytes()
    with eventckpt.open(db_path, readonly=True) as store:
        assert store.stream("t").state() == {"a": 1}
        assert os.path.exists(f"{db_path}-wal") and os.path.exists(f"{db_path}-shm")  # SQLite's, while open
    assert sorted(os.listdir(db_path.parent)) == listing and db_path.read_bytes() == before
    with eventckpt.open(db_path) as writer:
        writer.stream("t").save({"a": 2})
        with eventckpt.open(db_path, readonly=True) as reader:
            assert reader.stream("t").state() == {"a": 2}
        assert os.path.exists(f"{db_path}-wal") and writer.stream("t").save({"a": 3}).version == 3
    with eventckpt.open(db_path, readonly=True) as reader:
        assert reader.stream("t").state() == {"a": 3}


def test_readonly_open_of_missing_schema_refused(tmp_path: Path) -> None:
    """A read-only open of a file without the schema is refused (it cannot be created read-only)."""
    path = tmp_path / "empty.db"
    apsw.Connection(str(path)).close()
    with pytest.raises(eventckpt.SchemaError):
        eventckpt.open(path, readonly=True)


def test_closed_store_refuses_calls(db_path: Path) -> None:
    """Every call on a closed store raises StoreClosedError; close() is idempotent."""
    store = eventckpt.open(db_path)
    stream = store.stream("t")
    store.close()
    store.close()
    for call in (lambda: stream.save({"a": 1}), lambda: stream.version, store.streams, lambda: store.stream("x")):
        with pytest.raises(eventckpt.StoreClosedError):
            call()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"durability": "sometimes"},
        {"timeout": -1},
        {"timeout": "5"},
        {"snapshots": "often"},
        {"cache_size": 0},
        {"readonly": "no"},
        {"allow_nan": 1},
    ],
)
def test_bad_open_arguments(db_path: Path, kwargs: dict) -> None:
    """Bad arguments to open() raise InvalidArgumentError and create no file."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.open(db_path, **kwargs)
    assert not db_path.exists()


def test_bad_path_type() -> None:
    """A path that is neither str nor PathLike is refused."""
    with pytest.raises(eventckpt.InvalidArgumentError):
        eventckpt.open(42)  # type: ignore[arg-type]


def test_durability_full_sets_synchronous_full(db_path: Path) -> None:
    """durability='full' runs the connection with synchronous=FULL (fsync at every commit)."""
    with eventckpt.open(db_path, durability="full") as store:
        assert store.core.backend.journal.conn.execute("PRAGMA synchronous").fetchall()[0][0] == 2
    with eventckpt.open(db_path) as store:
        assert store.core.backend.journal.conn.execute("PRAGMA synchronous").fetchall()[0][0] == 1


def test_connection_setup(db_path: Path) -> None:
    """Every connection runs with foreign keys on and a busy timeout."""
    with eventckpt.open(db_path, timeout=7) as store:
        conn = store.core.backend.journal.conn
        assert conn.execute("PRAGMA foreign_keys").fetchall()[0][0] == 1
        assert conn.execute("PRAGMA busy_timeout").fetchall()[0][0] == 7000


def test_a_store_dropped_without_close_is_freed_at_once(db_path: Path) -> None:
    """A store the caller drops unclosed releases its connection then (nothing in it refers back to it),
    not whenever the cyclic collector next runs: SQLite removes the -wal file as the connection closes."""
    paused = gc.isenabled()
    gc.disable()
    try:
        store = eventckpt.open(db_path)
        store.stream("s").save({"k": 1})
        core = weakref.ref(store.core)
        del store
        assert core() is None
        assert not os.path.exists(f"{db_path}-wal")
    finally:
        if paused:
            gc.enable()


def test_vfs_routes_file_access(db_path: Path) -> None:
    """open(vfs=name) does every file access of the store through the named SQLite VFS."""
    opened: list[str] = []

    class Counting(apsw.VFS):
        def __init__(self) -> None:
            super().__init__("eventckpt-test-counting", "")

        def xOpen(self, name: Any, flags: list[int]) -> apsw.VFSFile:
            opened.append(name.filename() if isinstance(name, apsw.URIFilename) else str(name))
            return apsw.VFSFile("", name, flags)

    vfs = Counting()
    try:
        with eventckpt.open(db_path, vfs="eventckpt-test-counting") as store:
            store.stream("t").save({"a": 1})
        assert str(db_path) in opened and str(db_path) + "-wal" in opened
    finally:
        vfs.unregister()


def test_unknown_vfs_refused(db_path: Path) -> None:
    """An unregistered or non-str vfs name is refused before any file is created."""
    for bad in ("no-such-vfs", 5):
        with pytest.raises(eventckpt.InvalidArgumentError):
            eventckpt.open(db_path, vfs=bad)  # type: ignore[arg-type]
    assert not db_path.exists()


@pytest.mark.parametrize("content", [b"x", b"\n", b"\x00"])
def test_one_byte_file_refused_untouched(tmp_path: Path, content: bytes) -> None:
    """A 1-byte file (which SQLite reads as an empty database) is someone's data: refused, not overwritten."""
    path = tmp_path / "note.db"
    path.write_bytes(content)
    with pytest.raises(eventckpt.ForeignFileError):
        eventckpt.open(path)
    assert path.read_bytes() == content


def test_empty_file_becomes_a_store(tmp_path: Path) -> None:
    """A 0-byte file (e.g. made by touch) is an empty database and becomes a store."""
    path = tmp_path / "touched.db"
    path.touch()
    with eventckpt.open(path) as store:
        store.stream("t").save({"a": 1})
    with eventckpt.open(path) as store:
        assert store.stream("t").state() == {"a": 1}


@pytest.mark.parametrize("options", [{"readonly": True}, {"create": False}])
@pytest.mark.parametrize("kind", ["missing", "empty", "empty database"])
def test_reading_opens_never_create_a_store(tmp_path: Path, options: dict, kind: str) -> None:
    """open(readonly=True) and open(create=False) of a missing file, a 0-byte file or an empty SQLite
    database raise StoreNotFoundError and leave the directory as it was (no store, no -wal/-shm)."""
    path = tmp_path / "store.db"
    if kind == "empty":
        path.touch()
    elif kind == "empty database":
        apsw.Connection(str(path)).close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(eventckpt.StoreNotFoundError) as info:
        eventckpt.open(path, **options)
    assert info.value.path == str(path) and ("no such file" if kind == "missing" else "empty") in str(info.value)
    assert isinstance(info.value, eventckpt.SchemaError)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_create_false_opens_an_existing_store_for_writing(db_path: Path) -> None:
    """create=False opens a store that exists like open() does: reads and writes work."""
    eventckpt.open(db_path).close()
    with eventckpt.open(db_path, create=False) as store:
        store.stream("t").save({"a": 1})
        assert store.stream("t").state() == {"a": 1}
