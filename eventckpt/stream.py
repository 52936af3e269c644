"""CheckpointStore: one stream's versions — save, transaction, time travel, fork, rollback."""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import attrs
import orjson

from . import ops, retention
from .checkpoint import Checkpoint, ForkOrigin, format_time, now, utc_now
from .errors import (
    ConflictError,
    DuplicateCheckpointIdError,
    InvalidArgumentError,
    PathError,
    SerializationError,
    StreamNotFoundError,
    VersionNotFoundError,
)
from .integrity import version_checksum
from .journal import StreamRow, VersionRow, _CheckpointIdTaken, _VersionTaken, segments_for
from .mixin import Checkpointable, Migrations
from .mixin import restore as restore_object
from .paths import addressable, encodable, to_text
from .tools import ToolCall, ToolRegistry, ToolRow, UndoReport, decode_call, encode_calls, undo_tools
from .tracked import TrackedState
from .transaction import Recorded, Transaction, check_number, is_number

if TYPE_CHECKING:
    from .diffing import Diff
    from .query import HistoryEntry
    from .store import Head, Store

MAX_NAME = 1024


def check_task_id(task_id: Any) -> str:
    if type(task_id) is not str or not task_id:
        raise InvalidArgumentError("task_id", task_id, "must be a non-empty string")
    if len(task_id) > MAX_NAME or "\x00" in task_id or not encodable(task_id):
        raise InvalidArgumentError(
            "task_id", task_id, f"must be at most {MAX_NAME} characters without NUL or lone surrogates"
        )
    return task_id


def _check_version(name: str, value: Any) -> int:
    if type(value) is not int:
        raise InvalidArgumentError(name, value, "must be an int")
    return value


def _state_dict(values: Any) -> dict[str, Any]:
    """The caller's state as a dict of top-level keys (a mapping, a dataclass/attrs instance's fields, or
    a Checkpointable's state dict)."""
    if isinstance(values, Checkpointable):
        state = values._checkpoint_state()
    elif isinstance(values, Mapping):
        state = dict(values)
    elif dataclasses.is_dataclass(values) and not isinstance(values, type):
        state = {f.name: getattr(values, f.name) for f in dataclasses.fields(values)}
    elif attrs.has(type(values)):
        state = {a.name: getattr(values, a.name) for a in attrs.fields(type(values))}
    else:
        raise InvalidArgumentError(
            "values", values, "a state is a mapping of str keys (or a dataclass/attrs instance, or a Checkpointable)")
    for key in state:
        if type(key) is not str or not addressable(key):
            raise InvalidArgumentError(
                "values", values, f"top-level key {key!r} must be a str without quotes, backslashes, control characters or lone surrogates"
            )
    return state


