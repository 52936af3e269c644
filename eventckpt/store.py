"""The public entry point: `eventckpt.open(path)` gives a Store; `Store.stream(task_id)` a CheckpointStore."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

import orjson

from .codec import Codec
from .errors import InvalidArgumentError, StoreClosedError, StreamInUseError, VersionNotFoundError
from .integrity import ROOT
from .journal import DURABILITY, Journal, StreamRow, connect, segments_for
from .materialize import materialize, replay
from .paths import encodable
from .snapshot import SnapshotPolicy, Tracker
from .stream import CheckpointStore, check_task_id

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .overview import StreamSummary
    from .verify import VerifyReport


CATCH_UP = 256  # a cached head at most this many versions behind is replayed forward, not restored


@dataclass(slots=True)
class Head:
    """The cached state of a stream at its newest version this process knows (never handed out)."""

    stream_id: int
    version: int
    state: dict[str, Any]
    usage: dict[str, int | float]
    checksum: bytes
    tracker: Tracker


def open(  # noqa: A001 - the module-level verb users call as eventckpt.open
    path: str | os.PathLike[str],
    *,
    durability: str = "normal",
    snapshots: SnapshotPolicy | None = None,
    timeout: float = 30.0,
    readonly: bool = False,
    types: Iterable[type] = (),
    allow_nan: bool = False,
    cache_size: int = 64,
    vfs: str | None = None,
) -> Store:
    """Open (or create) the eventckpt store in the file at `path` (or ":memory:").

    durability: "normal" survives a killed process (WAL, synchronous=NORMAL); "full" also survives power
        loss (synchronous=FULL: every commit is fsynced).
    snapshots: the snapshot policy (see SnapshotPolicy).
    timeout: seconds a writer waits for another process's write lock before StoreBusyError.
    types: enums, dataclasses and attrs classes that stored data may decode into.
    allow_nan: store NaN and infinities instead of refusing them.
    cache_size: how many streams' head states stay in memory.
    vfs: the name of a registered SQLite VFS to open the file through (None: SQLite's default); how
        tests simulate power loss, a full disk or a read-only file.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidArgumentError("path", path, "must be a file path or ':memory:'")
    try:
        text = os.fspath(path)
    except TypeError:
        text = None
    if type(text) is not str or not text or "\x00" in text or not encodable(text):
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
    for flag, value in (("readonly", readonly), ("allow_nan", allow_nan)):
        if type(value) is not bool:
            raise InvalidArgumentError(flag, value, "must be a bool")
    if isinstance(types, (str, bytes)) or not isinstance(types, Iterable):
        raise InvalidArgumentError("types", types, "must be an iterable of enum, dataclass or attrs classes")
    codec = Codec(types, allow_nan=allow_nan)
    journal = connect(text, durability=durability, timeout=timeout, readonly=readonly, vfs=vfs)
    return Store(journal, codec, snapshots or SnapshotPolicy(), cache_size)


class Store:
    """One eventckpt file. Thread-safe: calls are serialized on one connection. Use as a context manager."""

    def __init__(self, journal: Journal, codec: Codec, policy: SnapshotPolicy, cache_size: int = 64) -> None:
        self._journal = journal
        self.codec = codec
        self.policy = policy
        self.path = journal.path
        self._lock = threading.RLock()
        self._heads: OrderedDict[int, Head] = OrderedDict()
        self._chains: dict[int, list[StreamRow]] = {}
        self._rows: dict[str, StreamRow] = {}  # stream name -> row, for streams with a cached head
        self._cache_size = cache_size
        self._generation = journal.generation()  # the history generation the cached heads were built under
        self._closed = False

    def __repr__(self) -> str:
        return f"Store(path={self.path!r}{', closed' if self._closed else ''})"

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Close the file (idempotent). Checkpoints already returned keep the values they loaded."""
        with self._lock:
            if not self._closed:
                self._closed = True
                self._heads.clear()
                self._journal.close()

    def stream(self, task_id: str) -> CheckpointStore:
        """The stream named `task_id` (created by its first save)."""
        self._check_open()
        return CheckpointStore(self, check_task_id(task_id))

    def streams(self) -> list[str]:
        """The names of every stream in the store, oldest first."""
        with self._guard() as journal:
            return journal.stream_names()

    def delete_stream(self, task_id: str, *, forks: bool = False) -> bool:
        """Delete a stream and its history; False when there was none. A stream whose history forks
        still share is kept (StreamInUseError) unless `forks=True`, which deletes them too."""
        check_task_id(task_id)
        if type(forks) is not bool:
            raise InvalidArgumentError("forks", forks, "must be a bool")
        with self._guard() as journal:
            with journal.write():
                row = journal.stream(task_id)
                if row is None:
                    return False
                doomed = self._subtree(row)
                if len(doomed) > 1 and not forks:
                    raise StreamInUseError(task_id, [r.name for r in doomed[1:]])
                for victim in reversed(doomed):  # children before parents
                    journal.delete_stream(victim.id)
            for victim in doomed:
                self._forget(victim.id, victim.name)
                self._chains.pop(victim.id, None)
            journal.reclaim()
            return True

    def _subtree(self, row: StreamRow) -> list[StreamRow]:
        out, todo = [], [row]
        while todo:
            current = todo.pop()
            out.append(current)
            todo.extend(self._journal.children(current.id))
        return out

    # -- internals shared with CheckpointStore ----------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    @contextmanager
    def _guard(self) -> Iterator[Journal]:
        """Serialize access to the connection and the caches."""
        with self._lock:
            self._check_open()
            yield self._journal

    @contextmanager
    def _batch(self) -> Iterator[Journal]:
        """Many writes as one transaction (see Journal.batch). When it fails, every cache is dropped:
        heads and rows it created or advanced were never committed (and stream ids may be reused)."""
        with self._guard() as journal:
            try:
                with journal.batch():
                    yield journal
            except BaseException:
                self._heads.clear()
                self._rows.clear()
                self._chains.clear()
                raise

    def _chain(self, row: StreamRow) -> list[StreamRow]:
        """The stream's lineage, root first (immutable once created, so cached)."""
        chain = self._chains.get(row.id)
        if chain is None:
            chain = self._chains[row.id] = self._journal.lineage(row.id)
        return chain

    def _forget(self, stream_id: int | None, name: str | None = None) -> None:
        """Drop cached heads (by id, and by the name's cached row): they may be ahead of the file."""
        row = self._rows.pop(name, None) if name is not None else None
        for sid in (stream_id, row.id if row else None):
            if sid is not None:
                self._heads.pop(sid, None)

    def _check_generation(self) -> None:
        """Drop every cached head if retention rewrote history since they were built: their state is
        still right, but catching up replays events that may have moved, and their snapshot trackers may
        name snapshots that are gone. The generation is read only when another connection committed since
        our last commit (a file-control call, no SQL, otherwise)."""
        if self._journal.others_committed():
            generation = self._journal.generation()
            if generation != self._generation:
                self._heads.clear()
                self._rows.clear()
                self._generation = generation

    def _writable(self, name: str, trust: bool) -> tuple[StreamRow | None, Head | None]:
        """The stream and its head state for a write, inside the write transaction.

        With `trust`, a cached head is used without asking the file: a commit built on a stale head is
        refused by the versions primary key, and the caller retries with trust=False. Cached heads are
        dropped when retention rewrote history since they were built (their snapshot trackers may name
        snapshots or events that are gone); the generation is read only when another connection has
        committed since our last commit.
        """
        self._check_generation()
        if trust:
            row = self._rows.get(name)
            head = self._heads.get(row.id) if row is not None else None
            if head is not None:
                self._heads.move_to_end(row.id)
                return row, head
        found = self._journal.stream_and_head(name)
        if found is None:
            return None, None
        row, current = found
        return row, self._head(row, current)

    def _head(self, row: StreamRow, version: int) -> Head:
        """The head state for writing at `version` (from the cache, caught up, or restored)."""
        head = self._heads.get(row.id)
        if head is not None and head.version <= version <= head.version + CATCH_UP:
            if head.version < version:
                self._catch_up(row, head, version)
            self._heads.move_to_end(row.id)
            return head
        if version == 0:
            head = Head(row.id, 0, {}, {}, ROOT, Tracker(self.policy))
        else:
            chain = self._chain(row)
            state, tracker = materialize(self._journal, self.codec, chain, version, self.policy)
            owner = next(s for s in segments_for(chain, version) if s.lo <= version <= s.hi)
            vrow = self._journal.version_row(owner.stream_id, version)
            if vrow is None:
                raise VersionNotFoundError(row.name, version, version)
            usage = orjson.loads(vrow.usage) if vrow.usage else {}
            head = Head(row.id, version, state, usage, vrow.checksum, tracker)
        self._heads[row.id] = head
        self._rows[row.name] = row
        while len(self._heads) > self._cache_size:
            evicted = self._heads.popitem(last=False)[1]
            self._rows = {n: r for n, r in self._rows.items() if r.id != evicted.stream_id}
        return head

    def _catch_up(self, row: StreamRow, head: Head, version: int) -> None:
        """Bring a cached head forward to `version` by replaying the versions another connection
        committed since (versions are immutable, so the cached state plus their events is exact).
        This keeps a save O(change) when processes take turns on one stream; a full restore would
        cost O(state) each time."""
        try:
            with self._journal.read():
                segments = segments_for(self._chain(row), version)
                replay(self.codec, head.state, self._journal.tail(segments, head.version), head.tracker)
                owner = next(s for s in segments if s.lo <= version <= s.hi)
                vrow = self._journal.version_row(owner.stream_id, version)
            if vrow is None:
                raise VersionNotFoundError(row.name, version, version)
        except BaseException:
            self._heads.pop(row.id, None)  # half caught up: never reuse it
            raise
        head.version, head.checksum = version, vrow.checksum
        head.usage = orjson.loads(vrow.usage) if vrow.usage else {}

    def _state_at(self, row: StreamRow, version: int) -> dict[str, Any]:
        """A fresh copy of the state at `version` (the caller owns it)."""
        self._check_generation()
        head = self._heads.get(row.id)
        if head is not None and head.version <= version <= head.version + CATCH_UP:
            return self.codec.copy(self._head(row, version).state)
        state, _ = materialize(self._journal, self.codec, self._chain(row), version, self.policy, track=False)
        return state

    def _write_snapshot(self, stream_id: int, version: int, head: Head) -> None:
        """Write the snapshot the tracker plans, in the caller's transaction."""
        parts, sizes = [], {}
        for key in head.tracker.plan():
            raw = self.codec.encode(head.state[key])
            sizes[key] = len(raw)
            parts.append(orjson.dumps(key) + b":" + raw)
        manifest = head.tracker.written(version, sizes)
        self._journal.insert_snapshot(stream_id, version, (b"{" + b",".join(parts) + b"}").decode(), manifest)

    # -- search, verify, stats, export/import (eventckpt/query.py, verify.py, transfer.py) ---------

    def search(self, name: str | None = None, metadata: Mapping[str, Any] | None = None, *,
               limit: int | None = None) -> list[Checkpoint]:
        """Checkpoints of every stream with checkpoint `name` and/or the given `metadata` values, newest
        first. Each is reported once, under the stream that stores it. Indexed for a name and for str/int
        metadata values; other metadata values alone read every version row."""
        from .query import search

        return search(self, name, metadata, limit)

    def summaries(self, limit: int = 100, *, before: str | None = None) -> list[StreamSummary]:
        """A page of streams, newest first: `StreamSummary(task_id, head, parent, tree, created_at,
        updated_at, token_usage)` for at most `limit` streams created before stream `before` (all
        when None). Indexed: costs O(limit), however many streams the file holds."""
        from .overview import summaries

        return summaries(self, limit, before)

    def tree(self, task_id: str, *, limit: int | None = None) -> list[StreamSummary]:
        """The streams of `task_id`'s stream tree (its root and every fork below it, at most `limit`),
        oldest first, as `summaries()` gives them."""
        from .overview import tree

        return tree(self, task_id, limit)

    def verify(self, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Check the whole file: every version's checksum chain, every snapshot against a replay of the
        events, PRAGMA integrity_check and foreign keys. Reads everything once (O(file));
        `progress(done, total)` is called as versions are checked. Returns a report; `report.ok` is False
        on any problem."""
        from .verify import verify

        return verify(self, progress)

    def stats(self) -> dict[str, int]:
        """Streams, forks, versions, events, event and snapshot bytes, and the file's bytes (reads every
        row: O(file))."""
        with self._guard() as journal, journal.read():
            out = journal.totals()
        out["file_bytes"] = sum(os.path.getsize(self.path + s) for s in ("", "-wal") if os.path.exists(self.path + s)) \
            if self.path != ":memory:" else out["database_bytes"]
        return out

    def export(self, task_id: str, *, forks: bool = False) -> Iterator[bytes]:
        """The stream's whole lineage as JSON Lines (one line per stream and per version; see
        eventckpt.transfer), with `forks=True` also every fork below it."""
        from .transfer import export

        return export(self, task_id, forks=forks)

    def import_lines(self, lines: Iterable[bytes | str], *, progress: Callable[[int], None] | None = None) -> list[str]:
        """Import streams exported by `export()`: identical states, times, names, metadata and usage at
        every version. Returns the stream names. The import is one transaction: on any error, or if the
        process dies, nothing of it is kept."""
        from .transfer import import_lines

        return import_lines(self, lines, progress)
