"""The async API: session-keyed checkpoints for asyncio agents.

    async with eventckpt.aio.open("agent.db") as store:     # or: store = await eventckpt.aio.open(...)
        cp = await store.save("session-1", {"messages": [...]}, metadata=eventckpt.meta(node="agent", step=1))
        latest = await store.load("session-1")              # None when the session has no checkpoint
        older = await store.load("session-1", cp.id)        # by checkpoint id (a stable string)
        state = await store.checkout("session-1")           # the head as a tracked state: edit it in place,
        state["messages"].append("next")
        await store.save("session-1", state)                # and only the edits are stored
        for cp in await store.list("session-1", limit=10):  # newest first
            print(cp.summary())

Every call runs the synchronous store on one worker thread owned by this AsyncStore, so the event loop
never blocks on SQLite and calls run in the order they were made. `save` takes the state when it is
called and always commits it, even if the await is cancelled (see AsyncStore.save); any other call,
once its coroutine has started, runs to the end too, a cancel stopping only the waiting. Writers from other
threads, other AsyncStores and other processes wait for the write lock (BEGIN IMMEDIATE with a busy
timeout) instead of failing with "database is locked".

A checkpoint id is `Checkpoint.id`: the `checkpoint_id` given to save(), else the version number as a
string. Both are stable: versions are never renumbered (retention leaves holes). An id made only of ASCII
digits is always a version number: save() here refuses such caller ids, and one the sync API stored is
not the checkpoint's `id` (its version number is), so an id this module hands out always names the same
checkpoint.

Deleting one checkpoint of an append-only journal (`delete(session, checkpoint_id)`) removes that version
and folds its changes into the next one (see eventckpt.retention): it is gone from listings and loads,
every other version still restores exactly. Deleting the newest checkpoint makes the one before it the
latest, as llmfy does; its version number is never given to a later checkpoint. A checkpoint another
session was forked from cannot be deleted alone (VersionInUseError); delete the sessions instead.

As in llmfy, a session that was never saved is not an error for `load` (None), `list` ([]) and `delete`
(False); every other call raises StreamNotFoundError for it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Callable, Coroutine, Generator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from . import store as _store
from .checkpoint import Checkpoint
from .diffing import Diff
from .query import HistoryEntry
from .errors import (InvalidArgumentError, StoreClosedError, StreamInUseError, StreamNotFoundError,
                     VersionNotFoundError)
from .mixin import Migrations
from .retention import Pruned
from .store import Store
from .checks import check_task_id, whole_number
from .stream import CheckpointStore
from .tracked import TrackedState

T = TypeVar("T")


def _check_id(checkpoint_id: Any) -> str:
    if type(checkpoint_id) is not str or not checkpoint_id:
        raise InvalidArgumentError("checkpoint_id", checkpoint_id, "a checkpoint id is a non-empty str")
    return checkpoint_id


async def _raise(exc: Exception) -> Any:
    raise exc


async def _outcome(queued: Future[T]) -> T:
    """The result of a call queued on the worker thread, which a cancelled await does not cancel."""
    waiting = asyncio.wrap_future(queued)
    try:
        return await asyncio.shield(waiting)
    except asyncio.CancelledError:
        waiting.add_done_callback(_retrieved)  # nobody will read its outcome now: no "never retrieved" log
        raise


def _retrieved(done: asyncio.Future[Any]) -> None:
    if not done.cancelled():
        done.exception()


def _loaded(cp: Checkpoint) -> Checkpoint:
    cp.values  # read the state on the worker thread, never later on the event loop
    return cp


class AsyncStore:
    """An eventckpt store for asyncio code. Use `await eventckpt.aio.open(path)`."""

    def __init__(self, store: Store) -> None:
        self.store = store  # the synchronous store (threads may use it directly; calls are serialized)
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eventckpt-aio")
        self._closing: Future[None] | None = None  # the close of the sync store, once close() was called

    def _submit(self, fn: Callable[[], T]) -> Future[T]:
        """Queue `fn` on the worker thread; StoreClosedError once close() was called (the executor would
        refuse it with a bare RuntimeError, or run it on a closed store)."""
        if self._closing is not None:
            raise StoreClosedError()
        return self._worker.submit(fn)

    async def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Queue the call and await its outcome. Once queued it runs to the end, as a save does: a cancel
        stops only the waiting (a delete, fork or prune could otherwise run or not depending on whether
        the worker had started it, and the caller could not tell which)."""
        return await _outcome(self._submit(lambda: fn(*args, **kwargs)))

    def _stream(self, session_id: str) -> CheckpointStore:
        return self.store.stream(check_task_id(session_id))

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the store, after the calls already made (idempotent, as Store.close: a second close, also
        one made while the first waits, waits for the same close). Calls made after it raise StoreClosedError."""
        if self._closing is None:
            self._closing = self._worker.submit(self.store.close)  # queued behind every call made before
            self._worker.shutdown(wait=False)  # the thread ends once the queue is done
        await asyncio.shield(asyncio.wrap_future(self._closing))  # a cancelled close still closes

    # -- the session API --------------------------------------------------------------------------

    def save(self, session_id: str, state: Any, token_usage: Mapping[str, int | float] | None = None, *,
             metadata: Mapping[str, Any] | None = None, name: str | None = None, auto: bool = False,
             expected_version: int | None = None, checkpoint_id: str | None = None,
             tool_calls: Any = None, add_usage: Mapping[str, int | float] | None = None,
             ) -> Coroutine[Any, Any, Checkpoint]:
        """Save `state` as the session's next checkpoint (see CheckpointStore.save); await the result for
        the Checkpoint. Not an `async def`: the state is taken when save() is called (copied, or a tracked
        state's edits so far), so what the caller or other coroutines do to it afterwards, before the result
        is awaited (`asyncio.create_task(store.save(...))`) or while the commit runs, is not in the version.
        As with every AsyncStore call, errors (a bad argument, a state that cannot be stored, a closed
        store) are raised when the result is awaited. The Checkpoint's `values` are read lazily, with a
        blocking read: use `load()` to read a state from async code.

        The commit is queued at the call (saves commit in the order they were called) and always runs:
        cancelling the await (`task.cancel()`, an `asyncio.wait_for` timeout) stops the waiting, never the
        commit, whether it was still queued or already running (a thread cannot be stopped midway, so a
        cancel could otherwise not tell the caller which happened). A caller that timed out and saves again
        should make the retry idempotent: `expected_version` (ConflictError if the first one landed) or a
        `checkpoint_id` (DuplicateCheckpointIdError)."""
        try:
            commit = self._prepare_save(session_id, state, token_usage, metadata=metadata, name=name, auto=auto,
                                        expected_version=expected_version, checkpoint_id=checkpoint_id,
                                        tool_calls=tool_calls, add_usage=add_usage)
            queued = self._submit(commit)
        except Exception as exc:  # noqa: BLE001 - raised where the caller awaits, as the other calls raise
            return _raise(exc)
        return _outcome(queued)

    def _prepare_save(self, session_id: str, state: Any, token_usage: Mapping[str, int | float] | None,
                      *, checkpoint_id: str | None, **options: Any) -> Callable[[], Checkpoint]:
        if checkpoint_id is not None and type(checkpoint_id) is str and whole_number(checkpoint_id):
            raise InvalidArgumentError("checkpoint_id", checkpoint_id, "ids made only of digits would read as version numbers")
        return self._stream(session_id).prepare_save(state, token_usage, checkpoint_id=checkpoint_id, **options)

    async def checkout(self, session_id: str) -> TrackedState:
        """The session's head as a tracked state (see CheckpointStore.checkout; an empty one for a session
        never saved). Edit it in place, then `await save(session_id, state)` commits exactly the recorded
        edits, comparing nothing; ConflictError when the session's head moved since."""
        return await self._run(self._stream(session_id).checkout)

    async def load(self, session_id: str, checkpoint_id: str | None = None) -> Checkpoint | None:
        """The checkpoint with `checkpoint_id` (the latest when None), values loaded; None when missing."""
        stream = self._stream(session_id)
        if checkpoint_id is not None:
            _check_id(checkpoint_id)
        return await self._run(self._load, stream, checkpoint_id)

    @staticmethod
    def _load(stream: CheckpointStore, checkpoint_id: str | None) -> Checkpoint | None:
        version = _resolve(stream, checkpoint_id)
        return _loaded(stream.get(version)) if version else None

    async def list(self, session_id: str, limit: int | None = 10, *, with_values: bool = True) -> list[Checkpoint]:
        """The session's newest `limit` checkpoints (all when None), newest first."""
        if limit is not None and (type(limit) is not int or limit < 0):
            raise InvalidArgumentError("limit", limit, "must be None or a non-negative int")
        stream = self._stream(session_id)

        def newest() -> list[Checkpoint]:
            try:
                chosen = stream.log(limit)  # one query, O(limit)
            except StreamNotFoundError:  # as llmfy's list: a session never saved has no checkpoints
                return []
            return [_loaded(cp) for cp in chosen] if with_values else chosen

        return await self._run(newest)

    async def delete(self, session_id: str, checkpoint_id: str | None = None, *, forks: bool = False) -> bool:
        """Delete one checkpoint, or (None) the whole session (and, with `forks=True`, the sessions forked
        from it). False when there was nothing to delete. A checkpoint that forks branch from, or the newest
        one when it records tool calls, cannot be deleted alone (VersionInUseError, see stream.remove); nor can
        anything of a LangGraph thread sharing the store (StreamInUseError: the saver's verbs delete those)."""
        stream = self._stream(session_id)
        if checkpoint_id is None:
            return await self._run(self.store.delete_stream, session_id, forks=forks)
        _check_id(checkpoint_id)

        def delete_one() -> bool:
            version = _resolve(stream, checkpoint_id)
            if not version:
                return False
            return bool(stream.remove(version).removed)

        return await self._run(delete_one)

    async def clear_all(self) -> int:
        """Delete every session (forks included); returns how many streams were deleted. The streams of a
        LangGraph thread sharing the store are not sessions: they stay (the saver's delete_thread)."""
        def clear() -> int:
            names = self.store.streams()
            for name in names:
                stream = self.store.stream(name)
                if stream.exists() and stream.parent is None:  # a root takes its forks with it
                    try:
                        self.store.delete_stream(name, forks=True)
                    except StreamInUseError as exc:
                        if exc.thread is None:
                            raise
            left = set(self.store.streams())  # not a difference of counts: streams made meanwhile are not ours
            return sum(name not in left for name in names)

        return await self._run(clear)

    async def sessions(self) -> list[str]:
        """Every session id, oldest first."""
        return await self._run(self.store.streams)

    # -- time travel, forks, retention (the CheckpointStore verbs, keyed by session) ---------------

    async def get(self, session_id: str, version: int) -> Checkpoint:
        """The checkpoint at `version`, values loaded (VersionNotFoundError when missing)."""
        stream = self._stream(session_id)
        return await self._run(lambda: _loaded(stream.get(version)))

    async def state(self, session_id: str, version: int | None = None, *, as_type: Any = None) -> Any:
        """The state at `version` (head when None)."""
        return await self._run(self._stream(session_id).state, version, as_type=as_type)

    async def list_versions(self, session_id: str) -> list[int]:
        return await self._run(self._stream(session_id).list_versions)

    async def fork(self, session_id: str, at: int | None = None, new_session_id: str | None = None) -> str:
        """Fork the session at `at` (head when None); returns the new session id."""
        fork = await self._run(self._stream(session_id).fork, at, new_session_id)
        return fork.task_id

    async def rollback(self, session_id: str, to: int, *, metadata: Mapping[str, Any] | None = None,
                       name: str | None = None) -> Checkpoint:
        """Append a version equal to version `to` (history is kept)."""
        return await self._run(self._stream(session_id).rollback, to, metadata=metadata, name=name)

    async def load_into(self, session_id: str, obj: Any, version: int | None = None, *,
                        migrations: Migrations | None = None) -> Checkpoint:
        """Restore `obj` in place from the session (see CheckpointStore.load_into)."""
        return await self._run(self._stream(session_id).load_into, obj, version, migrations=migrations)

    async def prune(self, session_id: str, keep_last: int, *, auto_only: bool = False) -> Pruned:
        return await self._run(self._stream(session_id).prune, keep_last, auto_only=auto_only)

    async def expire(self, session_id: str, older_than: dt.timedelta | dt.datetime, *, auto_only: bool = False) -> Pruned:
        return await self._run(self._stream(session_id).expire, older_than, auto_only=auto_only)

    # -- log, history, diff and search (CheckpointStore.log/history/diff, Store.search) --------------

    async def log(self, session_id: str, limit: int | None = None, **filters: Any) -> list[Checkpoint]:
        """The session's checkpoints newest first, without their values (see CheckpointStore.log)."""
        return await self._run(self._stream(session_id).log, limit, **filters)

    async def history(self, session_id: str, path: Any, **bounds: Any) -> list[HistoryEntry]:
        """Every change of one path (see CheckpointStore.history)."""
        return await self._run(self._stream(session_id).history, path, **bounds)

    async def diff(self, session_id: str, a: int, b: int | None = None, *, live: Any = None) -> Diff:
        """What changed between two versions, or between a version and a live state (CheckpointStore.diff)."""
        return await self._run(self._stream(session_id).diff, a, b, live=live)

    async def search(self, name: str | None = None, metadata: Mapping[str, Any] | None = None, *,
                     limit: int | None = None) -> list[Checkpoint]:
        """Checkpoints across every session by name and/or metadata, newest first (see Store.search)."""
        return await self._run(self.store.search, name=name, metadata=metadata, limit=limit)


