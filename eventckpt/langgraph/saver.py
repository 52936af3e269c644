"""EventCkptSaver: a LangGraph checkpointer that stores checkpoints as eventckpt events.

A (thread_id, checkpoint_ns) is one stream tree (layout.py). A checkpoint is one version: the next
version of its parent's stream when the parent is that stream's head, else the first version of a fork
at the parent, which shares the history before it instead of copying it (time travel, `update_state`
on an old checkpoint); a checkpoint without a parent starts a fork at 0 of the same tree. The LangGraph
checkpoint id is the version's checkpoint id. A put stores only the channels LangGraph says changed, and
a reducer channel that grew by what the step's tasks wrote as appends (puts.py). LangGraph's other
bookkeeping is the version's metadata (records.py); pending writes live in `langgraph_writes`, stored
once (writes.py). The newest checkpoint of each thread is kept serialized for fast reads (heads.py).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import functools
import os
import re
from collections import defaultdict
from collections.abc import AsyncIterator, Container, Hashable, Iterator, Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..checkpoint import now
from ..errors import (
    ConflictError,
    DuplicateCheckpointIdError,
    InvalidArgumentError,
    PathError,
    SerializationError,
    StoreUnavailableError,
)
from ..gcpause import quiet_gc
from ..journal import LangGraphRow
from ..materialize import LaterList
from ..paths import to_text
from ..snapshot import SnapshotPolicy
from ..store import Store
from ..store import open as open_store
from . import history, maintenance, records
from .heads import Heads, entry_of
from .memory import Memory
from .layout import OVERFLOW, SERDE, channel_key, tree_name
from .puts import Channel, Plan, Put, Thread
from .replay import states_at
from .values import TREE_ENCODING, PackedPrefix, PrefixUnusable, Values
from .writes import TaskWrites, Write, encode_writes, is_reference, parse_row, referred, replaces, resolve, row_text

_CHECKPOINTER_KEY = "__pregel_checkpointer"  # LangGraph's CONFIG_KEY_CHECKPOINTER
_CHUNK = 256  # checkpoints whose states one listing builds at once (memory stays bounded)
_ATTEMPTS = 6
_ROWS_SEEN = 256  # newest-checkpoint lookups remembered (rows are small: no checkpoint values)
# A LangGraph step changes a few small channels besides the appended message (shared by snapshots), so
# the default 64 kB tail would mean ~80 steps to replay on a restore; 16 kB keeps it near 20 steps for
# about 2% more file.
SNAPSHOTS = SnapshotPolicy(min_tail_bytes=16 * 1024)
# SqliteSaver's rule for metadata filter keys: a dotted key is a path into the metadata.
_FILTER_KEY = re.compile(r"[a-zA-Z0-9_.-]+")


class InvalidFilterKeyError(InvalidArgumentError):
    """A `list(filter=...)` key that is not a metadata path: SqliteSaver's ValueError, as eventckpt's."""

    def __init__(self, key: Any) -> None:
        super().__init__("filter", key, "keys are metadata paths of letters, digits and _ - separated by dots")
        self.args = (f"Invalid filter key: {key!r}. Filter keys must contain only alphanumeric characters, "
                     "underscores, dots, and hyphens, with no empty part between dots.",)


class EventCkptSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer on an eventckpt store: every step is stored as the events that changed.

        saver = EventCkptSaver("agent.db")          # or EventCkptSaver(store) with an open Store
        graph = builder.compile(checkpointer=saver)

    Sync and async methods share one store; several processes may use one file (writes take SQLite's
    write lock with BEGIN IMMEDIATE and wait up to `timeout` seconds for it).
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        serde: SerializerProtocol | None = None,
        durability: str = "normal",
        timeout: float = 30.0,
        snapshots: SnapshotPolicy | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if isinstance(store, Store):
            self.store, self._owns_store = store, False
        elif isinstance(store, (str, os.PathLike)):
            self.store = open_store(store, durability=durability, timeout=timeout, snapshots=snapshots or SNAPSHOTS)
            self._owns_store = True
        else:
            raise InvalidArgumentError("store", store, "must be an eventckpt Store or a file path")
        # Each namespace's newest checkpoint as this saver knows it (memory.py). A put whose parent is
        # that checkpoint goes to the same stream without a lookup; the store's expected_version check
        # catches any other writer in between.
        self._memory = Memory()
        self._heads = Heads()
        # The row of each (thread, namespace, id or None) newest-checkpoint lookup, with the store's change
        # mark it was read at: get_state, asked again with nothing written in between, skips the query.
        self._newest_rows: dict[tuple[str, str, str | None], tuple[Hashable, list[LangGraphRow]]] = {}

    def close(self) -> None:
        """Close the store if this saver opened it."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> EventCkptSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _values(self) -> Values:
        return Values(self.serde, self.store.codec)  # `with_allowlist` clones may swap the serde

    def _forget(self) -> None:
        self._memory.forget()
        self._heads.clear()
        self._newest_rows.clear()

    # -- reading ----------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by the config's checkpoint_id, or the thread namespace's newest one."""
        thread_id, ns = _thread(config), _namespace(config)
        checkpoint_id = _checkpoint_id(config)
        known = self._memory.thread((thread_id, ns))  # one dict read: no lock, so reads never wait for puts
        if checkpoint_id is not None and (known is None or known.checkpoint_id != checkpoint_id):
            try:
                return self._older(thread_id, ns, checkpoint_id, prefixes=True)
            except PrefixUnusable:  # a cached list's prefix that cannot stand for the items: read them all
                return self._older(thread_id, ns, checkpoint_id, prefixes=False)
        key = (thread_id, ns, checkpoint_id)
        with self.store.core.session() as journal:
            mark = journal.change_mark()
            seen = self._newest_rows.get(key)
            if mark is not None and seen is not None and seen[0] == mark:
                rows = seen[1]  # nothing in the store changed since this very query ran
            else:
                rows = journal.langgraph_checkpoints(thread_id=thread_id, checkpoint_ns=ns,
                                                     checkpoint_id=checkpoint_id, limit=1)
                if mark is not None:
                    if len(self._newest_rows) >= _ROWS_SEEN:
                        self._newest_rows.clear()
                    self._newest_rows[key] = (mark, rows)
        if not rows:
            return None
        row = rows[0]
        entry = self._heads.get(row.stream_id, row.version)
        # A graph's run reads the checkpoint it continues with LangGraph's run keys in its config, and its
        # lists start with the objects handed out: kept, they let its puts see a list only grew. A plain
        # read (get_state) keeps nothing: its objects die with the caller's, and memory holds no state.
        # (get_state of a subgraph passes the checkpointer key alone.)
        run = any(type(k) is str and k.startswith("__pregel_") and k != _CHECKPOINTER_KEY
                  for k in config.get("configurable", {}))
        if entry is None:
            return next(self._tuples(rows, newest=checkpoint_id is None, keep=run))
        values = self._values
        record, writes = self.store.codec.decode_many([row.metadata or "{}", row.writes or "[]"])
        channels = entry.values(values.serde)
        if run:
            self._memory.handed_out((thread_id, ns), row.checkpoint_id, row.stream_id, channels)
        return self._tuple(row, channels, record, writes, values, self._references([row], [writes]))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, when the config names one), or of all
        threads when `config` is None; only those whose metadata has every `filter` item (a dotted key
        is a path into the metadata, as in SqliteSaver), older than `before`, at most `limit`. One query
        finds them with their writes; states are then built a chunk at a time, one restore and one event
        range per stream (never one restore per checkpoint).

        The tuples of one call share objects with each other (that is what makes the listing cost what
        changed, not O(checkpoints x state)): a plain JSON value (a list, a dict, an item of either) that
        two checkpoints hold unchanged is one object in both, and a serde-encoded list item (a message)
        stored once is decoded once for the whole call, so every checkpoint holding it holds that object.
        Nothing is shared with the saver, its caches, another call, or what get_tuple of the newest
        checkpoint returns. Reading is safe; to edit a checkpoint's values (a message of one snapshot
        of get_state_history), copy.deepcopy them first, or the edit shows in the other tuples too."""
        conf = (config or {}).get("configurable", {})
        if limit is not None and (type(limit) is not int or limit < 0):
            raise InvalidArgumentError("limit", limit, "must be None or a non-negative int")
        with self.store.core.session() as journal:
            rows = journal.langgraph_checkpoints(
                thread_id=str(conf["thread_id"]) if conf.get("thread_id") is not None else None,
                checkpoint_ns=conf.get("checkpoint_ns"),
                checkpoint_id=conf.get("checkpoint_id") or None,
                before=get_checkpoint_id(before) if before else None,
                metadata=self._filters(filter),
                limit=limit,
            )
        return self._tuples(rows)

    def _filters(self, filter: dict[str, Any] | None) -> builtins.list[tuple[str, str]]:  # noqa: A002
        out = []
        for key, value in (filter or {}).items():
            if type(key) is not str or not _FILTER_KEY.fullmatch(key) or "" in key.split("."):
                raise InvalidFilterKeyError(key)
            out.append((to_text(("metadata", *key.split("."))), self.store.codec.encode_text(value)))
        return out

    def _tuples(self, rows: Sequence[LangGraphRow], newest: bool = False, keep: bool = False,
                ) -> Iterator[CheckpointTuple]:
        """The rows' tuples, a chunk at a time (`newest`: the thread's newest checkpoint, to cache; `keep`:
        and remember the values handed out, for the run continuing it). A stream's lists that only grew
        are not restored again for each chunk: they are taken from the cached newest checkpoint for its
        first chunk, and from the oldest state of its chunk before for the next ones."""
        items: dict[int, tuple[Any, Any]] = {}  # decoded serde list items, shared by the whole listing
        later: dict[str, dict[str, LaterList]] = {}  # by stream: the lists of the oldest state built so far
        for start in range(0, len(rows), _CHUNK):
            chunk = rows[start : start + _CHUNK]
            for row in chunk:  # a stream the chunk before did not have: the lists of its cached newest checkpoint
                if row.stream not in later:
                    later[row.stream] = self._flat_lists(row.stream_id, row.version)
            read = self._read(chunk, items, lists=later)
            # Kept only for the streams of the next chunk (a listing of many threads would otherwise keep
            # one state of each), and taken before the caller gets (and may edit) the lists.
            following = {row.stream for row in rows[start + _CHUNK : start + 2 * _CHUNK]}
            later = _oldest_lists(chunk, read[0], following) if following else {}
            yield from self._build(chunk, *read, items, newest, keep)

    def _older(self, thread_id: str, ns: str, checkpoint_id: str, prefixes: bool) -> CheckpointTuple | None:
        """An older checkpoint, found and restored in one read transaction, decoded after it. With
        `prefixes`, its lists that only grew since the cached newest checkpoint are taken from that."""
        items: dict[int, tuple[Any, Any]] = {}
        with self.store.core.session() as journal:
            proven = not journal.in_transaction  # our own snapshot, not a caller's transaction
            with journal.read():
                rows = journal.langgraph_checkpoints(thread_id=thread_id, checkpoint_ns=ns,
                                                     checkpoint_id=checkpoint_id, limit=1,
                                                     child=True)  # its writes may refer to its child
                if not rows:
                    return None
                lists = self._later_lists(rows[0]) if prefixes else None
                read = self._read(rows, items, proven, {rows[0].stream: lists} if lists else None)
        # One checkpoint: each list decodes whole, in one serde call (sharing decoded items between
        # checkpoints is what pays in a listing, item by item).
        return self._build(rows, *read, None)[0]

    def _later_lists(self, row: LangGraphRow) -> dict[str, LaterList] | None:
        """The lists of the cached newest checkpoint of the row's stream when it is the row's or a later
        one: an older checkpoint's list that only grew since is a prefix of it, copied instead of read
        (a list of flat dicts), or taken as its bytes (a list of serde items: see PackedPrefix)."""
        entry = self._heads.newest(row.stream_id)
        if entry is None or entry.version < row.version:
            return None
        # The child's events are folded onto the list too when the row's writes may refer to it: marks take
        # only appends, which the index proves through the cached version alone (a flat list's copies take any).
        marks = entry.version > row.version or not _refers_to_child(row)
        return {name: LaterList(entry.version, blob.count, blob.head if blob.flat is not None else blob.marks)
                for name, blob in entry.channels.items()
                if blob.count is not None and (blob.flat is not None or (marks and blob.ends is not None))
                and channel_key(name) is not None}

    def _flat_lists(self, stream_id: int, version: int) -> dict[str, LaterList]:
        """The lists of flat dicts of the stream's cached newest checkpoint when it is `version` or a later
        one (a restore takes a prefix of one only when its index proves that the list only grew)."""
        entry = self._heads.newest(stream_id)
        if entry is None or entry.version < version:
            return {}
        return {name: LaterList(entry.version, blob.count, blob.head) for name, blob in entry.channels.items()
                if blob.count is not None and blob.flat is not None and channel_key(name) is not None}

    def _read(self, chunk: Sequence[LangGraphRow], items: dict[int, tuple[Any, Any]], proven: bool = False,
              lists: Mapping[str, Mapping[str, LaterList]] | None = None,
              ) -> tuple[dict[tuple[str, int], dict[str, Any]], builtins.list[Any], dict[int, Any]]:
        """What the store holds for a chunk of rows: their states (and their children's, when their writes
        refer to them), their decoded metadata and writes, and the values the writes refer to. `proven`:
        the rows were read in the read transaction open around this call. `lists`: by stream, lists as a
        later version of the stream holds them (see `_later_lists`)."""
        wanted: dict[str, builtins.list[int]] = defaultdict(builtins.list)
        for row in chunk:
            wanted[row.stream].append(row.version)
            if _refers_to_child(row):  # restored in the same pass: no query for the reference
                wanted[row.stream].append(row.version + 1)
        ids = {row.stream: row.stream_id for row in chunk} if proven else {}
        with quiet_gc():  # thousands of small containers: the collector would rescan them all
            states = {(name, v): s for name, vs in wanted.items()
                      for v, s in states_at(self.store, name, vs, proven=ids.get(name),
                                            lists=lists.get(name) if lists else None).items()}
            decoded = self.store.codec.decode_many([text for row in chunk for text in (row.metadata or "{}",
                                                                                       row.writes or "[]")])
            return states, decoded, self._references(chunk, decoded[1::2], states, items)

    def _build(self, chunk: Sequence[LangGraphRow], states: Mapping[tuple[str, int], dict[str, Any]],
               decoded: builtins.list[Any], references: Mapping[int, Any], items: dict[int, tuple[Any, Any]] | None,
               newest: bool = False, keep: bool = False) -> builtins.list[CheckpointTuple]:
        """The chunk's tuples from what `_read` returned, its channel values decoded by the serde."""
        values = self._values
        tuples = []
        with quiet_gc():
            for row, record, writes in zip(chunk, decoded[::2], decoded[1::2], strict=True):
                stored = _stored_channels(states[(row.stream, row.version)])
                channels = {name: values.decode(value, encoding, items) for name, (value, encoding) in stored.items()}
                if newest:
                    self._remember(row, stored, writes, channels if keep else {})
                tuples.append(self._tuple(row, channels, record, writes, values, references))
        return tuples

    def _remember(self, row: LangGraphRow, stored: dict[str, tuple[Any, Any]], writes: Any,
                  returned: dict[str, Any]) -> None:
        """Cache a thread's newest checkpoint just read, and what the next put on it needs to know
        (`returned`: the values handed out, whose lists the next put's lists will start with)."""
        entry = entry_of(row.version, stored)
        if entry is not None:
            self._heads.put(row.stream_id, entry)
        key = (row.thread_id, row.checkpoint_ns)
        with self._memory.cond:
            known = self._memory.thread(key)
            if known is not None and known.checkpoint_id == row.checkpoint_id and known.stream_id == row.stream_id:
                self._memory.handed_out(key, row.checkpoint_id, row.stream_id, returned)
                return
            channels = {}
            for name, (value, encoding) in stored.items():
                if channel_key(name) is not None:
                    listed = type(value) is list and encoding in (None, TREE_ENCODING)
                    given = returned.get(name) if listed else None
                    channels[name] = Channel(encoding, len(value) if listed else None,
                                             list(given) if type(given) is list else None)
            overflow = frozenset(name for name in stored if channel_key(name) is None)
            self._memory.remember(key, Thread(row.checkpoint_id, row.stream, row.stream_id, row.version, channels,
                                              overflow, {} if not writes else None))

    def _references(self, rows: Sequence[LangGraphRow], writes: Sequence[Any],
                    states: Mapping[tuple[str, int], dict[str, Any]] | None = None,
                    items: dict[int, Any] | None = None) -> dict[int, Any]:
        """The values of the references among the rows' pending writes (see writes.py): from `states`
        (a listing's, by stream and version) when they hold the checkpoint referred to, else read."""
        wanted = [(row.thread_id, row.checkpoint_ns, entry[1], entry[2])
                  for row, tasks in zip(rows, writes, strict=True) for _, entries in tasks for entry in entries
                  if is_reference(entry[2])]
        if not wanted:
            return {}
        out: dict[int, Any] = {}
        if states:
            values = self._values
            where = {(r.thread_id, r.checkpoint_ns, r.child_id): (r.stream, r.version + 1) for r in rows
                     if _refers_to_child(r)}
            where.update({(r.thread_id, r.checkpoint_ns, r.checkpoint_id): (r.stream, r.version) for r in rows})
            rest = []
            for thread_id, ns, channel, ref in wanted:
                state = states.get(where.get((thread_id, ns, ref[1])))  # type: ignore[arg-type]
                found = referred(state, channel, ref) if state is not None else None
                if found is None or any(type(item) is PackedPrefix for item in found):  # not the items: read them
                    rest.append((thread_id, ns, channel, ref))
                else:
                    out[id(ref)] = values.decode(found[0], ref[6]) if ref[5] else values.decode(found, ref[6], items)
            wanted = rest
        if wanted:
            out.update(resolve(self.store, self._values, wanted))
        return out

    def _tuple(self, row: LangGraphRow, channels: dict[str, Any], record: dict[str, Any], writes: Any,
               values: Values, references: Mapping[int, Any]) -> CheckpointTuple:
        conf = {"thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns}
        fields, metadata = records.parse(record, row.created_at, values)
        pending = []
        for task_id, entries in writes:
            for _, channel, encoding, value in entries:
                pending.append((task_id, channel, references[id(encoding)] if is_reference(encoding)
                                else values.decode(value, encoding)))
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": row.checkpoint_id}},
            checkpoint=cast(Checkpoint, {**fields, "id": row.checkpoint_id, "channel_values": channels}),
            metadata=metadata,
            parent_config={"configurable": {**conf, "checkpoint_id": row.parent_id}} if row.parent_id else None,
            pending_writes=pending,
        )

    def get_delta_channel_history(self, *, config: RunnableConfig,
                                  channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """For each channel, the writes of the target checkpoint's ancestors since the nearest one that
        holds the channel (oldest first, each checkpoint's in writes_sort_key order), and that value as
        `seed` (see BaseCheckpointSaver). One query for the writes, one restore per seed."""
        _not_a_str(channels, "channels must be a sequence of channel names, not a str")
        return history.delta_history(self.store, self._values, _thread(config), _namespace(config),
                                     _checkpoint_id(config), channels)

    # -- writing ----------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint as the next version after its parent (the config's checkpoint_id). A
        checkpoint id the thread already holds moves to the new version (LangGraph's savers overwrite
        it; the version that had it stays in the history)."""
        thread_id, ns = _thread(config), _namespace(config)
        parent = config["configurable"].get("checkpoint_id") or None
        checkpoint_id = checkpoint["id"]
        if type(checkpoint_id) is not str or not checkpoint_id:
            raise InvalidArgumentError("checkpoint", checkpoint_id, "its id must be a non-empty str")
        meta = get_checkpoint_metadata(config, metadata)
        with self._memory.cond:  # the saver's memory of the thread changes with the file
            self._memory.wait_for_writes((thread_id, ns), parent, checkpoint.get("channel_values", {}), new_versions,
                                         meta.get("source"))
            with self.store.core.session():
                return self._put(thread_id, ns, parent, checkpoint, meta, new_versions)

    def _put(self, thread_id: str, ns: str, parent: str | None, checkpoint: Checkpoint, meta: dict[str, Any],
             new_versions: ChannelVersions) -> RunnableConfig:
        checkpoint_id = checkpoint["id"]
        values = self._values
        key = (thread_id, ns)
        thread = self._memory.thread(key)
        planner = Put(values, checkpoint, new_versions, thread, meta.get("source"))
        common = thread is not None and parent == thread.checkpoint_id
        move = redone = False
        for _ in range(_ATTEMPTS):
            if common:
                assert thread is not None
                stream, stream_id, expected, fork_of, named = thread.stream, thread.stream_id, thread.version, None, None
            else:
                stream, stream_id, expected, fork_of, named = self._target(thread_id, ns, parent)
            plan = planner.plan(common)  # encoding fails before anything is created
            record, created_at = records.build(checkpoint, meta, values, named)
            if stream is None:
                stream, stream_id = self._create_tree(thread_id, ns)
            elif fork_of is not None:
                stream = self.store.stream(fork_of).fork(at=expected).task_id
                stream_id = self._stream_id(stream)
            try:
                batched = bool(move or plan.references)
                with self.store.core.batch() if batched else contextlib.nullcontext():
                    if move:
                        self._move(thread_id, ns, stream, checkpoint_id)
                    cp = self.store.stream(stream).update(
                        plan.changes, keep=plan.keep, plain=plan.unchecked, metadata=record,
                        expected_version=expected, checkpoint_id=checkpoint_id, appends=plan.appends,
                        edits=plan.edits, created_at=created_at)
                    if common:
                        self._reference(key, thread, plan)
            except BaseException as exc:
                if fork_of is not None:  # the fork is still empty: do not leave it behind
                    self.store.delete_stream(stream)
                if isinstance(exc, (ConflictError, PathError)) and common:
                    common = False  # another writer moved the head: find where the parent is now
                    continue
                if isinstance(exc, ConflictError):
                    continue  # the parent's stream moved on: the parent is now a fork point
                if isinstance(exc, DuplicateCheckpointIdError) and not move:
                    move = True
                    continue
                if isinstance(exc, StoreUnavailableError) and exc.committed is False and not redone and batched:
                    # The connection dropped in the batch, which the server rolled back, and a commit inside
                    # a batch cannot redo itself: redo the batch once, on a new connection. (Outside a batch
                    # the commit already redid itself for the store's timeout.)
                    redone = True
                    continue
                if isinstance(exc, SerializationError) and plan.unchecked and not planner.strict:
                    planner.strict = True  # a channel stopped being plain JSON: check everything
                    continue
                raise
            self._after_put(key, thread if common else None, plan, checkpoint_id, stream, stream_id, cp.version)
            return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
        raise ConflictError(f"{thread_id}/{ns}", expected, expected + 1)

    def _after_put(self, key: tuple[str, str], thread: Thread | None, plan: Plan, checkpoint_id: str, stream: str,
                   stream_id: int, version: int) -> None:
        previous = self._heads.get(thread.stream_id, thread.version) if thread is not None else None
        entry = plan.entry(version, previous)
        if entry is None:
            self._heads.drop(stream_id)
        else:
            self._heads.put(stream_id, entry)
        self._memory.remember(key, Thread(checkpoint_id, stream, stream_id, version, plan.channels, plan.overflow))

    def _reference(self, key: tuple[str, str], thread: Thread | None, plan: Plan) -> None:
        """Replace the parent's writes the put appended by references to them (inside the put's batch;
        a row another writer changed since is left as it is)."""
        if thread is None or not plan.references or not thread.writes:
            return
        by_task: dict[str, builtins.list[tuple[int, Any]]] = defaultdict(builtins.list)
        for task_id, idx, ref in plan.references:
            by_task[task_id].append((idx, ref))
        with self.store.core.session() as journal:
            for task_id, refs in by_task.items():
                task = thread.writes[task_id]
                writes = dict(task.writes)
                for idx, ref in refs:
                    writes[idx] = Write(writes[idx].channel, ref, None)
                journal.langgraph_replace_writes(*key, thread.checkpoint_id, task_id, task.text,
                                                 row_text(self.store.codec, writes))

    def _move(self, thread_id: str, ns: str, stream: str, checkpoint_id: str) -> None:
        """Take `checkpoint_id` from the version holding it (references to it become values first)."""
        maintenance.expand_references(self, thread_id, ns, {checkpoint_id})
        with self.store.core.session() as journal:
            row = journal.stream(stream)
            assert row is not None
            journal.langgraph_move_id(row.tree_id, checkpoint_id)

    def _stream_id(self, name: str) -> int:
        with self.store.core.session() as journal:
            row = journal.stream(name)
        assert row is not None
        return row.id

    def _target(self, thread_id: str, ns: str,
                parent: str | None) -> tuple[str | None, int, int, str | None, str | None]:
        """Where a checkpoint goes, decided without writing anything: (stream to commit on, or None for a
        new tree; its id; its expected head; the stream to fork at that head first, or None; the parent
        to record because the thread does not hold it, or None)."""
        with self.store.core.session() as journal:
            tree = journal.langgraph_tree(thread_id, ns)
            hit = journal.langgraph_locate(tree[0].id, parent) if tree and parent else None
        if tree is None:
            return None, 0, 0, None, parent
        if hit is not None:
            owner, version, head = hit
            return owner.name, owner.id, version, (None if version == head else owner.name), None
        root, head = tree
        if head == 0:  # a tree whose first put did not commit
            return root.name, root.id, 0, None, parent
        return root.name, root.id, 0, root.name, parent

    def _create_tree(self, thread_id: str, ns: str) -> tuple[str, int]:
        with self.store.core.session() as journal, journal.write():
            found = journal.langgraph_tree(thread_id, ns)  # another process may have been first
            if found is not None:
                return found[0].name, found[0].id
            row = journal.create_stream(tree_name(journal, thread_id, ns), now())
            journal.langgraph_set_tree(thread_id, ns, row.id)
            return row.name, row.id

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's writes next to the checkpoint in the config (what LangGraph calls pending).
        A write already stored under the same (task, idx) is kept, unless every write is one of
        LangGraph's special channels (error, interrupt, resume, scheduled), which replace."""
        conf = config["configurable"]
        thread_id, ns, checkpoint_id = _thread(config), _namespace(config), conf.get("checkpoint_id")
        if type(checkpoint_id) is not str:
            raise InvalidArgumentError("config", config, "put_writes needs the checkpoint_id of a checkpoint")
        task_id, codec = str(task_id), self.store.codec
        new = encode_writes(self._values, writes)
        key = (thread_id, ns, checkpoint_id, task_id)
        with self.store.core.session() as journal, journal.write():
            text = row_text(codec, new)
            if journal.langgraph_set_writes(*key, task_path, text, replace=False):
                stored = new  # the common case: the task's first writes
            else:
                stored = parse_row(codec, journal.langgraph_writes(*key) or "[]")
                for idx, write in new.items():
                    if replaces(writes) or idx not in stored:
                        stored[idx] = write
                text = row_text(codec, stored)
                journal.langgraph_set_writes(*key, task_path, text, replace=True)
        self._memory.wrote((thread_id, ns), checkpoint_id, task_id, TaskWrites(task_path, text, stored))

    # -- deleting, copying, pruning (see maintenance.py) ----------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread, in all its namespaces, in one transaction."""
        self._forget()
        maintenance.delete_threads(self, [str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names one of `run_ids`. Later
        checkpoints of the same threads keep their states; their parent becomes the nearest one kept.
        Raises NotImplementedError, deleting nothing, when a thread uses a DeltaChannel and a kept
        checkpoint descends from a deleted one: its value is rebuilt from its ancestors' writes, and
        LangGraph's own savers silently lose part of it then. Deleting a thread's newest runs is allowed."""
        _not_a_str(run_ids, "run_ids must be a sequence of run IDs, not a str")
        self._forget()
        maintenance.delete_checkpoints(self, [str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread (all namespaces, forks included) to a new thread."""
        self._forget()
        maintenance.copy_thread(self, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """"keep_latest": keep only the newest checkpoint (and its writes) of each namespace; "delete":
        delete the threads. "keep_latest" raises NotImplementedError, pruning nothing, when a thread uses
        a DeltaChannel (its newest value needs older checkpoints' writes), as PostgresSaver does."""
        _not_a_str(thread_ids, "thread_ids must be a sequence of thread IDs, not a str")
        self._forget()
        maintenance.prune(self, [str(t) for t in thread_ids], strategy)

    # -- async: the same work on a worker thread (the store serializes callers) --------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        tuples = await asyncio.to_thread(self.list, config, filter=filter, before=before, limit=limit)
        while True:
            chunk = await asyncio.to_thread(_take, tuples, _CHUNK)
            for item in chunk:
                yield item
            if len(chunk) < _CHUNK:
                return

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(self.get_delta_channel_history, config=config, channels=channels)

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _stored_channels(state: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{channel: (stored value, encoding)} of a checkpoint's state."""
    out = {}
    for key, stored in state.items():
        if key != OVERFLOW and not key.startswith(SERDE):
            out[key] = (stored, state.get(SERDE + key))
    for name, (encoding, stored) in state.get(OVERFLOW, {}).items():
        out[name] = (stored, encoding)
    return out


def _oldest_lists(chunk: Sequence[LangGraphRow], states: Mapping[tuple[str, int], dict[str, Any]],
                  streams: Container[str]) -> dict[str, dict[str, LaterList]]:
    """For those of `streams` in a chunk of a listing, the top-level lists of the oldest state it built (the
    stored values: a prefix of one is exact for an older version whose list only grew since), copied: the
    tuples hand the lists themselves out."""
    oldest: dict[str, int] = {}
    for row in chunk:
        if row.stream in streams:
            oldest[row.stream] = min(row.version, oldest.get(row.stream, row.version))
    out = {}
    for stream, version in oldest.items():
        lists = {}
        for key, value in states[(stream, version)].items():
            if type(value) is list and value and type(value[0]) is not PackedPrefix:
                lists[key] = LaterList(version, len(value), functools.partial(_head, value.copy()))
        out[stream] = lists
    return out


def _head(items: builtins.list[Any], count: int) -> builtins.list[Any]:
    return items[:count]


def _refers_to_child(row: LangGraphRow) -> bool:
    """Whether the row's writes may hold a reference to its child (named by `child=True` listings)."""
    return row.child_id is not None and row.writes is not None and row.child_id in row.writes


def _not_a_str(ids: Any, message: str) -> None:
    """A str is a sequence of one-letter ids: taken as one, "ab" would act on "a" and "b" (PostgresSaver's
    TypeError, with its message)."""
    if isinstance(ids, str):
        raise TypeError(message)


def _thread(config: RunnableConfig) -> str:
    thread_id = config.get("configurable", {}).get("thread_id")
    if thread_id is None:
        raise InvalidArgumentError("config", config, "configurable.thread_id is required")
    return str(thread_id)


def _checkpoint_id(config: RunnableConfig) -> str | None:
    """The checkpoint the config names; None for the newest, also when its checkpoint_id is "" (an empty form
    field), as LangGraph's own savers take it."""
    return get_checkpoint_id(config) or None


def _namespace(config: RunnableConfig) -> str:
    ns = config["configurable"].get("checkpoint_ns") or ""
    if type(ns) is not str:
        raise InvalidArgumentError("config", config, "configurable.checkpoint_ns must be a str")
    return ns


def _take(it: Iterator[Any], n: int) -> list[Any]:
    out = []
    for item in it:
        out.append(item)
        if len(out) == n:
            break
    return out
