"""Invariant 5 and the no-SQL-injection rule: rows crafted to name code load as data (or fail with an
eventckpt error) and never run anything; caller strings holding SQL are stored and queried as data."""

from __future__ import annotations

import builtins
import importlib
import os
import pickle
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import apsw
import pytest

import eventckpt

from .conftest import RawSQL, journal_rows

CRAFTED = [
    '{"$object": ["os.system", {"command": "touch PWNED"}]}',
    '{"$object": ["subprocess.Popen", {"args": ["touch", "PWNED"]}]}',
    '{"$enum": ["builtins.eval", "__import__(\'os\').system(\'touch PWNED\')"]}',
    '{"$object": ["builtins.exec", {"source": "open(\'PWNED\', \'w\')"}]}',
    '{"$object": ["pickle.loads", {"data": "gASVAAAAAAAAAAB9lC4="}]}',
    '{"$enum": ["os.system", "touch PWNED"]}',
    '{"$tuple": [{"$object": ["os.system", {"command": "touch PWNED"}]}]}',
    '{"$dict": [[{"$enum": ["os.system", "k"]}, {"$object": ["os.popen", {"cmd": "touch PWNED"}]}]]}',
    '{"__reduce__": ["os.system", ["touch PWNED"]], "py/object": "os.system", "__class__": "os.system"}',
]


