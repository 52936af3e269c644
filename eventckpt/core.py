"""The engine-neutral core under `Store`: sessions, cached heads, lineages and restores.

Feature modules (stream, commit, diff, history, retention, verify, transfer, the LangGraph saver) build
on `Core` and the journal contract, never on each other's internals.

Concurrency. `session()` gives the calling thread a journal (SQLite: the store's one connection, taken in
turns; PostgreSQL: a pooled connection of its own). Cached heads are the only shared mutable state: a
head is read and changed only under its stream's lock, always taken after the session (one lock order,
so no deadlock), and the cache's dicts are guarded by a lock never held during I/O. Threads writing
different streams never wait on each other in-process.

Cache coherence. A cached head is trusted for a commit without asking the store: the versions primary
key refuses a commit built on a head another writer moved (the commit is redone on a fresh read), and
the tree's history generation refuses one built before retention rewrote history. Reads check the
generation before using a cached head (only when another session may have committed).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

from .checkpoint import ForkOrigin
from .codec import Codec
from .errors import StoreClosedError, StreamNotFoundError, VersionNotFoundError
from .integrity import ROOT
from .journal import Backend, EventRow, Journal, Segment, StreamRow, segments_for
from .materialize import LaterList, materialize, replay
from .snapshot import SnapshotPolicy, Tracker

CATCH_UP = 256  # a cached head at most this many versions behind is replayed forward, not restored
_STRIPES = 64  # stream locks: a fixed set, chosen by name (bounded memory however many streams)


@dataclass(slots=True)
class Head:
    """The cached state of a stream at its newest version this process knows (never handed out)."""

    stream_id: int
    version: int
    state: dict[str, Any]
    usage: dict[str, int | float]
    checksum: bytes
    tracker: Tracker
    generation: int  # the tree's history generation this state was built under
    floor: int = 0  # the number of a removed head: the next version is numbered above it


class Core:
    """Sessions, caches and restores of one store (see the module docstring)."""

    def __init__(self, backend: Backend, codec: Codec, policy: SnapshotPolicy, cache_size: int = 64) -> None:
        self.backend = backend
        self.codec = codec
        self.policy = policy
        self._cache_size = cache_size
        self._heads: OrderedDict[int, Head] = OrderedDict()
        self._rows: dict[str, StreamRow] = {}  # stream name -> row, for streams with a cached head
        self._chains: dict[int, list[StreamRow]] = {}
        self._cache_lock = threading.Lock()
        self._stream_locks = [threading.RLock() for _ in range(_STRIPES)]
        self.closed = False

    # -- sessions ---------------------------------------------------------------------------------

    def session(self) -> AbstractContextManager[Journal]:
        """A journal for this thread (the same one again when the thread is already in a session)."""
        if self.closed:
            raise StoreClosedError()
        return self.backend.session(self._open)

    def _open(self) -> None:
        if self.closed:  # closed while this thread waited for the journal
            raise StoreClosedError()

    @contextmanager
    def batch(self) -> Iterator[Journal]:
        """Many writes as one transaction (see Journal.batch). When it fails, every cache is dropped:
        heads and rows it created or advanced were never committed (and stream ids may be reused)."""
        with self.session() as journal:
            try:
                with journal.batch():
                    yield journal
            except BaseException:
                self.forget_all()
                raise

    def stream_lock(self, name: str) -> threading.RLock:
        """The in-process lock of a stream's cached head (take it inside a session, never around one)."""
        return self._stream_locks[hash(name) % _STRIPES]

    def close(self) -> None:
        with self._cache_lock:
            if self.closed:
                return
            self.closed = True
            self._heads.clear()
        self.backend.close()

    # -- lineage ----------------------------------------------------------------------------------

    def lineage(self, journal: Journal, row: StreamRow) -> list[StreamRow]:
        """The stream's lineage, root first (immutable once created, so cached)."""
        chain = self._chains.get(row.id)
        if chain is None:
            chain = journal.lineage(row)
            with self._cache_lock:
                self._chains[row.id] = chain
        return chain

    def known_row(self, stream_id: int) -> StreamRow | None:
        """The row of a stream whose lineage is cached (None when it is not): for a caller that has just
        read the stream's id in its open transaction, and so knows the stream is there."""
        chain = self._chains.get(stream_id)
        return chain[-1] if chain else None

    def remember_lineage(self, chain: list[StreamRow]) -> None:
        """Cache a lineage read by other means (a search reads many at once)."""
        with self._cache_lock:
            self._chains.setdefault(chain[-1].id, chain)

    def existing(self, journal: Journal, name: str) -> tuple[StreamRow, int]:
        """The stream named `name` and its head version; StreamNotFoundError when it does not exist."""
        found = journal.stream_and_head(name)
        if found is None:
            raise StreamNotFoundError(name)
        return found

    def segments(self, journal: Journal, row: StreamRow, upto: int) -> list[Segment]:
        """The stream's lineage as segments, clipped to versions <= upto."""
        return segments_for(self.lineage(journal, row), upto)

    def owner(self, journal: Journal, row: StreamRow, version: int) -> Segment | None:
        """The segment of the stream's lineage that holds `version` (None when 0 or out of range)."""
        return next((s for s in self.segments(journal, row, version) if s.lo <= version <= s.hi), None)

    def version_row(self, journal: Journal, row: StreamRow, version: int) -> Any:
        """The row of `version` in the stream's lineage; VersionNotFoundError when it is not there."""
        owner = self.owner(journal, row, version)
        vrow = journal.version_row(owner, version) if owner else None
        if vrow is None:  # the head is read again only to name it in the error
            found = journal.stream_and_head(row.name)
            raise VersionNotFoundError(row.name, version, found[1] if found else 0)
        return vrow

    def origin(self, journal: Journal, row: StreamRow) -> ForkOrigin | None:
        """Where the stream forked from (None for a root)."""
        if row.parent_id is None:
            return None
        return ForkOrigin(self.lineage(journal, row)[-2].name, row.fork_version or 0)

    def subtree(self, journal: Journal, row: StreamRow) -> list[StreamRow]:
        """The stream and every stream forked from it, directly or not (the stream first)."""
        out, todo = [], [row]
        while todo:
            current = todo.pop()
            out.append(current)
            todo.extend(journal.children(current))
        return out

    # -- states -----------------------------------------------------------------------------------

    def state_at(self, journal: Journal, row: StreamRow, version: int) -> dict[str, Any]:
        """A fresh copy of the state at `version` of the stream's lineage (the caller owns it)."""
        return self.state_and_later(journal, row, version, version)[0]

    def state_and_later(self, journal: Journal, row: StreamRow, version: int, upto: int,
                        lists: Mapping[str, LaterList] | None = None) -> tuple[dict[str, Any], list[EventRow]]:
        """A fresh copy of the state at `version` and the lineage's events after it through `upto`, read
        with the restore's own tail when it needs one (a round trip fewer on PostgreSQL). `lists`: top-level
        lists that the caller holds as a later version of this stream has them; those that only grew since
        `version` are taken as their prefixes instead of being restored (see materialize)."""
        with self.stream_lock(row.name), journal.read():  # the generation checked and the tail read in one snapshot
            head = self._heads.get(row.id)
            if head is not None and head.version <= version <= head.version + CATCH_UP and self._current(journal, head, row):
                state = self.codec.copy(self.head(journal, row, version).state)
                return state, journal.tail(self.segments(journal, row, upto), version) if upto > version else []
        state, _, later = materialize(journal, self.codec, self.lineage(journal, row), version, self.policy,
                                      track=False, upto=upto, lists=lists)
        return state, later

    def loader(self, row: StreamRow, version: int, as_type: Any = None) -> Callable[[], Any]:
        """A function reading the state at `version` when called (a checkpoint's values, on first access),
        structured into `as_type` when given."""

        def load() -> Any:
            with self.session() as journal, journal.read():  # removed since the checkpoint was read: an error
                self.version_row(journal, row, version)
                state = self.state_at(journal, row, version)
            return self.codec.structure(state, as_type) if as_type is not None else state

        return load

    def _current(self, journal: Journal, head: Head, row: StreamRow) -> bool:
        """Whether a cached head was built under the tree's current history generation (dropped if not)."""
        if not journal.rewritten_since(row, head.generation):
            return True
        self.forget_all()  # SQLite keeps one generation for the file: every head is as stale
        return False

    def cached_head(self, journal: Journal, name: str) -> tuple[StreamRow, Head] | None:
        """The stream's cached row and head, trusted without asking the store (a commit built on it is
        refused by the store if another writer moved the stream or history was rewritten)."""
        row = self._rows.get(name)
        head = self._heads.get(row.id) if row is not None else None
        if head is None:
            return None
        with self._cache_lock:
            if row.id in self._heads:
                self._heads.move_to_end(row.id)
        return row, head

    def head(self, journal: Journal, row: StreamRow, version: int) -> Head:
        """The head state for writing at `version`: from the cache, caught up, or restored. The caller
        holds the stream's lock."""
        head = self._heads.get(row.id)
        if head is not None and head.version <= version <= head.version + CATCH_UP:
            # one snapshot: a rewrite committed between the generation check and the catch-up's tail would
            # replay events the cached state already holds (folded into a later version)
            with journal.read():
                if self._current(journal, head, row):
                    if head.version < version:
                        self._catch_up(journal, row, head, version)
                    with self._cache_lock:
                        self._heads.move_to_end(row.id)
                    return head
        with journal.read():
            generation = journal.generation(row)
            floor = journal.removed_head(row)
            if version == 0:
                head = Head(row.id, 0, {}, {}, ROOT, Tracker(self.policy), generation, floor)
            else:
                state, tracker, _ = materialize(journal, self.codec, self.lineage(journal, row), version, self.policy)
                vrow = self.version_row(journal, row, version)
                usage = orjson.loads(vrow.usage) if vrow.usage else {}
                head = Head(row.id, version, state, usage, vrow.checksum, tracker, generation, floor)
        with self._cache_lock:
            self._heads[row.id] = head
            self._rows[row.name] = row
            while len(self._heads) > self._cache_size:
                evicted = self._heads.popitem(last=False)[1]
                self._rows = {n: r for n, r in self._rows.items() if r.id != evicted.stream_id}
        return head

    def _catch_up(self, journal: Journal, row: StreamRow, head: Head, version: int) -> None:
        """Bring a cached head forward to `version` by replaying the versions another session committed
        since (versions are immutable, so the cached state plus their events is exact). This keeps a save
        O(change) when processes take turns on one stream; a full restore would cost O(state)."""
        try:
            with journal.read():
                replay(self.codec, head.state, journal.tail(self.segments(journal, row, version), head.version),
                       head.tracker)
                vrow = self.version_row(journal, row, version)
        except BaseException:
            self.forget(row.id)  # half caught up: never reuse it
            raise
        head.version, head.checksum = version, vrow.checksum
        head.usage = orjson.loads(vrow.usage) if vrow.usage else {}

    def snapshot_of(self, head: Head, version: int) -> tuple[str, str]:
        """(state JSON, manifest JSON) of the snapshot the head's tracker plans at `version`; the tracker
        takes it as written (the caller forgets the head if the commit fails)."""
        parts, sizes = [], {}
        for key in head.tracker.plan():
            raw = self.codec.encode(head.state[key])
            sizes[key] = len(raw)
            parts.append(orjson.dumps(key) + b":" + raw)
        manifest = head.tracker.written(version, sizes)
        return (b"{" + b",".join(parts) + b"}").decode(), manifest

    # -- forgetting ---------------------------------------------------------------------------------

    def forget(self, stream_id: int | None = None, name: str | None = None) -> None:
        """Drop cached heads (by id, and by the name's cached row): they may be ahead of the store."""
        with self._cache_lock:
            row = self._rows.pop(name, None) if name is not None else None
            for sid in (stream_id, row.id if row else None):
                if sid is not None:
                    self._heads.pop(sid, None)

    def forget_stream(self, row: StreamRow) -> None:
        """Drop everything cached about a deleted stream."""
        self.forget(row.id, row.name)
        with self._cache_lock:
            self._chains.pop(row.id, None)

    def forget_all(self) -> None:
        """Drop every cached head and row (history was rewritten, or a batch failed)."""
        with self._cache_lock:
            self._heads.clear()
            self._rows.clear()
            self._chains.clear()
