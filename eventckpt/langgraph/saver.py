"""EventCkptSaver: a LangGraph checkpointer that stores checkpoints as eventckpt events.

A (thread_id, checkpoint_ns) is one stream tree (layout.py). A checkpoint is one version: the next
version of its parent's stream when the parent is that stream's head, else the first version of a fork
at the parent, which shares the history before it instead of copying it (time travel, `update_state`
on an old checkpoint); a checkpoint without a parent starts a fork at 0 of the same tree. The LangGraph
checkpoint id is the version's checkpoint id. A put stores only the channels LangGraph says changed
(`new_versions`), so a list that grew costs one append and an unchanged channel nothing. LangGraph's
metadata is the version's metadata; pending writes live in the `langgraph_writes` table.
"""

from __future__ import annotations

import asyncio
import builtins
import os
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..checkpoint import now
from ..codec import quiet_gc
from ..errors import ConflictError, InvalidArgumentError, SerializationError
from ..journal import LangGraphRow, is_postgres
from ..paths import addressable, to_text
from ..snapshot import SnapshotPolicy
from ..store import Store
from ..store import open as open_store
from . import maintenance
from .layout import OVERFLOW, SERDE, channel_key, tree_name
from .replay import states_at
from .values import Values

_CHUNK = 256  # checkpoints whose states one listing builds at once (memory stays bounded)
_ATTEMPTS = 5
_REMEMBERED = 10_000  # namespaces whose last put a saver remembers
# A LangGraph step changes a few small channels besides the appended message (shared by snapshots), so
# the default 64 kB tail would mean ~80 steps to replay on a restore; 16 kB keeps it near 20 steps for
# about 2% more file.
SNAPSHOTS = SnapshotPolicy(min_tail_bytes=16 * 1024)


class EventCkptSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer on an eventckpt store: every step is stored as the events that changed.

        saver = EventCkptSaver("agent.db")          # or a postgresql:// URL, or EventCkptSaver(store)
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
        elif isinstance(store, (str, os.PathLike)) or is_postgres(store):
            self.store = open_store(store, durability=durability, timeout=timeout, snapshots=snapshots or SNAPSHOTS)
            self._owns_store = True
        else:
            raise InvalidArgumentError("store", store, "must be an eventckpt Store, a file path, a postgresql:// URL,"
                                                       " or a psycopg connection or pool")
        # (thread, ns) -> this saver's last put there: where it went and which channels were plain JSON.
        # A put whose parent is that checkpoint goes to the same stream without a lookup; the store's
        # expected_version check catches any other writer in between.
        self._last: dict[tuple[str, str], _Last] = {}

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

    # -- reading ----------------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by the config's checkpoint_id, or the thread namespace's newest one."""
        thread_id, ns = _thread(config), _namespace(config)
        with self.store.core.session() as journal:
            rows = journal.langgraph_checkpoints(
                thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=get_checkpoint_id(config), limit=1
            )
        return next(self._tuples(rows), None)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,  # noqa: A002 - LangGraph's name
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of one thread (and namespace, when the config names one), or of all
        threads when `config` is None; only those whose metadata has every `filter` item, older than
        `before`, at most `limit`. One query finds them with their writes; states are then built a chunk
        at a time, one restore and one event range per stream (never one restore per checkpoint)."""
        conf = (config or {}).get("configurable", {})
        if limit is not None and (type(limit) is not int or limit < 0):
            raise InvalidArgumentError("limit", limit, "must be None or a non-negative int")
        with self.store.core.session() as journal:
            rows = journal.langgraph_checkpoints(
                thread_id=str(conf["thread_id"]) if conf.get("thread_id") is not None else None,
                checkpoint_ns=conf.get("checkpoint_ns"),
                checkpoint_id=conf.get("checkpoint_id"),
                before=get_checkpoint_id(before) if before else None,
                metadata=self._filters(filter),
                limit=limit,
            )
        return self._tuples(rows)

    def _filters(self, filter: dict[str, Any] | None) -> builtins.list[tuple[str, str]]:  # noqa: A002
        out = []
        for key, value in (filter or {}).items():
            if type(key) is not str or not addressable(key):
                raise InvalidArgumentError("filter", filter, f"metadata key {key!r} cannot be queried")
            out.append((to_text(("metadata", key)), self.store.codec.encode_text(value)))
        return out

    def _tuples(self, rows: Sequence[LangGraphRow]) -> Iterator[CheckpointTuple]:
        values = self._values
        items: dict[int, tuple[Any, Any]] = {}  # decoded serde list items, shared by the whole listing
        for start in range(0, len(rows), _CHUNK):
            chunk = rows[start : start + _CHUNK]
            wanted: dict[str, builtins.list[int]] = defaultdict(builtins.list)
            for row in chunk:
                wanted[row.stream].append(row.version)
            with quiet_gc():  # thousands of small containers: the collector would rescan them all
                states = {(name, v): s for name, vs in wanted.items()
                          for v, s in states_at(self.store, name, vs).items()}
                records = self.store.codec.decode_many([text for row in chunk for text in (row.metadata or "{}",
                                                                                           row.writes or "[]")])
                tuples = [
                    self._tuple(row, states[(row.stream, row.version)], record, writes, values, items)
                    for row, record, writes in zip(chunk, records[::2], records[1::2], strict=True)
                ]
            yield from tuples

    def _tuple(self, row: LangGraphRow, state: dict[str, Any], record: dict[str, Any], writes: Any,
               values: Values, items: dict[int, Any]) -> CheckpointTuple:
        conf = {"thread_id": row.thread_id, "checkpoint_ns": row.checkpoint_ns}
        fields = values.decode(record.get("checkpoint", {}), record.get("serde"))
        channels = {}
        for key, stored in state.items():
            if key != OVERFLOW and not key.startswith(SERDE):
                channels[key] = values.decode(stored, state.get(SERDE + key), items)
        for name, (encoding, stored) in state.get(OVERFLOW, {}).items():
            channels[name] = values.decode(stored, encoding, items)
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": row.checkpoint_id}},
            checkpoint=cast(Checkpoint, {**fields, "id": row.checkpoint_id, "channel_values": channels}),
            metadata=record.get("metadata", {}),
            parent_config={"configurable": {**conf, "checkpoint_id": row.parent_id}} if row.parent_id else None,
            pending_writes=[(task_id, channel, values.decode(value, encoding))
                            for task_id, entries in writes for _, channel, encoding, value in entries],
        )

    # -- writing ----------------------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint as the next version after its parent (the config's checkpoint_id)."""
        thread_id, ns = _thread(config), _namespace(config)
        parent = config["configurable"].get("checkpoint_id")
        checkpoint_id = checkpoint["id"]
        if type(checkpoint_id) is not str or not checkpoint_id:
            raise InvalidArgumentError("checkpoint", checkpoint_id, "its id must be a non-empty str")
        fields = {k: v for k, v in checkpoint.items() if k not in ("id", "channel_values")}
        stored, encoding = self._values.encode(fields, "checkpoint")
        meta = {"metadata": get_checkpoint_metadata(config, metadata), "checkpoint": stored}
        if encoding:
            meta["serde"] = encoding
        last = self._last.get((thread_id, ns))
        encode = _Encoder(self._values, checkpoint, new_versions, last.plain if last else set())
        for _ in range(_ATTEMPTS):
            stream: str | None
            if last is not None and parent == last.checkpoint_id:  # the common case: the run goes on
                stream, expected, fresh, fork_of = last.stream, last.version, False, None
            else:
                stream, expected, fresh, fork_of = self._target(thread_id, ns, parent)
            last = None
            changes, keep = encode.changes(full=fresh)  # encoding fails before anything is created
            if stream is None:
                stream = self._create_tree(thread_id, ns)
            elif fork_of is not None:
                stream = self.store.stream(fork_of).fork(at=expected).task_id
            try:
                cp = self.store.stream(stream).update(changes, keep=keep, plain=encode.unchecked, metadata=meta,
                                                      expected_version=expected, checkpoint_id=checkpoint_id)
            except BaseException as exc:
                if fork_of is not None:  # the fork is still empty: do not leave it behind
                    self.store.delete_stream(stream)
                if isinstance(exc, ConflictError):
                    continue  # another writer moved that stream's head: the parent is now a fork point
                if isinstance(exc, SerializationError) and encode.unchecked and not encode.strict:
                    encode.strict = True  # a channel stopped being plain JSON: check everything
                    continue
                raise
            if len(self._last) > _REMEMBERED:
                self._last.clear()
            self._last[(thread_id, ns)] = _Last(checkpoint_id, stream, cp.version, set(encode.plain))
            return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
        raise ConflictError(f"{thread_id}/{ns}", expected, expected + 1)

    def _target(self, thread_id: str, ns: str, parent: str | None) -> tuple[str | None, int, bool, str | None]:
        """Where a checkpoint goes, decided without writing anything: (stream to commit on, or None for a
        new tree; its expected head; whether it starts a new lineage; the stream to fork at that head
        first, or None)."""
        with self.store.core.session() as journal:
            tree = journal.langgraph_tree(thread_id, ns)
            hit = journal.langgraph_locate(tree[0].id, parent) if tree and parent else None
        if tree is None:
            return None, 0, True, None
        if hit is not None:
            owner, version, head = hit
            return owner.name, version, False, (None if version == head else owner.name)
        root, head = tree
        if head == 0:  # a tree whose first put did not commit
            return root.name, 0, True, None
        return root.name, 0, True, root.name

    def _create_tree(self, thread_id: str, ns: str) -> str:
        with self.store.core.session() as journal, journal.write():
            found = journal.langgraph_tree(thread_id, ns)  # another process may have been first
            if found is not None:
                return found[0].name
            row = journal.create_stream(tree_name(journal, thread_id, ns), now())
            journal.langgraph_set_tree(thread_id, ns, row.id)
            return row.name

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
        task_id, values, codec = str(task_id), self._values, self.store.codec
        new = {}
        for idx, (channel, value) in enumerate(writes):
            stored, encoding = values.encode(value, channel)
            new[WRITES_IDX_MAP.get(channel, idx)] = (channel, encoding, stored)
        replace = all(channel in WRITES_IDX_MAP for channel, _ in writes)
        key = (thread_id, ns, checkpoint_id, task_id)
        with self.store.core.session() as journal, journal.write():
            if journal.langgraph_set_writes(*key, task_path, self._writes_json(new), replace=False):
                return  # the common case: the task's first writes
            merged = {entry[0]: tuple(entry[1:]) for entry in codec.decode(journal.langgraph_writes(*key) or "[]")}
            for idx, entry in new.items():
                if replace or idx not in merged:
                    merged[idx] = entry
            journal.langgraph_set_writes(*key, task_path, self._writes_json(merged), replace=True)

    def _writes_json(self, writes: dict[int, tuple[str, Any, Any]]) -> str:
        """[[idx, channel, encoding, value], ...] by idx, as JSON; plain values are written as they are."""
        codec = self.store.codec
        parts = []
        for idx in sorted(writes):
            channel, encoding, stored = writes[idx]
            value = orjson.dumps(stored) if encoding is None else codec.encode(stored)
            parts.append(b"[%d,%b,%b,%b]" % (idx, orjson.dumps(channel), orjson.dumps(encoding), value))
        return (b"[" + b",".join(parts) + b"]").decode()

    # -- deleting, copying, pruning (see maintenance.py) ----------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint and write of a thread, in all its namespaces, in one transaction."""
        self._last.clear()
        maintenance.delete_threads(self, [str(thread_id)])

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints (and their writes) whose metadata names one of `run_ids`. Later
        checkpoints of the same threads keep their states; their parent becomes the nearest one kept."""
        self._last.clear()
        maintenance.delete_checkpoints(self, [str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and write of a thread (all namespaces, forks included) to a new thread."""
        self._last.clear()
        maintenance.copy_thread(self, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """"keep_latest": keep only the newest checkpoint (and its writes) of each namespace; "delete":
        delete the threads."""
        self._last.clear()
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


@dataclass(slots=True)
class _Last:
    checkpoint_id: str
    stream: str
    version: int
    plain: set[str]


class _Encoder:
    """The state changes of one put: the changed channels, each encoded once even when the put is
    retried (as a fork, or strictly).

    A channel that was plain JSON at the previous put of its namespace (`hint`) is passed as it is and
    only its changes are checked for plainness by the store (`unchecked`); checking a whole
    conversation every step would cost more than storing it. When a change is not plain the put is
    redone `strict`ly: every value checked, and anything not plain through the serde.
    """

    def __init__(self, values: Values, checkpoint: Checkpoint, new_versions: ChannelVersions, hint: set[str]) -> None:
        self.values = values
        self.channel_values = checkpoint.get("channel_values", {})
        self.versions = checkpoint.get("channel_versions", {})
        self.new_versions = new_versions
        self.hint = hint
        self.strict = False
        self.unchecked: set[str] = set()
        self.plain: set[str] = set()  # entries stored as plain JSON by this put
        self._encoded: dict[str, tuple[Any, Any]] = {}

    def _encode(self, name: str, value: Any) -> tuple[Any, Any]:
        if name in self.hint and not self.strict:
            self.unchecked.add(name)
            self.plain.add(name)
            return value, None
        hit = self._encoded.get(name)
        if hit is None:
            hit = self._encoded[name] = self.values.encode(value, name)
        if hit[1] is None:
            self.plain.add(name)
        return hit

    def changes(self, *, full: bool) -> tuple[dict[str, Any], set[str]]:
        """(top-level keys to set, keys to keep as they are); every other key of the head is deleted.
        A new lineage stores every channel; otherwise only those in `new_versions`."""
        self.unchecked.clear()
        self.plain.clear()
        changes: dict[str, Any] = {}
        keep: set[str] = set()
        touched = set(self.channel_values) if full else set(self.new_versions)
        overflow = False
        for channel in touched:
            key = channel_key(channel)
            if key is None:
                overflow = True
            elif channel in self.channel_values:
                self._put(changes, key, channel, self.channel_values[channel])
        for channel in self.versions:
            key = channel_key(channel)
            if key is None:
                overflow = overflow or channel in touched
                keep.add(OVERFLOW)
            elif channel not in touched:
                keep.update((key, SERDE + key))
        if overflow:  # rare: rewrite the whole overflow dict from the checkpoint
            changes[OVERFLOW] = {}
            for channel in self.channel_values:
                if channel_key(channel) is None and (channel in self.versions or full):
                    stored, encoding = self.values.encode(self.channel_values[channel], channel)
                    changes[OVERFLOW][channel] = [encoding, stored]
        return changes, keep

    def _put(self, changes: dict[str, Any], key: str, name: str, value: Any) -> None:
        changes[key], encoding = self._encode(name, value)
        if encoding:
            changes[SERDE + key] = encoding


def _thread(config: RunnableConfig) -> str:
    thread_id = config.get("configurable", {}).get("thread_id")
    if thread_id is None:
        raise InvalidArgumentError("config", config, "configurable.thread_id is required")
    return str(thread_id)


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
