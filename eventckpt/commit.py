"""The one write path: a change (a diff of states, or recorded operations) becomes one version.

A commit folds the change onto the stream's head state, encodes its events, chains its checksum, plans a
snapshot when one is due, and hands the whole version to `Journal.append`, which writes it atomically
(SQLite: one short BEGIN IMMEDIATE transaction; PostgreSQL: one statement, one round trip).

The first attempt is optimistic: it builds on the cached head (or a fresh read) without taking any lock.
If another writer moved the stream, the versions primary key refuses the version; if retention rewrote
history, the tree's generation does; nothing is written either way, and the commit is redone inside a
write transaction on a fresh read of the head (SQLite: under the write lock, so the redo cannot lose
again; PostgreSQL: again optimistic, retried while other writers keep winning).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

from . import ops
from .checkpoint import Checkpoint, now
from .checks import check_new_name, check_options, is_number
from .core import Core, Head
from .errors import (ConflictError, DuplicateCheckpointIdError, InvalidArgumentError, PathError, SerializationError,
                     StoreBusyError, StoreUnavailableError, StreamExistsError)
from .integrity import version_checksum
from .journal import CheckpointIdTaken, Commit, HistoryRewritten, Journal, StreamRow, VersionRow, VersionTaken
from .ops import DELETE, INCR, SET
from .paths import Path, to_text

# (op, path, value for the state, JSON bytes of that value or None)
Recorded = tuple[str, Path, Any, "bytes | None"]
Produce = Callable[[dict[str, Any]], list[Any]]
UsageOf = Callable[[dict[str, int | float]], dict[str, int | float]]

_ATTEMPTS = 100  # redos while other writers keep winning (PostgreSQL; on SQLite the second attempt wins)


class _Stale(Exception):
    """Internal: the optimistic attempt cannot go on (no cached stream, a moved head, a path that does not
    fit): redo it inside a write transaction on a fresh read."""


def commit(
    core: Core,
    task_id: str,
    produce: Produce,
    check_paths: bool,
    usage_of: UsageOf,
    *,
    metadata: Mapping[str, Any] | None,
    name: str | None,
    auto: bool,
    expected_version: int | None,
    checkpoint_id: str | None,
    checked: bool = False,
    tool_rows: Sequence[Sequence[Any]] = (),
    created_at: str | None = None,
    at: int | None = None,
    expected_head: tuple[int, int | None] | None = None,
    committed: Callable[[int, int], None] | None = None,
) -> Checkpoint:
    """Commit the change `produce(head state)` as the next version of stream `task_id` (created by its
    first commit). `check_paths`: the change is recorded operations (check them against the head);
    otherwise diff events carrying the caller's objects (encode and copy them). `usage_of(previous
    counters)` gives the new counters. `at` (imports only) numbers the version above the head instead of
    head + 1, so an export thinned out by retention keeps its version numbers; `created_at` keeps its time.
    `expected_head` (tracked states) is the (version, stream row id) the head must be, else ConflictError
    (a stream deleted and saved again is a new row; an empty head is (0, None) whatever its row);
    `committed(version, stream row id)` is called once the version is committed.
    """
    if not checked:
        check_options(metadata=metadata, name=name, auto=auto, expected_version=expected_version,
                      checkpoint_id=checkpoint_id)
    meta_text = core.codec.encode_text(dict(metadata)) if metadata else None
    attempt = _Attempt(core, task_id, produce, check_paths, usage_of, name, int(auto), meta_text, expected_version,
                       checkpoint_id, tool_rows, created_at, at, expected_head)
    with core.session() as journal, core.stream_lock(task_id):
        inside = journal.in_transaction  # the caller's (a batch's): a lost connection takes all of it away
        lost: StoreUnavailableError | None = None  # the latest connection loss, and when the first was
        lost_since, lost_n = 0.0, -1
        for n in range(_ATTEMPTS):
            try:
                if n == 0:
                    attempt.run(journal, optimistic=True)
                else:
                    with journal.write():
                        attempt.run(journal, optimistic=False)
            except _Stale:
                continue
            except VersionTaken:
                core.forget(attempt.stream_id, task_id)  # stale, and half-applied: never reuse it
                if n and expected_version is not None:
                    raise ConflictError(task_id, expected_version, attempt.current + 1) from None
                if n:
                    time.sleep(random.uniform(0, min(0.05, 0.001 * n)))  # another host keeps winning: back off
                continue
            except HistoryRewritten:
                core.forget_all()
                attempt.hold = True
                continue
            except CheckpointIdTaken:
                core.forget(attempt.stream_id, task_id)
                raise DuplicateCheckpointIdError(task_id, checkpoint_id or "") from None
            except StoreUnavailableError as exc:  # the connection dropped (PostgreSQL)
                core.forget(attempt.stream_id, task_id)
                if inside:  # the server rolled back the caller's whole transaction: only its owner can redo it
                    raise StoreUnavailableError(str(exc), code=exc.code, committed=False) from None
                if exc.committed is None:  # did it commit? look it up by its checksum
                    try:
                        if attempt.landed(journal):
                            return attempt.checkpoint(journal, committed)
                    except StoreUnavailableError as again:  # the server is still away: nobody can tell
                        raise StoreUnavailableError(str(again), code=again.code, committed=None) from None
                # Known not to have committed: redo it (the pool waits for the server), but only for the
                # store's timeout, as README promises; each attempt with the server down already waited
                # for a connection, so this does not spin (a brief pause when the loss was instant).
                clock = time.monotonic()
                lost, lost_since, lost_n = exc, lost_since if lost is not None else clock, n
                if clock - lost_since >= core.backend.timeout:
                    raise
                time.sleep(min(0.05, core.backend.timeout))
                continue
            except ConflictError:  # raised before anything was applied to the head
                raise
            except BaseException:
                core.forget(attempt.stream_id, task_id)
                raise
            return attempt.checkpoint(journal, committed)
    if lost is not None and lost_n == _ATTEMPTS - 1:  # the last redo lost its connection: not contention
        raise lost
    raise StoreBusyError(f"{task_id}: other writers kept committing first ({_ATTEMPTS} attempts)", code="contention")


def redoable(core: Core, recorded: list[Recorded]) -> Produce:
    """The recorded operations as a commit's change, for every attempt: folding an operation puts its value
    into the head state, where later operations of the same commit may change it, so a redo starts again
    from the values' recorded JSON."""
    tries = [0]

    def events(head: dict[str, Any]) -> list[Recorded]:
        tries[0] += 1
        if tries[0] == 1:
            return recorded
        decode = core.codec.decode
        return [(op, path, decode(raw) if raw is not None else value, raw) for op, path, value, raw in recorded]

    return events


class _Attempt:
    """One commit's inputs, and what its successful attempt produced."""

    __slots__ = ("core", "task_id", "produce", "check_paths", "usage_of", "name", "auto", "meta_text",
                 "expected_version", "checkpoint_id", "tool_rows", "created_at", "at", "expected_head", "stream_id",
                 "current", "row", "head", "pending", "created", "hold")

    def __init__(self, core: Core, task_id: str, produce: Produce, check_paths: bool, usage_of: UsageOf,
                 name: str | None, auto: int, meta_text: str | None, expected_version: int | None,
                 checkpoint_id: str | None, tool_rows: Sequence[Sequence[Any]], created_at: str | None,
                 at: int | None, expected_head: tuple[int, int | None] | None = None) -> None:
        self.core, self.task_id, self.produce, self.check_paths, self.usage_of = core, task_id, produce, check_paths, usage_of
        self.name, self.auto, self.meta_text, self.expected_version = name, auto, meta_text, expected_version
        self.checkpoint_id, self.tool_rows, self.created_at, self.at = checkpoint_id, tool_rows, created_at, at
        self.expected_head = expected_head
        self.stream_id: int | None = None
        self.current = 0
        self.row: StreamRow | None = None
        self.head: Head | None = None
        self.pending: tuple[int, bytes, dict[str, int | float]] | None = None  # version, checksum, usage in flight
        self.created = ""
        self.hold = False  # lost to a rewrite of history: hold retention off while building on the head

    def _writable(self, journal: Journal, optimistic: bool) -> tuple[StreamRow, Head]:
        core = self.core
        if optimistic:
            hit = core.cached_head(journal, self.task_id)
            if hit is not None:
                return hit
        found = journal.stream_and_head(self.task_id)
        if found is not None and self.hold:
            # A tree pruned over and over could refuse every attempt: the head is read, a rewrite commits,
            # the append sees a new generation. Holding the tree keeps the next rewrite waiting instead.
            journal.hold_tree(found[0].tree_id)
            found = journal.stream_and_head(self.task_id)
        if found is None:
            if optimistic:  # a new stream is created inside the write transaction
                raise _Stale()
            try:
                row = journal.create_stream(check_new_name(self.task_id), self.created)
            except StreamExistsError:  # another writer created it first (PostgreSQL: no file lock to wait on)
                raise _Stale() from None
            return row, core.head(journal, row, 0)
        row, current = found
        return row, core.head(journal, row, current)

    def run(self, journal: Journal, *, optimistic: bool) -> None:
        core = self.core
        self.created = self.created_at or now()  # an import keeps the exported version's time
        row, head = self._writable(journal, optimistic)
        self.stream_id, self.current = row.id, head.version
        current = head.version
        if self.expected_version is not None and self.expected_version != current:
            if optimistic:  # nothing is applied yet: the cached head stays, to be caught up
                raise _Stale()
            raise ConflictError(self.task_id, self.expected_version, current)
        if self.expected_head is not None and (current, row.id if current else None) != self.expected_head:
            if optimistic:
                raise _Stale()
            recreated = bool(current) and self.expected_head[1] is not None and row.id != self.expected_head[1]
            raise ConflictError(self.task_id, self.expected_head[0], current, recreated)
        if self.at is not None and self.at <= current:
            raise ConflictError(self.task_id, self.at - 1, current)
        version = max(current, head.floor) + 1 if self.at is None else self.at  # a removed head's number is not reused
        try:
            rows, nbytes = apply_events(core.codec, head, version, self.produce(head.state), self.check_paths)
        except PathError:
            if optimistic:  # the operations may fit the store's head and not our stale cached one: redo
                core.forget(row.id, self.task_id)
                raise _Stale() from None
            raise
        usage = self.usage_of(head.usage)
        for key, n in usage.items():
            if not is_number(n):  # a sum past 2**63 or to inf: JSON would refuse it, or store null
                raise InvalidArgumentError("token_usage", {key: n}, "a counter must stay a finite float or 64-bit int")
        usage_text = orjson.dumps(usage).decode() if usage else None
        checksum = version_checksum(head.checksum, version, self.created, self.name, self.auto, self.meta_text,
                                    usage_text, rows)
        snapshot = core.snapshot_of(head, version) if head.tracker.due() else None
        self.row, self.head, self.pending = row, head, (version, checksum, usage)
        journal.append(Commit(
            row, VersionRow(row.id, version, self.created, self.name, self.auto, self.meta_text, usage_text, len(rows),
                            nbytes, checksum),
            rows, head.generation, self.checkpoint_id, self.tool_rows, snapshot,
        ))
        head.version, head.checksum, head.usage = version, checksum, usage

    def landed(self, journal: Journal) -> bool:
        """Whether the commit whose outcome a dropped connection hid is in the store: its version, with its
        checksum (which chains over everything it wrote). Asking may wait for the server to come back."""
        if self.row is None or self.pending is None:
            return False
        version, checksum, _ = self.pending
        vrow = journal.version_row(self.row, version)
        return vrow is not None and vrow.checksum == checksum

    def checkpoint(self, journal: Journal, committed: Callable[[int, int], None] | None = None) -> Checkpoint:
        """The checkpoint the successful attempt committed (built from what it wrote); `committed` hears of it."""
        assert self.row is not None and self.pending is not None
        core = self.core
        version, _, usage = self.pending
        if committed is not None:
            committed(version, self.row.id)
        return Checkpoint.trusted(
            self.task_id, version, dict(usage), core.codec.decode(self.meta_text) if self.meta_text else {},
            self.created, self.name, bool(self.auto), core.origin(journal, self.row), self.checkpoint_id,
            core.loader(self.row, version),
        )


def apply_events(
    codec: Any, head: Head, version: int, events: list[Any], check_paths: bool
) -> tuple[list[tuple[str, str, bytes | None]], int]:
    """Encode events, fold them onto the head state and account them for snapshots.

    Returns the journal rows (op, path, JSON bytes) and their value bytes.
    """
    rows: list[tuple[str, str, bytes | None]] = []
    state, observe, apply, resolve = head.state, head.tracker.observe, ops.apply, ops.resolve
    total = 0
    for seq, event in enumerate(events):
        if check_paths:  # recorded operations: value already encoded and copied
            op, path, value, raw = event
            # A top-level set always fits the state (a dict); anything else is checked against it
            if op != SET or len(path) != 1:
                path = resolve(state, op, path)
            if raw is None and op != DELETE:
                raw = orjson.dumps(value)
        else:  # diff events carry the caller's objects: encode now, keep our own copy
            op, path, caller_value = event
            if op == DELETE:
                value, raw = None, None
            else:
                try:
                    raw, value = codec.encode_copy(caller_value)
                except SerializationError as exc:
                    raise SerializationError(path + exc.path, exc.reason, exc.type_name) from None
        apply(state, op, path, value)
        if op == INCR and not codec.allow_nan:
            _check_sum(state, path)
        size = len(raw) if raw is not None else 0
        total += size
        rows.append((op, to_text(path), raw))
        observe(version, seq, op, path, size, value)
    return rows, total


def _check_sum(state: dict[str, Any], path: tuple[Any, ...]) -> None:
    """An incr must not overflow a float to inf: the state could no longer be encoded, so every later
    snapshot and state() of the stream would fail."""
    target: Any = state
    for key in path:
        target = target[key]
    if type(target) is float and not math.isfinite(target):
        raise SerializationError(path, f"incr makes {target!r}, not a finite number (open the store with allow_nan=True)")