class CheckpointStore:
    """The versions of one stream (task, session, thread) in a store. Cheap to create; holds no state."""

    def __init__(self, store: Store, task_id: str) -> None:
        self.store = store
        self.task_id = check_task_id(task_id)

    def __repr__(self) -> str:
        return f"CheckpointStore(task_id={self.task_id!r}, checkpoints={len(self)})"

    def __len__(self) -> int:
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            if found is None:
                return 0
            row, head = found
            return journal.count_versions(segments_for(self.store._chain(row), head))

    # -- reading ----------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The head version (0 when the stream has no versions)."""
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            return found[1] if found else 0

    @property
    def latest(self) -> Checkpoint | None:
        """The head checkpoint, or None when the stream is empty."""
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            if found is None or found[1] == 0:
                return None
            return self._checkpoint_at(found[0], found[1], None)

    @property
    def parent(self) -> ForkOrigin | None:
        """Where this stream forked from (None for a stream that is not a fork)."""
        with self.store._guard() as journal:
            row = journal.stream(self.task_id)
            return self._origin(row) if row else None

    def exists(self) -> bool:
        with self.store._guard() as journal:
            return journal.stream(self.task_id) is not None

    def get(self, version: int, *, as_type: Any = None) -> Checkpoint:
        """The checkpoint at `version` (1-based); VersionNotFoundError when there is none."""
        _check_version("version", version)
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            head = found[1] if found else 0
            if found is None or not 1 <= version <= head:
                raise VersionNotFoundError(self.task_id, version, head)
            return self._checkpoint_at(found[0], version, as_type)

    def find(self, checkpoint_id: str, *, as_type: Any = None) -> Checkpoint | None:
        """The checkpoint saved with `checkpoint_id` anywhere in this stream's tree, or None."""
        if type(checkpoint_id) is not str or not encodable(checkpoint_id):
            raise InvalidArgumentError("checkpoint_id", checkpoint_id, "must be a str (valid UTF-8)")
        with self.store._guard() as journal:
            row = journal.stream(self.task_id)
            hit = journal.find_checkpoint_id(row.tree_id, checkpoint_id) if row else None
            if hit is None:
                return None
            owner = next(r for r in journal.lineage(hit[0]) if r.id == hit[0])
            return CheckpointStore(self.store, owner.name)._checkpoint_at(owner, hit[1], as_type)

    def list_versions(self) -> list[int]:
        """Every version of the lineage that still exists, oldest first."""
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            if found is None:
                return []
            return journal.version_numbers(segments_for(self.store._chain(found[0]), found[1]))

    def state(self, version: int | None = None, *, as_type: Any = None) -> Any:
        """The state at `version` (head when None; {} at version 0), as a fresh dict or `as_type`."""
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            head = found[1] if found else 0
            if version is None:
                version = head
            _check_version("version", version)
            if not 0 <= version <= head:
                raise VersionNotFoundError(self.task_id, version, head)
            if version:
                self._version_row(found[0], version)
            state = self.store._state_at(found[0], version) if version else {}
        return self.store.codec.structure(state, as_type) if as_type is not None else state

    def _version_row(self, row: StreamRow, version: int) -> VersionRow:
        """The row of `version` in this stream's lineage (the caller holds the store lock)."""
        owner = next((s for s in segments_for(self.store._chain(row), version) if s.lo <= version <= s.hi), None)
        vrow = self.store._journal.version_row(owner.stream_id, version) if owner else None
        if vrow is None:
            raise VersionNotFoundError(self.task_id, version, version)
        return vrow

    def _checkpoint_at(self, row: StreamRow, version: int, as_type: Any) -> Checkpoint:
        """A checkpoint whose values load on first access (the caller holds the store lock)."""
        vrow = self._version_row(row, version)
        return self._checkpoint(row, vrow, self.store._journal.checkpoint_id_of(vrow.stream_id, version), as_type)

    def _checkpoint(self, row: StreamRow, vrow: VersionRow, checkpoint_id: str | None, as_type: Any) -> Checkpoint:
        store = self.store
        codec = store.codec

        def load() -> Any:
            with store._guard():
                state = store._state_at(row, vrow.version)
            return codec.structure(state, as_type) if as_type is not None else state

        return Checkpoint(
            self.task_id,
            vrow.version,
            token_usage=orjson.loads(vrow.usage) if vrow.usage else {},
            metadata=codec.decode(vrow.metadata) if vrow.metadata else {},
            created_at=vrow.created_at,
            name=vrow.name,
            auto=bool(vrow.auto),
            parent=self._origin(row),
            checkpoint_id=checkpoint_id,
            loader=load,
        )

    def _origin(self, row: StreamRow) -> ForkOrigin | None:
        if row.parent_id is None:
            return None
        parent = self.store._chain(row)[-2]
        return ForkOrigin(parent.name, row.fork_version or 0)

    # -- writing ----------------------------------------------------------------------------------

    def save(
        self,
        values: Any,
        token_usage: Mapping[str, int | float] | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        auto: bool = False,
        expected_version: int | None = None,
        checkpoint_id: str | None = None,
        tool_calls: Iterable[ToolCall] | None = None,
    ) -> Checkpoint:
        """Commit `values` as the next version. Only the differences from the head are stored: unchanged
        keys cost nothing, and a list that grew at its end costs one append. `values` is a mapping, a
        dataclass/attrs instance or a Checkpointable; `tool_calls` are recorded in the same version.

        A tracked state checked out from this stream (`checkout()`) commits exactly the changes it
        recorded, compared with nothing; ConflictError when the stream's head is no longer the version
        it was checked out at or last saved as. The other arguments mean the same for both."""
        if isinstance(values, TrackedState):
            if values.belongs_to(self):
                return self._save_tracked(values, _check_usage(token_usage),
                                          encode_calls(self.store.codec, tool_calls), metadata=metadata, name=name,
                                          auto=auto, expected_version=expected_version, checkpoint_id=checkpoint_id)
            values = values.plain()  # another stream's (or store's) tracked state is plain data here
        state = _state_dict(values)
        usage = _check_usage(token_usage)
        tool_rows = encode_calls(self.store.codec, tool_calls)

        def events(head: dict[str, Any]) -> list[ops.Event]:
            return ops.diff(head, state)

        return self._commit(events, False, lambda prev: usage if usage is not None else prev,
                            metadata=metadata, name=name, auto=auto,
                            expected_version=expected_version, checkpoint_id=checkpoint_id, tool_rows=tool_rows)

    def transaction(
        self,
        *,
        metadata: Mapping[str, Any] | None = None,
        name: str | None = None,
        auto: bool = False,
        expected_version: int | None = None,
        checkpoint_id: str | None = None,
    ) -> Transaction:
        """Record set/delete/append/extend/incr/usage operations; they commit as one version on exit."""
        options = dict(metadata=metadata, name=name, auto=auto, expected_version=expected_version,
                       checkpoint_id=checkpoint_id)
        _check_options(**options)
        return Transaction(self, options)

    def checkout(self) -> TrackedState:
        """The head state as a tracked state: live dicts and lists (subclasses of dict and list) that
        record their own in-place changes, so `save(state)` commits exactly those changes without
        comparing anything (see eventckpt.tracked). A stream without versions gives an empty one."""
        store = self.store
        with store._guard() as journal:
            store._check_generation()
            found = journal.stream_and_head(self.task_id)
            if found is None or found[1] == 0:
                return TrackedState.checkout(self, {}, 0, None)
            head = store._head(found[0], found[1])
            return TrackedState.checkout(self, head.state, head.version, head.stream_id)

    def _save_tracked(self, state: TrackedState, usage: dict[str, int | float] | None,
                      tool_rows: Sequence[ToolRow], **options: Any) -> Checkpoint:
        _check_options(**options)
        recorded, committed = state.pending()
        return self._commit(self._recorded(recorded), True, lambda prev: usage if usage is not None else prev,
                            checked=True, tool_rows=tool_rows, expected_head=state.base, committed=committed,
                            **options)

    def _recorded(self, recorded: list[Recorded]) -> Callable[[dict[str, Any]], list[Recorded]]:
        tries = [0]

        def events(head: dict[str, Any]) -> list[Recorded]:
            # Folding an operation puts its value into the head state, where later operations of the
            # same commit may change it: a redo starts again from the values' recorded JSON.
            tries[0] += 1
            if tries[0] == 1:
                return recorded
            decode = self.store.codec.decode
            return [(op, path, decode(raw) if raw is not None else value, raw) for op, path, value, raw in recorded]

        return events

    def _commit_ops(self, recorded: list[Recorded], usage_add: dict[str, int | float],
                    tool_rows: Sequence[ToolRow] = (), **options: Any) -> Checkpoint:
        def usage(prev: dict[str, int | float]) -> dict[str, int | float]:
            out = dict(prev)
            for key, n in usage_add.items():
                out[key] = out.get(key, 0) + n
            return out

        return self._commit(self._recorded(recorded), True, usage, checked=True, tool_rows=tool_rows, **options)

    def rollback(self, to: int, *, metadata: Mapping[str, Any] | None = None, name: str | None = None,
                 expected_version: int | None = None) -> Checkpoint:
        """Append a new version whose state equals version `to`. History is kept: nothing is deleted.

        Token usage is not rolled back (it counts what was spent); metadata records `rollback_to`.
        """
        _check_version("to", to)
        _check_options(metadata=metadata, name=name, auto=False, expected_version=expected_version, checkpoint_id=None)
        target = self.state(to)
        return self._commit(lambda head: ops.diff(head, target), False, lambda prev: prev,
                            metadata={**(metadata or {}), "rollback_to": to}, name=name, auto=False,
                            expected_version=expected_version, checkpoint_id=None)

    def fork(self, at: int | None = None, task_id: str | None = None) -> CheckpointStore:
        """A new stream sharing this one's history up to version `at` (head when None); nothing is copied.

        `at=0` shares no versions: a new, empty lineage in the same stream tree (so checkpoint ids stay
        unique across both)."""
        if task_id is not None:
            check_task_id(task_id)
        with self.store._guard() as journal, journal.write():
            found = journal.stream_and_head(self.task_id)
            if found is None:
                raise StreamNotFoundError(self.task_id)
            row, head = found
            at = head if at is None else _check_version("at", at)
            if not 0 <= at <= head:
                raise VersionNotFoundError(self.task_id, at, head)
            if at:
                self._version_row(row, at)
            if task_id is None:
                n = 1
                while journal.stream(f"{self.task_id}~{n}") is not None:
                    n += 1
                task_id = f"{self.task_id}~{n}"
            journal.create_stream(task_id, format_time(utc_now()), row, at)
        return CheckpointStore(self.store, task_id)

    def _commit(
        self,
        produce: Callable[[dict[str, Any]], list[Any]],
        check_paths: bool,
        usage_of: Callable[[dict[str, int | float]], dict[str, int | float]],
        *,
        metadata: Mapping[str, Any] | None,
        name: str | None,
        auto: bool,
        expected_version: int | None,
        checkpoint_id: str | None,
        checked: bool = False,
        tool_rows: Sequence[ToolRow] = (),
        created_at: str | None = None,
        at: int | None = None,
        expected_head: tuple[int, int | None] | None = None,
        committed: Callable[[int, int], None] | None = None,
    ) -> Checkpoint:
        """The one write path: diff or operations -> events, version row, snapshot, in one transaction.

        `at` (imports only) numbers the new version above the head instead of head + 1: an exported
        stream that retention thinned out keeps its version numbers. `expected_head` (tracked states)
        is the (version, stream row id) the head must be, else ConflictError (a stream deleted and saved
        again has a new id; any empty head matches (0, None)); `committed(version, stream id)` is called
        once the new version is committed.
        The cached head is trusted on the first attempt: if another process moved the stream since, the
        versions primary key (or the streams foreign key, for a deleted stream) refuses the insert, and
        the commit is redone once against a fresh read, still under the same write lock.
        """
        if not checked:
            _check_options(metadata=metadata, name=name, auto=auto, expected_version=expected_version,
                           checkpoint_id=checkpoint_id)
        store = self.store
        meta_text = store.codec.encode_text(dict(metadata)) if metadata else None
        options = (name, int(auto), meta_text, expected_version, checkpoint_id, tool_rows, created_at, at,
                   expected_head)
        with store._lock:
            store._check_open()
            journal = store._journal
            for trust in (True, False):
                journal.begin()
                try:
                    done = self._attempt(trust, produce, check_paths, usage_of, *options)
                    journal.commit()
                except _Stale:
                    journal.rollback()
                    continue
                except ConflictError:  # raised before anything was applied, or after forgetting the head
                    journal.rollback()
                    raise
                except BaseException:
                    journal.rollback()
                    store._forget(None, self.task_id)
                    raise
                row, head, created = done[:3]
                head.version, head.checksum, head.usage = done[3:]
                if committed is not None:
                    committed(head.version, row.id)
                break
            version = head.version
            return Checkpoint._stored(  # fields we just wrote: no need for __init__'s checks
                self.task_id, version, dict(head.usage), store.codec.decode(meta_text) if meta_text else {},
                created, name, auto, self._origin(row), checkpoint_id, lambda: self.state(version),
            )

    def _attempt(self, trust: bool, produce: Callable[[dict[str, Any]], list[Any]], check_paths: bool,
                 usage_of: Callable[[dict[str, int | float]], dict[str, int | float]], name: str | None,
                 auto: int, meta_text: str | None, expected_version: int | None,
                 checkpoint_id: str | None, tool_rows: Sequence[ToolRow], created_at: str | None,
                 at: int | None, expected_head: tuple[int, int | None] | None) -> tuple[Any, ...]:
        """One try at a commit inside the open write transaction. The head's state is updated in place;
        the caller forgets the cached head if anything fails."""
        store = self.store
        journal = store._journal
        created = created_at or now()  # an import keeps the exported version's time
        row, head = store._writable(self.task_id, trust)
        if row is None:
            row = journal.create_stream(self.task_id, created)
            head = store._head(row, 0)
        assert head is not None
        current = head.version
        if expected_version is not None and expected_version != current:
            if trust:  # nothing is applied yet: the cached head stays, to be caught up under the lock
                raise _Stale()
            raise ConflictError(self.task_id, expected_version, current)
        if expected_head is not None and (current, row.id if current else None) != expected_head:
            if trust:
                raise _Stale()
            raise ConflictError(self.task_id, expected_head[0], current)
        if at is not None and at <= current:
            raise ConflictError(self.task_id, at - 1, current)
        version = current + 1 if at is None else at
        try:
            rows, nbytes = _apply_events(store.codec, head, version, produce(head.state), check_paths)
        except PathError:
            if trust:  # the operations may fit the file's head and not our stale cached one: redo
                store._forget(row.id, self.task_id)
                raise _Stale() from None
            raise
        usage = usage_of(head.usage)
        for key, n in usage.items():
            if not is_number(n):  # a sum past 2**63 or to inf: JSON would refuse it, or store null
                raise InvalidArgumentError("token_usage", {key: n}, "a counter must stay a finite float or 64-bit int")
        usage_text = orjson.dumps(usage).decode() if usage else None
        checksum = version_checksum(head.checksum, version, created, name, auto, meta_text, usage_text, rows)
        try:
            journal.insert_version(VersionRow(row.id, version, created, name, auto, meta_text, usage_text,
                                              len(rows), nbytes, checksum))
        except _VersionTaken:
            store._forget(row.id, self.task_id)  # our head was stale and is now also half-applied
            if trust:
                raise _Stale() from None
            raise ConflictError(self.task_id, current, current + 1) from None
        journal.insert_events(row.id, version, rows)
        if checkpoint_id is not None:
            try:
                journal.insert_checkpoint_id(row.tree_id, checkpoint_id, row.id, version)
            except _CheckpointIdTaken:
                raise DuplicateCheckpointIdError(self.task_id, checkpoint_id) from None
        if tool_rows:
            journal.insert_tool_calls(row.id, version, tool_rows)
        if head.tracker.due():
            store._write_snapshot(row.id, version, head)
        return row, head, created, version, checksum, usage

    # -- agent integrations: objects, rollback on error, retention, tool calls (issue 4) ------------

    def load_into(self, obj: Any, version: int | None = None, *, migrations: Migrations | None = None) -> Checkpoint:
        """Restore `obj` (a Checkpointable, or a mutable mapping) in place from `version` (head when None),
        migrating older object state first; returns the checkpoint it was restored from."""
        version = self.version if version is None else _check_version("version", version)
        if version == 0:
            raise VersionNotFoundError(self.task_id, 0, 0)
        restore_object(obj, self.state(version), migrations)
        return self.get(version)

    def rollback_on_error(self, obj: Any, *, name: str | None = None, metadata: Mapping[str, Any] | None = None,
                          migrations: Migrations | None = None) -> AbstractContextManager[Checkpoint]:
        """`with stream.rollback_on_error(obj):` saves `obj` if it changed since the head, and restores it
        in place if the block raises (the exception is re-raised). See eventckpt.autosave."""
        from .autosave import rollback_on_error

        return rollback_on_error(self, obj, name=name, metadata=metadata, migrations=migrations)

    def prune(self, keep_last: int, *, auto_only: bool = False) -> retention.Pruned:
        """Keep the newest `keep_last` versions; remove this stream's older ones (only automatic ones with
        `auto_only`). Kept versions restore exactly; versions forks branch from are kept."""
        return retention.prune(self, keep_last, auto_only=auto_only)

    def expire(self, older_than: dt.timedelta | dt.datetime, *, auto_only: bool = False) -> retention.Pruned:
        """Remove this stream's versions created before `older_than` (an age or an aware datetime)."""
        return retention.expire(self, older_than, auto_only=auto_only)

    def remove(self, version: int) -> retention.Pruned:
        """Remove one version (not the head, nor one a fork branches from); the others stay restorable."""
        return retention.remove(self, version)

    def tool_calls(self, *, version: int | None = None, since: int = 0, upto: int | None = None) -> list[ToolCall]:
        """The tool calls recorded in this lineage, oldest first: all of them, those of one `version`, or
        those in versions after `since` and up to `upto`."""
        for label, value in (("version", version), ("upto", upto), ("since", since)):
            if value is not None and (type(value) is not int or value < 0):
                raise InvalidArgumentError(label, value, "must be a non-negative int")
        with self.store._guard() as journal:
            found = journal.stream_and_head(self.task_id)
            if found is None:
                return []
            row, head = found
            if version is not None:
                since, upto = version - 1, version
            upto = head if upto is None else min(upto, head)
            if upto <= since:
                return []
            chain = self.store._chain(row)
            rows = journal.tool_calls(segments_for(chain, upto), since)
        codec = self.store.codec
        return [decode_call(codec, self.task_id, r[0], r[1:]) for r in rows]

    def undo_tools(self, since_version: int, registry: ToolRegistry) -> UndoReport:
        """Run the registered reverses of the tool calls recorded after `since_version`, newest first;
        record each reverse (failures too) in one new version; report what was undone and what was not."""
        return undo_tools(self, since_version, registry)

    # -- partial saves (used by eventckpt.langgraph) ------------------------------------------------

    def update(
        self,
        changes: Mapping[str, Any],
        *,
        keep: Iterable[str] | None = None,
        plain: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        checkpoint_id: str | None = None,
    ) -> Checkpoint:
        """Commit the head state with the top-level keys in `changes` replaced, as the next version;
        with `keep`, every other key of the head that is not in `keep` is removed. Only the keys in
        `changes` are compared with the head, so the cost is the size of what the caller says changed
        however large the rest of the state is; a changed list that grew at its end is one append.

        Every change below a key in `plain` must be plain JSON (`Codec.is_plain`), else
        SerializationError and nothing is written: a caller that encodes other values its own way
        checks only what changed, not a whole long list every time."""
        state = _state_dict(changes)
        kept = None if keep is None else set(keep)
        if kept is not None and any(type(k) is not str for k in kept):
            raise InvalidArgumentError("keep", keep, "must be an iterable of top-level keys (str)")
        codec = self.store.codec
        plain_keys = set(plain)

        def events(head: dict[str, Any]) -> list[ops.Event]:
            out = [] if kept is None else [
                ops.Event(ops.DELETE, (k,)) for k in head if k not in state and k not in kept
            ]
            out.extend(ops.diff({k: head[k] for k in state if k in head}, state))
            if plain_keys:
                for event in out:
                    if event.path[0] in plain_keys and event.op != ops.DELETE and not codec.is_plain(event.value):
                        raise SerializationError(event.path, "is not plain JSON", type(event.value).__name__)
            return out

        return self._commit(events, False, lambda prev: prev, metadata=metadata, name=None, auto=False,
                            expected_version=expected_version, checkpoint_id=checkpoint_id)

    # -- log, history, diff (eventckpt/query.py, eventckpt/diffing.py) ------------------------------

    def log(self, limit: int | None = None, *, before: int | None = None, name: str | None = None,
            auto: bool | None = None, metadata: Mapping[str, Any] | None = None) -> list[Checkpoint]:
        """The checkpoints of this stream's lineage, newest first, without reading any state (values load
        when first read). Filters: versions before `before`, with checkpoint `name`, `auto` True/False,
        and `metadata` whose every key has the given value (compared as stored, type included: 5 is not
        "5"). Filter keys and values are data, never SQL. Cost: O(result) for no filter, `name`, or a
        str/int metadata value (indexed); other filters read the stream's version rows newest first.
        """
        from .query import log

        return log(self, limit, before=before, name=name, auto=auto, metadata=metadata)

    def history(self, path: Any, *, since: int | None = None, until: int | None = None,
                limit: int | None = None) -> list[HistoryEntry]:
        """Every change of one path in versions since..until (inclusive), newest first, at most `limit`.

        `path` is a top-level key or a tuple of keys and list indices, as in transactions. Included:
        events at the path; events below it (an item appended to a list, a key set inside a dict: their
        `path` says where); and events at an ancestor that replaced or removed it (a set of the parent
        dict is reported as a "set" of this path with its new value, or a "delete" when the new parent
        lacks it). A path with a list index names a position: deleting an earlier item shifts what is
        there without an event at it, and such shifts are not reported. Forks include the versions they
        share with their parent.
        """
        from .query import history

        return history(self, path, since=since, until=until, limit=limit)

    def diff(self, a: Any, b: Any = None, *, live: Any = None) -> Diff:
        """What changed from version `a` to version `b` (the head when None): added, removed and changed
        paths with old and new values. `a` and `b` are versions of this stream, (task_id, version) pairs
        or Checkpoints, so a fork compares with its parent. With `live=`, version `a` is compared with an
        in-memory state instead.

        Answered from the events after the two versions' common version, never by materializing both
        states: cost grows with the events in between and the paths they touch, not with history.
        Dicts compare by key, lists by position (an item dropped from the front changes every later
        position); items appended over a long range are read on first access of a change's value.
        """
        from .diffing import diff

        return diff(self, a, b, live=live)


