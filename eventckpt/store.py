"""The public entry point: `eventckpt.open(path)` gives a Store; `Store.stream(task_id)` a CheckpointStore."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

from . import overview, query, transfer
from .checks import check_task_id
from .checkpoint import Checkpoint
from .codec import UNKNOWN_TYPES, Codec
from .core import Core
from .errors import InvalidArgumentError, StoreClosedError, StreamInUseError
from .journal import DURABILITY, connect, is_postgres
from .overview import StreamSummary
from .paths import encodable
from .snapshot import SnapshotPolicy
from .stream import CheckpointStore
from .verify import VerifyReport, verify


def open(  # noqa: A001 - the module-level verb users call as eventckpt.open
    path: Any,
    *,
    durability: str = "normal",
    snapshots: SnapshotPolicy | None = None,
    timeout: float = 30.0,
    readonly: bool = False,
    types: Iterable[type] = (),
    unknown_types: str = "plain",
    allow_nan: bool = False,
    cache_size: int = 64,
    vfs: str | None = None,
    pool_size: int = 10,
    create: bool = True,
) -> Store:
    """Open (or create) the eventckpt store at `path`: a file (or ":memory:"), the embedded default; or,
    to share one store between many processes and hosts, a PostgreSQL database: a `postgresql://` URL,
    a psycopg connection (autocommit=True) or a psycopg_pool ConnectionPool (`pip install
    'eventckpt[postgres]'`). The same API and behaviour on both.

    durability: "normal" survives a killed process (WAL, synchronous=NORMAL); "full" also survives power
        loss (synchronous=FULL: every commit is fsynced).
    snapshots: the snapshot policy (see SnapshotPolicy).
    timeout: seconds a writer waits for another process's write lock before StoreBusyError.
    types: enums, dataclasses and attrs classes that stored data may decode into.
    unknown_types: what a stored enum or object of any other class (one this process never saved) decodes
        to: "plain", its value or its fields as a dict; "keep", an `Unregistered` holding its class name
        and value, which diff() and history() then tell apart from plain data and from other classes.
    allow_nan: store NaN and infinities instead of refusing them.
    cache_size: how many streams' head states stay in memory.
    vfs: the name of a registered SQLite VFS to open the file through (None: SQLite's default); how
        tests simulate power loss, a full disk or a read-only file.
    pool_size: PostgreSQL: the most connections eventckpt's own pool opens for a URL (one per thread
        working at once).
    create: False opens only an existing store: a missing or empty file (a database without the
        eventckpt schema) raises StoreNotFoundError and is left as it was. `readonly=True` never creates.

    On PostgreSQL, `durability="full"` forces synchronous_commit=on (the server's default), `timeout` also
    bounds the wait for a pooled connection, and `readonly` makes every transaction read-only.
    """
    if is_postgres(path):
        text: Any = path
    elif not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError("path", path, "must be a file path, ':memory:', a postgresql:// URL, or a psycopg"
                                                 " connection or pool")
    else:
        try:
            text = os.fspath(path)
        except TypeError:
            text = None
    if is_postgres(text):
        pass
    elif type(text) is not str or not text or "\x00" in text or not encodable(text):
        # "" would silently open a private temporary database; NUL and lone surrogates reach the
        # driver as raw ValueError / UnicodeEncodeError
        raise InvalidArgumentError("path", path, "must be a non-empty str path (no NUL, valid UTF-8) or ':memory:'")
    if type(durability) is not str or durability not in DURABILITY:  # a list or dict is unhashable
        raise InvalidArgumentError("durability", durability, f"must be one of {sorted(DURABILITY)}")
    if snapshots is not None and not isinstance(snapshots, SnapshotPolicy):
        raise InvalidArgumentError("snapshots", snapshots, "must be a SnapshotPolicy")
    if type(timeout) not in (int, float) or not 0 <= timeout < 86400:
        raise InvalidArgumentError("timeout", timeout, "must be a number of seconds (0 to 86400)")
    if type(cache_size) is not int or cache_size < 1:
        raise InvalidArgumentError("cache_size", cache_size, "must be a positive int")
    if vfs is not None and type(vfs) is not str:
        raise InvalidArgumentError("vfs", vfs, "must be None or the name of a registered SQLite VFS")
    for flag, value in (("readonly", readonly), ("allow_nan", allow_nan), ("create", create)):
        if type(value) is not bool:
            raise InvalidArgumentError(flag, value, "must be a bool")
    if type(pool_size) is not int or pool_size < 1:
        raise InvalidArgumentError("pool_size", pool_size, "must be a positive int")
    if isinstance(types, (str, bytes)) or not isinstance(types, Iterable):
        raise InvalidArgumentError("types", types, "must be an iterable of enum, dataclass or attrs classes")
    if type(unknown_types) is not str or unknown_types not in UNKNOWN_TYPES:
        raise InvalidArgumentError("unknown_types", unknown_types, f"must be one of {list(UNKNOWN_TYPES)}")
    codec = Codec(types, allow_nan=allow_nan, unknown_types=unknown_types)
    backend = connect(text, durability=durability, timeout=timeout, readonly=readonly, vfs=vfs, pool_size=pool_size,
                      create=create)
    return Store(Core(backend, codec, snapshots or SnapshotPolicy(), cache_size))


class Store:
    """One eventckpt store. Thread-safe. Use as a context manager.

    `core` is the engine-neutral core the feature modules build on (sessions, cached heads, restores);
    most programs never need it."""

    def __init__(self, core: Core) -> None:
        self.core = core
        self.path = core.backend.target

    @property
    def codec(self) -> Codec:
        return self.core.codec

    @property
    def policy(self) -> SnapshotPolicy:
        return self.core.policy

    def __repr__(self) -> str:
        return f"Store(path={self.path!r}{', closed' if self.closed else ''})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self.core.closed

    def close(self) -> None:
        """Close the store (idempotent). Checkpoints already returned keep the values they loaded."""
        self.core.close()

    def stream(self, task_id: str) -> CheckpointStore:
        """The stream named `task_id` (created by its first save)."""
        if self.core.closed:
            raise StoreClosedError()
        return CheckpointStore(self, check_task_id(task_id))

    def streams(self) -> list[str]:
        """The names of every stream in the store, oldest first."""
        with self.core.session() as journal:
            return journal.stream_names()

    def delete_stream(self, task_id: str, *, forks: bool = False) -> bool:
        """Delete a stream and its history; False when there was none. A stream whose history forks
        still share is kept (StreamInUseError) unless `forks=True`, which deletes them too. A stream of a
        LangGraph thread is kept (StreamInUseError with `.thread`): EventCkptSaver.delete_thread deletes it."""
        check_task_id(task_id)
        if type(forks) is not bool:
            raise InvalidArgumentError("forks", forks, "must be a bool")
        core = self.core
        with core.session() as journal:
            with journal.write():
                row = journal.stream(task_id)
                if row is not None:  # the tree's writers, forks and prunes wait from here on (PostgreSQL)
                    journal.lock_tree(row.tree_id)
                    row = journal.stream(task_id)  # read again: it may have gone while the lock was awaited
                if row is None:
                    return False
                doomed = core.subtree(journal, row)
                thread = journal.langgraph_thread_of(row.tree_id)
                # A thread's namespace row and pending writes would be left pointing at nothing; a fork the
                # saver made and holds no version yet (a put that failed) is its own to delete.
                if thread is not None and (row.parent_id is None or any(
                        journal.extent(victim) != (0, 0) for victim in doomed)):
                    raise StreamInUseError(task_id, [], thread)
                if len(doomed) > 1 and not forks:
                    raise StreamInUseError(task_id, [r.name for r in doomed[1:]])
                for victim in reversed(doomed):  # children before parents
                    journal.delete_stream(victim)
            for victim in doomed:
                core.forget_stream(victim)
            journal.reclaim()
            return True

    # -- search, verify, stats, export/import (eventckpt/query.py, verify.py, transfer.py) ---------

    def search(self, name: str | None = None, metadata: Mapping[str, Any] | None = None, *,
               limit: int | None = None) -> list[Checkpoint]:
        """Checkpoints of every stream with checkpoint `name` and/or the given `metadata` values, newest
        first. Each is reported once, under the stream that stores it. Indexed for a name and for str/int
        metadata values; other metadata values alone read every version row."""
        return query.search(self.core, name, metadata, limit)

    def summaries(self, limit: int = 100, *, before: str | None = None) -> list[StreamSummary]:
        """A page of streams, newest first: `StreamSummary(task_id, head, parent, tree, created_at,
        updated_at, token_usage)` for at most `limit` streams created before stream `before` (all
        when None). Indexed: costs O(limit), however many streams the store holds."""
        return overview.summaries(self.core, limit, before)

    def tree(self, task_id: str, *, limit: int | None = None) -> list[StreamSummary]:
        """The streams of `task_id`'s stream tree (its root and every fork below it, at most `limit`),
        oldest first, as `summaries()` gives them."""
        return overview.tree(self.core, task_id, limit)

    def verify(self, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Check the whole store: every version's checksum chain, every snapshot against a replay of the
        events, the engine's own integrity checks. Reads everything once (O(store));
        `progress(done, total)` is called as versions are checked. Returns a report; `report.ok` is False
        on any problem."""
        return verify(self.core, progress)

    def stats(self) -> dict[str, int]:
        """Streams, forks, versions, events, event and snapshot bytes, the database's bytes, the store
        file's bytes on disk and, apart, its write-ahead log's (`wal_bytes`: commits not yet copied into
        the file; SQLite reuses it, so it says nothing about the data). On PostgreSQL, `file_bytes` is the
        tables' size (pg_total_relation_size) and `wal_bytes` 0. Reads every row: O(store)."""
        with self.core.session() as journal, journal.read():
            out = journal.totals()
        local = self.core.backend.kind == "sqlite" and self.path != ":memory:"
        out["file_bytes"] = os.path.getsize(self.path) if local else out["database_bytes"]
        wal = self.path + "-wal"
        out["wal_bytes"] = os.path.getsize(wal) if local and os.path.exists(wal) else 0
        return out

    def sql(self, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run a read-only SQL query on the store (its tables and views: checkpoints, changes,
        path_history, lineage, stream_heads) and return its column names and rows. A statement that would
        write or change the connection is refused with ReadOnlyStoreError before it runs (SQLite: an
        authorizer; PostgreSQL: only a statement that returns rows, run read-only with no privilege beyond
        reading: see eventckpt/journal/postgres/caller_sql.py)."""
        if type(query) is not str or not encodable(query):
            raise InvalidArgumentError("query", query, "must be a str of SQL")
        with self.core.session() as journal:
            return journal.query(query)

    def export(self, task_id: str, *, forks: bool = False) -> Iterator[bytes]:
        """The stream's whole lineage as JSON Lines (one line per stream and per version; see
        eventckpt.transfer), with `forks=True` also every fork below it. Read a batch of versions at a time.
        On an SQLite file it reads one moment of the file, on a connection of its own; on PostgreSQL each
        batch is a transaction of its own, and a prune or deletion of an exported stream by another process
        meanwhile raises StoreBusyError (export it again). Saves on this store go on meanwhile."""
        return transfer.export(self, task_id, forks=forks)

    def import_lines(self, lines: Iterable[bytes | str], *, progress: Callable[[int], None] | None = None) -> list[str]:
        """Import streams exported by `export()`: identical states, times, names, metadata and usage at
        every version. Returns the stream names. The import is one transaction: on any error, or if the
        process dies, nothing of it is kept."""
        return transfer.import_lines(self, lines, progress)


def copy(source: Any, target: Any, *, progress: Callable[[int, int], None] | None = None) -> transfer.Copied:
    """Copy every stream of the store `source` into the store `target` (each a Store, or anything
    eventckpt.open takes: a file path, a postgresql:// URL, a psycopg connection or pool), keeping version
    numbers, times, names, metadata, usage and checksums, and the LangGraph saver's threads and pending
    writes: between engines in either direction. Values and metadata are copied as stored, whatever classes
    either Store was given. The copy is one transaction of the target (other writers of it wait): an
    error or a killed process leaves the target as it was, so the copy can be run again. Names the target
    already holds are refused before anything is written. `progress(done, total)` counts lines of the
    transfer. Returns the streams and versions copied."""
    opened: list[Store] = []

    def store_of(x: Any, create: bool) -> Store:
        if isinstance(x, Store):
            return x
        opened.append(open(x, create=create))
        return opened[-1]

    try:
        return transfer.copy(store_of(source, False), store_of(target, True), progress)
    finally:
        for store in opened:
            store.close()
