"""CheckpointStore: one stream's versions — save, transaction, time travel, fork, rollback."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import orjson

from . import diffing, ops, partial, query, retention
from .checkpoint import Checkpoint, ForkOrigin, format_time, utc_now
from .checks import added, check_added, check_new_name, check_options, check_task_id, check_usage, check_version
from .commit import commit
from .errors import (EventCkptError, InvalidArgumentError, PathError, SerializationError, StreamNotFoundError,
                     StreamExistsError, VersionNotFoundError)
from .journal import Journal, StreamKey, StreamRow, VersionRow
from .mixin import Migrations
from .mixin import restore as restore_object
from .paths import encodable
from .prepared import save_tracked
from .rollback import rollback_on_error
from .states import state_dict
from .tools import ToolCall, ToolRegistry, UndoReport, decode_call, encode_calls, undo_tools
from .tracked import TrackedState
from .transaction import Transaction

if TYPE_CHECKING:
    from .diffing import Diff
    from .query import HistoryEntry, VersionSize
    from .store import Store


class CheckpointStore:
    """The versions of one stream (task, session, thread) in a store. Cheap to create; holds no state."""

    def __init__(self, store: Store, task_id: str) -> None:
        self.store = store
        self.core = store.core
        self.task_id = check_task_id(task_id)

    def __repr__(self) -> str:
        try:
            count = len(self)
        except EventCkptError:  # a repr describes, it does not fail (a stream not created yet, a closed store)
            count = 0
        return f"CheckpointStore(task_id={self.task_id!r}, checkpoints={count})"

    def __len__(self) -> int:
        """The number of versions of the lineage (StreamNotFoundError when the stream does not exist)."""
        with self.core.session() as journal:
            row, head = self._found(journal)
            return journal.count_versions(self.core.segments(journal, row, head))

    def _found(self, journal: Journal) -> tuple[StreamRow, int]:
        """The stream's row and head version; StreamNotFoundError when it does not exist."""
        return self.core.existing(journal, self.task_id)

    # -- reading ----------------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The head version: 0 when the stream has no versions, and also when it does not exist yet (what
        its first save builds on, so `save(..., expected_version=stream.version)` works from the start)."""
        with self.core.session() as journal:
            found = journal.stream_and_head(self.task_id)
            return found[1] if found else 0

    @property
    def latest(self) -> Checkpoint | None:
        """The head checkpoint, or None when the stream has no versions (a fork at 0, or every version
        removed); StreamNotFoundError when it does not exist."""
        with self.core.session() as journal, journal.read():  # the head found and read in one snapshot
            row, head = self._found(journal)
            return self._checkpoint_at(journal, row, head, None) if head else None

    @property
    def parent(self) -> ForkOrigin | None:
        """Where this stream forked from (None for a stream that is not a fork)."""
        with self.core.session() as journal:
            return self.core.origin(journal, self._found(journal)[0])

    def exists(self) -> bool:
        """Whether the stream exists (the one question a missing stream answers without an error)."""
        with self.core.session() as journal:
            return journal.stream(self.task_id) is not None

    def get(self, version: int, *, as_type: Any = None) -> Checkpoint:
        """The checkpoint at `version` (1-based); VersionNotFoundError when there is none."""
        check_version("version", version)
        with self.core.session() as journal, journal.read():
            row, head = self._found(journal)
            if not 1 <= version <= head:
                raise VersionNotFoundError(self.task_id, version, head)
            return self._checkpoint_at(journal, row, version, as_type)

    def find(self, checkpoint_id: str, *, as_type: Any = None) -> Checkpoint | None:
        """The checkpoint saved with `checkpoint_id` anywhere in this stream's tree, or None when no
        version has that id."""
        if type(checkpoint_id) is not str or not encodable(checkpoint_id):
            raise InvalidArgumentError("checkpoint_id", checkpoint_id, "must be a str (valid UTF-8)")
        with self.core.session() as journal:
            row = self._found(journal)[0]
            hit = journal.find_checkpoint_id(row.tree_id, checkpoint_id)
            if hit is None:
                return None
            owner = next(r for r in journal.lineage(StreamKey(row.tree_id, hit[0])) if r.id == hit[0])
            return CheckpointStore(self.store, owner.name)._checkpoint_at(journal, owner, hit[1], as_type)

    def list_versions(self) -> list[int]:
        """Every version of the lineage that still exists, oldest first."""
        with self.core.session() as journal:
            row, head = self._found(journal)
            return journal.version_numbers(self.core.segments(journal, row, head))

    def state(self, version: int | None = None, *, as_type: Any = None) -> Any:
        """The state at `version` (head when None), as a fresh dict or `as_type`. Like get(): version 0
        names no checkpoint, and a stream without versions has no state (VersionNotFoundError)."""
        core = self.core
        with core.session() as journal, journal.read():  # the head, the version and its state in one snapshot
            row, head = self._found(journal)
            if version is None:
                version = head
            check_version("version", version)
            if not 1 <= version <= head:
                raise VersionNotFoundError(self.task_id, version, head)
            core.version_row(journal, row, version)
            state = core.state_at(journal, row, version)
        return core.codec.structure(state, as_type) if as_type is not None else state

    def _checkpoint_at(self, journal: Journal, row: StreamRow, version: int, as_type: Any) -> Checkpoint:
        """A checkpoint whose values load on first access."""
        vrow = self.core.version_row(journal, row, version)
        owner = self.core.owner(journal, row, version)
        return self._checkpoint(journal, row, vrow, journal.checkpoint_id_of(owner, version), as_type)

    def _checkpoint(self, journal: Journal, row: StreamRow, vrow: VersionRow, checkpoint_id: str | None,
                    as_type: Any) -> Checkpoint:
        codec = self.core.codec
        return Checkpoint(
            self.task_id,
            vrow.version,
            token_usage=orjson.loads(vrow.usage) if vrow.usage else {},
            metadata=codec.decode(vrow.metadata) if vrow.metadata else {},
            created_at=vrow.created_at,
            name=vrow.name,
            auto=bool(vrow.auto),
            parent=self.core.origin(journal, row),
            checkpoint_id=checkpoint_id,
            loader=self.core.loader(row, vrow.version, as_type),
        )

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
        add_usage: Mapping[str, int | float] | None = None,
    ) -> Checkpoint:
        """Commit `values` as the next version. Only the differences from the head are stored: unchanged
        keys cost nothing, and a list that grew at its end costs one append. `values` is a mapping, a
        dataclass/attrs instance or a Checkpointable; `tool_calls` are recorded in the same version.

        Token usage is cumulative. `token_usage` gives this version's totals (every counter: those not
        named are dropped); `add_usage` adds to the previous version's instead, as a transaction's
        `add_usage()` does. Neither: the previous version's counters are kept.

        A tracked state checked out from this stream (`checkout()`) commits exactly the changes it
        recorded, compared with nothing; ConflictError when the stream's head is no longer the version
        it was checked out at or last saved as. The other arguments mean the same for both."""
        return self._prepared(values, token_usage, metadata=metadata, name=name, auto=auto,
                              expected_version=expected_version, checkpoint_id=checkpoint_id,
                              tool_calls=tool_calls, add_usage=add_usage, detach=False)()

    def prepare_save(self, values: Any, token_usage: Mapping[str, int | float] | None = None, **options: Any,
                     ) -> Callable[[], Checkpoint]:
        """save() in two steps, for a caller that commits on another thread (eventckpt.aio): what is saved
        is taken now (a copy of the state, or the edits a tracked state recorded so far), and the function
        returned commits it. Bad arguments raise now; edits made after this call are not in the version.
        A tracked state saved again before this commit ran builds on the version it makes (run them in
        order; ConflictError for the later one if this one fails or never runs)."""
        return self._prepared(values, token_usage, **options, detach=True)

    def _prepared(self, values: Any, token_usage: Mapping[str, int | float] | None = None, *,
                  metadata: Mapping[str, Any] | None = None, name: str | None = None, auto: bool = False,
                  expected_version: int | None = None, checkpoint_id: str | None = None,
                  tool_calls: Iterable[ToolCall] | None = None, add_usage: Mapping[str, int | float] | None = None,
                  detach: bool) -> Callable[[], Checkpoint]:
        tracked = isinstance(values, TrackedState) and values.belongs_to(self)
        if isinstance(values, TrackedState) and not tracked:
            values = values.plain()  # another stream's (or store's) tracked state is plain data here
        state = None if tracked else state_dict(values)
        if detach:  # the caller may change its objects while the commit waits
            copy = self.core.codec.encode_copy
            if state is not None:
                state = {key: copy(value)[1] for key, value in state.items()}
            if isinstance(metadata, Mapping):
                metadata = {key: copy(value)[1] for key, value in metadata.items()}
        usage = check_usage(token_usage)
        if add_usage is not None:
            if usage is not None:
                raise InvalidArgumentError("add_usage", add_usage, "give the totals (token_usage) or what to add"
                                           " (add_usage), not both")
            amounts = check_added(add_usage)
        tool_rows = encode_calls(self.core.codec, tool_calls)

        def events(head: dict[str, Any]) -> list[ops.Event]:
            return ops.diff(head, state)

        def usage_of(prev: dict[str, int | float]) -> dict[str, int | float]:
            if usage is not None:
                return usage
            return added(prev, amounts) if add_usage is not None else prev

        options = dict(metadata=metadata, name=name, auto=auto, expected_version=expected_version,
                       checkpoint_id=checkpoint_id)
        if tracked:
            return save_tracked(self.core, self.task_id, values, usage_of, tool_rows, **options)
        return lambda: commit(self.core, self.task_id, events, False, usage_of, tool_rows=tool_rows, **options)

    def checkout(self) -> TrackedState:
        """The head state as a tracked state: live dicts and lists (subclasses of dict and list) that
        record their own in-place changes, so `save(state)` commits exactly those changes without
        comparing anything (see eventckpt.tracked). Like `version`, a stream without versions (or not
        created yet) gives what its first save builds on: an empty state."""
        core = self.core
        with core.session() as journal, core.stream_lock(self.task_id), journal.read():
            found = journal.stream_and_head(self.task_id)
            if found is None or found[1] == 0:
                return TrackedState.checkout(self, {}, 0, None)
            row, version = found
            head = core.head(journal, row, version)
            return TrackedState.checkout(self, head.state, head.version, row.id)

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
        check_options(**options)
        return Transaction(self.core, self.task_id, options)

    def rollback(self, to: int, *, metadata: Mapping[str, Any] | None = None, name: str | None = None,
                 expected_version: int | None = None) -> Checkpoint:
        """Append a new version whose state equals version `to` (a version that exists: 1 or more).
        History is kept: nothing is deleted.

        Token usage is not rolled back (it counts what was spent); metadata records `rollback_to`.
        """
        check_version("to", to)
        check_options(metadata=metadata, name=name, auto=False, expected_version=expected_version, checkpoint_id=None)
        target = self.state(to)
        return commit(self.core, self.task_id, lambda head: ops.diff(head, target), False, lambda prev: prev,
                      metadata={**(metadata or {}), "rollback_to": to}, name=name, auto=False,
                      expected_version=expected_version, checkpoint_id=None)

    def fork(self, at: int | None = None, task_id: str | None = None) -> CheckpointStore:
        """A new stream sharing this one's history up to version `at` (head when None); nothing is copied.

        `at=0` shares no versions: a new, empty lineage in the same stream tree (so checkpoint ids stay
        unique across both)."""
        if task_id is not None:
            check_new_name(task_id)
        core = self.core
        with core.session() as journal, journal.write():
            # Hold the tree (as a commit does) before checking the fork point and inserting the fork: a
            # prune or delete_stream on another host waits for this transaction, so it sees the fork
            # (kept_for_forks) instead of removing the version, or the stream, under it.
            journal.hold_tree(self._found(journal)[0].tree_id)
            row, head = self._found(journal)  # read again: a rewrite or delete may have landed before the hold
            at = head if at is None else check_version("at", at)
            if not 0 <= at <= head:
                raise VersionNotFoundError(self.task_id, at, head)
            if at:
                core.version_row(journal, row, at)
            if task_id is not None:
                journal.create_stream(task_id, format_time(utc_now()), row, at)
            else:
                task_id = self._fork_named(journal, row, at)
        return CheckpointStore(self.store, task_id)

    def _fork_named(self, journal: Journal, row: StreamRow, at: int) -> str:
        """Create the fork as the first free `name~N`. Another process may take that name between the look
        and the insert (PostgreSQL reads at READ COMMITTED, and nothing locks a name not yet taken): its
        insert refuses ours, and the next number is tried, so an automatic name never collides."""
        n = 1
        while True:
            name = f"{self.task_id}~{n}"
            if journal.stream(name) is None:
                try:
                    journal.create_stream(name, format_time(utc_now()), row, at)
                    return name
                except StreamExistsError:
                    pass
            n += 1

    def update(
        self,
        changes: Mapping[str, Any],
        *,
        keep: Iterable[str] | None = None,
        plain: Iterable[str] = (),
        metadata: Mapping[str, Any] | None = None,
        expected_version: int | None = None,
        checkpoint_id: str | None = None,
        appends: Mapping[str, tuple[int, list[Any]]] | None = None,
        edits: Sequence[ops.Event] = (),
        created_at: str | None = None,
    ) -> Checkpoint:
        """Commit the head state with the top-level keys in `changes` replaced, as the next version;
        with `keep`, every other key of the head that is not in `keep` (or `appends`) is removed. Only
        the keys in `changes` are compared with the head, so the cost is the size of what the caller
        says changed however large the rest of the state is; a changed list that grew at its end is one
        append. `appends` maps a key holding a list to (its length the caller knows, items to append):
        the items are appended without comparing anything, and a key holding anything else than a list
        of that length is a PathError. `edits` are events below kept keys (a dict's key set or deleted),
        applied as they are once checked to fit the head (else PathError). `created_at` (eventckpt's
        stored form, `...Z`) is the version's time instead of now.

        Every change below a key in `plain` must be plain JSON (`Codec.is_plain`), else
        SerializationError and nothing is written: a caller that encodes other values its own way
        checks only what changed, not a whole long list every time."""
        state = state_dict(changes)
        kept = None if keep is None else set(keep)
        if kept is not None and any(type(k) is not str for k in kept):
            raise InvalidArgumentError("keep", keep, "must be an iterable of top-level keys (str)")
        grown = dict(appends or {})
        if any(k in state for k in grown):
            raise InvalidArgumentError("appends", appends, "a key cannot be both changed and appended to")
        if created_at is not None and (type(created_at) is not str or not created_at.endswith("Z")):
            raise InvalidArgumentError("created_at", created_at, "must be a UTC time in eventckpt's form (...Z)")
        codec = self.core.codec
        plain_keys = set(plain)

        def events(head: dict[str, Any]) -> list[ops.Event]:
            out = [] if kept is None else [
                ops.Event(ops.DELETE, (k,)) for k in head if k not in state and k not in kept and k not in grown
            ]
            for key, (length, items) in grown.items():
                found = head.get(key)
                if type(found) is not list or len(found) != length:
                    shown = f"{len(found)} items" if type(found) is list else f"a {type(found).__name__}"
                    raise PathError((key,), f"holds {shown}, not the list of {length} items to append to")
                if items:
                    out.append(ops.Event(ops.APPEND, (key,), items[0]) if len(items) == 1
                               else ops.Event(ops.EXTEND, (key,), items))
            for event in edits:
                if len(event.path) < 2 or event.path[0] in state:
                    raise PathError(event.path, "an edit must lie below a key that is not also changed")
                ops.resolve(head, event.op, event.path)
                out.append(event)
            out.extend(ops.diff({k: head[k] for k in state if k in head}, state))
            if plain_keys:
                for event in out:
                    if event.path[0] in plain_keys and event.op != ops.DELETE and not codec.is_plain(event.value):
                        raise SerializationError(event.path, "is not plain JSON", type(event.value).__name__)
            return out

        return commit(self.core, self.task_id, events, False, lambda prev: prev, metadata=metadata, name=None,
                      auto=False, expected_version=expected_version, checkpoint_id=checkpoint_id, created_at=created_at)

    # -- agent integrations: objects, rollback on error, retention, tool calls (issue 4) ------------

    def load_into(self, obj: Any, version: int | None = None, *, migrations: Migrations | None = None) -> Checkpoint:
        """Restore `obj` (a Checkpointable, or a mutable mapping) in place from `version` (head when None),
        migrating older object state first; returns the checkpoint it was restored from."""
        cp = self.get(self.version if version is None else check_version("version", version))
        restore_object(obj, self.state(cp.version), migrations)
        return cp

    def rollback_on_error(self, obj: Any, *, name: str | None = None, metadata: Mapping[str, Any] | None = None,
                          migrations: Migrations | None = None) -> AbstractContextManager[Checkpoint]:
        """`with stream.rollback_on_error(obj):` saves `obj` if it changed since the head, and restores it
        in place if the block raises (the exception is re-raised). See eventckpt.rollback."""
        return rollback_on_error(self, obj, name=name, metadata=metadata, migrations=migrations)

    def prune(self, keep_last: int, *, auto_only: bool = False) -> retention.Pruned:
        """Keep the newest `keep_last` versions; remove this stream's older ones (only automatic ones with
        `auto_only`). Kept versions restore exactly; versions forks branch from are kept."""
        return retention.prune(self.core, self.task_id, keep_last, auto_only=auto_only)

    def expire(self, older_than: dt.timedelta | dt.datetime, *, auto_only: bool = False) -> retention.Pruned:
        """Remove this stream's versions created before `older_than` (an age or an aware datetime)."""
        return retention.expire(self.core, self.task_id, older_than, auto_only=auto_only)

    def remove(self, version: int) -> retention.Pruned:
        """Remove one version (not the head, nor one a fork branches from); the others stay restorable."""
        return retention.remove(self.core, self.task_id, version)

    def tool_calls(self, *, version: int | None = None, since: int = 0, upto: int | None = None) -> list[ToolCall]:
        """The tool calls recorded in this lineage, oldest first: all of them, those of one `version` (which
        must exist), or those in versions after `since` and up to `upto`."""
        for label, value in (("version", version), ("upto", upto), ("since", since)):
            if value is not None and (type(value) is not int or value < 0):
                raise InvalidArgumentError(label, value, "must be a non-negative int")
        with self.core.session() as journal:
            row, head = self._found(journal)
            if version is not None:
                self.core.version_row(journal, row, version)  # VersionNotFoundError when there is none
                since, upto = version - 1, version
            upto = head if upto is None else min(upto, head)
            if upto <= since:
                return []
            rows = journal.tool_calls(self.core.segments(journal, row, upto), since)
        codec = self.core.codec
        return [decode_call(codec, self.task_id, r[0], r[1:]) for r in rows]

    def undo_tools(self, since_version: int, registry: ToolRegistry) -> UndoReport:
        """Run the registered reverses of the tool calls recorded after `since_version`, newest first;
        record each reverse (failures too) in one new version; report what was undone and what was not."""
        return undo_tools(self, since_version, registry)

    # -- log, history, diff (eventckpt/query.py, eventckpt/diffing.py) ------------------------------

    def log(self, limit: int | None = None, *, before: int | None = None, name: str | None = None,
            auto: bool | None = None, metadata: Mapping[str, Any] | None = None) -> list[Checkpoint]:
        """The checkpoints of this stream's lineage, newest first, without reading any state (values load
        when first read). Filters: versions before `before`, with checkpoint `name`, `auto` True/False,
        and `metadata` whose every key has the given value (compared as stored, type included: 5 is not
        "5"). Filter keys and values are data, never SQL. Cost: O(result) for no filter, `name`, or a
        str/int metadata value (indexed); other filters read the stream's version rows newest first.
        """
        return query.log(self.core, self.task_id, limit, before=before, name=name, auto=auto, metadata=metadata)

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
        return query.history(self.core, self.task_id, path, since=since, until=until, limit=limit)

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
        return diffing.diff(self.core, self.task_id, a, b, live=live)

    # -- reading parts of a state, and what versions wrote (eventckpt/partial.py, eventckpt/query.py) --

    def keys(self, version: int | None = None) -> list[str]:
        """The top-level keys of the state at `version` (head when None), without reading their values:
        from the nearest snapshot's manifest and the events after it."""
        return partial.keys(self.core, self.task_id, version)

    def value(self, path: Any, version: int | None = None, *, start: int | None = None, stop: int | None = None) -> Any:
        """The value at `path` (a key or a tuple of keys and indices) at `version` (head when None),
        without restoring the rest of the state; PathError when there is none. With `start`/`stop`, only
        those items of the list there (a negative `start` without `stop`: the last -start items): for a
        top-level list only appended to since it was last set (a conversation), only they are read, so
        the newest messages of a long run cost what they hold."""
        return partial.value(self.core, self.task_id, path, version, start, stop)

    def length(self, path: Any, version: int | None = None) -> int | None:
        """The number of items of the list at `path` at `version` (head when None), None when no list is
        there; counted on the path index without reading the items (for lists only appended to)."""
        return partial.length(self.core, self.task_id, path, version)

    def sizes(self, since: int = 1, until: int | None = None, *, limit: int | None = None) -> list[VersionSize]:
        """`VersionSize(version, events, bytes)` of the lineage's versions since..until (head when None),
        oldest first, at most `limit`: what each version wrote, from the version rows alone."""
        return query.sizes(self.core, self.task_id, since, until, limit)

    def events(self, version: int, *, limit: int | None = None) -> list[HistoryEntry]:
        """The events of one version in order (at most `limit`), as `HistoryEntry` rows: what that
        commit changed, path by path."""
        return query.events(self.core, self.task_id, version, limit)