class _Stale(Exception):
    """Internal: the cached head is behind the file; redo the commit against a fresh read."""


def _apply_events(
    codec: Any, head: Head, version: int, events: list[Any], check_paths: bool
) -> tuple[list[tuple[str, str, bytes | None]], int]:
    """Encode events, fold them onto the head state and account them for snapshots.

    Returns the journal rows (op, path, JSON bytes) and their value bytes.
    """
    rows: list[tuple[str, str, bytes | None]] = []
    state, observe = head.state, head.tracker.observe
    total = 0
    for seq, event in enumerate(events):
        if check_paths:  # recorded operations: value already encoded and copied
            op, path, value, raw = event
            path = ops.resolve(state, op, path)
            if raw is None and op != ops.DELETE:
                raw = orjson.dumps(value)
        else:  # diff events carry the caller's objects: encode now, keep our own copy
            op, path, caller_value = event
            if op == ops.DELETE:
                value, raw = None, None
            else:
                try:
                    raw, value = codec.encode_copy(caller_value)
                except SerializationError as exc:
                    raise SerializationError(path + exc.path, exc.reason, exc.type_name) from None
        ops.apply(state, op, path, value)
        if op == ops.INCR and not codec.allow_nan:
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


def _check_usage(token_usage: Any) -> dict[str, int | float] | None:
    if token_usage is None:
        return None
    if not isinstance(token_usage, Mapping):
        raise InvalidArgumentError("token_usage", token_usage, "must be a mapping of counter name to number")
    out = {}
    for key, n in token_usage.items():
        if type(key) is not str or not encodable(key):
            raise InvalidArgumentError("token_usage", token_usage, f"counter names are str (valid UTF-8), not {key!r}")
        check_number(f"token_usage[{key!r}]", n)
        out[key] = n
    return out


def _check_options(*, metadata: Any, name: Any, auto: Any, expected_version: Any, checkpoint_id: Any) -> None:
    if metadata is not None and not (isinstance(metadata, Mapping) and all(type(k) is str for k in metadata)):
        raise InvalidArgumentError("metadata", metadata, "must be a mapping with str keys")
    if name is not None and (type(name) is not str or len(name) > MAX_NAME or not encodable(name)):
        raise InvalidArgumentError("name", name, f"must be a str of at most {MAX_NAME} characters (valid UTF-8)")
    if type(auto) is not bool:
        raise InvalidArgumentError("auto", auto, "must be a bool")
    if expected_version is not None and (type(expected_version) is not int or expected_version < 0):
        raise InvalidArgumentError("expected_version", expected_version, "must be a non-negative int")
    if checkpoint_id is not None and (
        type(checkpoint_id) is not str or not checkpoint_id or len(checkpoint_id) > MAX_NAME or not encodable(checkpoint_id)
    ):
        raise InvalidArgumentError(
            "checkpoint_id", checkpoint_id, f"must be a non-empty str of at most {MAX_NAME} characters (valid UTF-8)"
        )