def _resolve(stream: CheckpointStore, checkpoint_id: str | None) -> int:
    """The version a checkpoint id names in this session's lineage (0 when none, or no such session). An id
    made only of ASCII digits is a version number, never a caller's id (Checkpoint.id never gives one out),
    so an id taken from a Checkpoint always names that checkpoint."""
    if checkpoint_id is None or not stream.exists():
        return stream.version
    if whole_number(checkpoint_id):
        try:
            return stream.get(int(checkpoint_id)).version
        except VersionNotFoundError:
            return 0
    found = stream.find(checkpoint_id)
    if found is None:
        return 0
    try:  # the id may belong to another session of the tree: only this lineage's count
        return found.version if stream.get(found.version).checkpoint_id == checkpoint_id else 0
    except VersionNotFoundError:
        return 0


class _Opening:
    """What `open()` returns: await it for an AsyncStore, or use it as `async with`."""

    def __init__(self, path: str | os.PathLike[str], kwargs: dict[str, Any]) -> None:
        self._path, self._kwargs = path, kwargs
        self._store: AsyncStore | None = None

    def __await__(self) -> Generator[Any, None, AsyncStore]:
        return self._open().__await__()

    async def _open(self) -> AsyncStore:
        # Opening may wait for another process's schema migration: not on the event loop.
        sync = await asyncio.get_running_loop().run_in_executor(None, lambda: _store.open(self._path, **self._kwargs))
        return AsyncStore(sync)

    async def __aenter__(self) -> AsyncStore:
        self._store = await self._open()
        return self._store

    async def __aexit__(self, *exc: object) -> None:
        if self._store is not None:
            await self._store.close()


def open(path: str | os.PathLike[str], **kwargs: Any) -> _Opening:  # noqa: A001 - mirrors eventckpt.open
    """Open an async store: `store = await eventckpt.aio.open(path)` or `async with eventckpt.aio.open(path)
    as store:`. Keyword arguments are those of `eventckpt.open`."""
    return _Opening(path, kwargs)