@contextmanager
def forbid_code(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record (and refuse) every attempt to run a command, evaluate code, unpickle or import a module
    by name while the block runs."""
    calls: list[str] = []
    real_import = builtins.__import__

    def spy(name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> Any:
            calls.append(f"{name}{args!r}")
            raise AssertionError(f"{name} was called")

        return record

    def guarded_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in ("os", "subprocess", "pickle", "posix", "builtins"):
            calls.append(f"import {name}")
        return real_import(name, *args, **kwargs)

    with monkeypatch.context() as patch:
        for target, attr in ((os, "system"), (os, "popen"), (subprocess, "Popen"), (pickle, "loads"),
                             (builtins, "eval"), (builtins, "exec"), (importlib, "import_module")):
            patch.setattr(target, attr, spy(f"{target.__name__}.{attr}"))
        patch.setattr(builtins, "__import__", guarded_import)
        yield calls


def _tamper(path: Path, sql: str, *args: Any) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(sql, args)
    conn.close()


def _load_everything(path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Read every version's state, metadata and usage through the public API with code forbidden;
    asserts that nothing was run, imported or created."""
    out: list[Any] = []
    monkeypatch.chdir(path.parent)
    with forbid_code(monkeypatch) as calls:
        out = _load(path)
    assert calls == []
    assert not (path.parent / "PWNED").exists()
    return out


def _load(path: Path) -> list[Any]:
    out: list[Any] = []
    try:
        with eventckpt.open(path) as store:
            for name in store.streams():
                task = store.stream(name)
                for version in task.list_versions():
                    cp = task.get(version)
                    out.append((cp.values, cp.metadata, cp.token_usage))
    except eventckpt.EventCkptError as exc:  # failing cleanly is allowed; running code is not
        out.append(exc)
    return out


@pytest.mark.parametrize("crafted", CRAFTED)
@pytest.mark.parametrize("column", ["event value", "snapshot state", "metadata"])
def test_crafted_rows_never_run_code(db_path: Path, crafted: str, column: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A row crafted to name os.system, eval, exec, pickle or Popen in any stored column loads as data
    or fails with an eventckpt error; nothing is imported, called or created."""
    with eventckpt.open(db_path, snapshots=eventckpt.SnapshotPolicy.every_version()) as store:
        store.stream("t").save({"x": 1, "y": [1]}, metadata={"m": 1})
    if column == "event value":
        _tamper(db_path, "UPDATE events SET value = ? WHERE path = '$.x'", crafted)
        _tamper(db_path, "DELETE FROM snapshots")
    elif column == "snapshot state":
        _tamper(db_path, "UPDATE snapshots SET state = json_set(state, '$.x', json(?))", crafted)
    else:
        _tamper(db_path, "UPDATE versions SET metadata = json_object('m', json(?))", crafted)
    loaded = _load_everything(db_path, monkeypatch)
    assert loaded  # something was read (data or a clean error)
    for item in loaded:
        assert isinstance(item, (tuple, eventckpt.EventCkptError))
        if isinstance(item, tuple):
            assert not any(callable(v) for v in _leaves(item))


def _leaves(value: Any) -> Iterator[Any]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(k)
            yield from _leaves(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


@pytest.mark.parametrize(
    ("column", "sql", "crafted"),
    [
        ("path", "UPDATE events SET path = ? WHERE path = '$.x'", "$.x'); DROP TABLE events; --"),
        ("path", "UPDATE events SET path = ? WHERE path = '$.x'", '$."__class__"'),
        ("manifest", "UPDATE snapshots SET manifest = ?", '{"x": ["os.system", 1]}'),
        ("manifest", "UPDATE snapshots SET manifest = ?", '{"$object": ["os.system", {}]}'),
        ("op", "UPDATE events SET op = 'delete' WHERE path = '$.y'", None),
        ("usage", "UPDATE versions SET usage = ?", '{"$object": ["os.system", {"command": "x"}]}'),
    ],
)
def test_crafted_structure_fails_cleanly(db_path: Path, column: str, sql: str, crafted: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Crafted paths, manifests, ops and usage load as data or raise an eventckpt error; no code runs."""
    with eventckpt.open(db_path, snapshots=eventckpt.SnapshotPolicy.every_version()) as store:
        store.stream("t").save({"x": 1, "y": [1]})
        store.stream("t").save({"x": 2, "y": [1, 2]})
    _tamper(db_path, sql, *(() if crafted is None else (crafted,)))
    loaded = _load_everything(db_path, monkeypatch)
    assert all(isinstance(item, (tuple, eventckpt.EventCkptError)) for item in loaded)


SQL_STRINGS = [
    "x'); DROP TABLE events; --",
    "' OR 1=1 --",
    '"; DELETE FROM versions; --',
    "%",
    "_",
    "t*",
    "$.x",
]


@pytest.mark.parametrize("sql", SQL_STRINGS)
def test_sql_in_every_caller_string_is_data(tmp_path: Path, engine: str, new_target: Any, sql: str) -> None:
    """SQL, LIKE wildcards and JSON-path text in stream names, fork names, nested keys, transaction paths,
    names, checkpoint ids, metadata and the file path are stored and matched literally, on each engine."""
    path = tmp_path / f"store {sql.replace('/', '')}.db" if engine == "sqlite" else new_target()
    with eventckpt.open(path) as store:
        store.stream("t").save({"keep": 1})
        task = store.stream(sql)
        task.save({"n": {sql: 1}}, metadata={sql: sql}, name=sql, checkpoint_id=sql)
        with task.transaction() as tx:
            if '"' in sql:  # a key with a double quote cannot be written into a JSON path at all
                with pytest.raises(eventckpt.PathError):
                    tx.set(("n", sql), 2)
                tx.set("n", {sql: 2})
            else:
                tx.set(("n", sql), 2)
            tx.set(("m",), {sql: [sql]})
        fork = task.fork(task_id=sql + "~fork")
        fork.save({"n": {sql: 3}})
        assert store.streams() == ["t", sql, sql + "~fork"]
        assert task.state() == {"n": {sql: 2}, "m": {sql: [sql]}}
        assert task.get(1).metadata == {sql: sql} and task.get(1).name == sql
        assert task.find(sql).version == 1 and store.stream("t").find(sql) is None
        assert fork.state() == {"n": {sql: 3}}
        assert store.delete_stream(sql, forks=True)
        assert store.streams() == ["t"] and store.stream("t").state() == {"keep": 1}
    rows = journal_rows(path)
    with RawSQL(path) as raw:
        assert raw.execute("SELECT name FROM streams") == [("t",)]
    assert set(rows) >= {"streams", "versions", "events", "snapshots", "checkpoint_ids"}
