"""The journal contract: what every storage engine promises, documented once.

eventckpt's engine-neutral code (the core, diff, history, retention, verify, transfer, the LangGraph
mapping) talks to storage only through `Journal`, and gets journals only from a `Backend`. Two engines
implement it: SQLite (eventckpt/journal/sqlite, one file, the embedded default) and PostgreSQL
(eventckpt/journal/postgres, shared by many hosts). Both run the same contract test suite
(tests/test_journal_contract.py) and the whole behavioural suite.

Promises that hold for every method:

- **Data, never SQL.** Caller strings (stream names, paths, metadata keys and values, checkpoint ids)
  travel only as bound parameters.
- **One tree per statement.** Every method that reads or writes a stream's rows is given the tree it
  belongs to (`StreamRef.tree_id`, `Segment.tree_id`), so an engine can key and distribute every per-tree
  table by tree. Exceptions, by nature: `stream` / `stream_and_head` (a lookup by name), `stream_names`,
  `streams_all`, `search_rows`, `totals`, `integrity_problems`, `query` and the LangGraph thread lookups.
- **Translated errors.** Driver errors leave a journal only as eventckpt errors (`StorageError` and its
  subclasses), translated at one boundary per engine. The signals `VersionTaken`, `CheckpointIdTaken`
  and `HistoryRewritten` (journal/rows.py) are how a write says "nothing was written, because ...";
  they never reach users.
- **Reads are consistent.** Inside `read()` every query sees one committed state of the store; outside
  it, each call does. Reading never writes.
- **Versions are immutable** once committed, except by retention, which rewrites a tree's history only
  inside a write transaction that calls `lock_tree(tree)` first and `bump_generation(tree)` last.
- **Costs.** A method's cost is O(its result) plus index seeks, never a scan of a stream's events, unless
  its docstring says otherwise (tests/test_query_plans.py checks the SQLite plans).

Paths are stored as SQLite JSON path text (`$.messages`, `$.scratch.k1`, `$.messages[3]`) on every
engine, compared bytewise (PostgreSQL columns use COLLATE "C"), so `paths.child_ranges` holds exactly the
paths below a path. Values, metadata, usage, snapshot states and manifests are JSON text, stored exactly
as given (checksums are over those bytes).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from .rows import (Commit, EventRow, HistoryRow, LangGraphRow, LogRow, MetaFilter, Segment, StreamRef, StreamRow,
                   SummaryRow, VersionRow)


class Journal(ABC):
    """One session with the store (a connection). Not thread-safe by itself: a Backend hands each
    thread its own session (or serializes them, for an engine with one connection)."""

    kind: str = ""  # "sqlite" | "postgresql"

    # -- transactions -----------------------------------------------------------------------------

    @abstractmethod
    def write(self) -> AbstractContextManager[None]:
        """One write transaction: committed on a clean exit, rolled back on an exception. Inside
        `batch()` it is a savepoint of the batch. Writes of other sessions to the same rows either wait
        (SQLite: BEGIN IMMEDIATE and the busy timeout) or fail on the primary key (PostgreSQL)."""

    @abstractmethod
    def read(self) -> AbstractContextManager[None]:
        """A consistent read snapshot across several calls (joins an open transaction)."""

    @abstractmethod
    def batch(self) -> AbstractContextManager[None]:
        """One write transaction around many writes (an import): each `write()` or `append()` inside is a
        savepoint; all of them are committed at the end or none are (an exception, a killed process)."""

    @property
    @abstractmethod
    def in_transaction(self) -> bool:
        """Whether a transaction (read, write or batch) is open on this session."""

    def change_mark(self) -> Hashable | None:
        """Outside a transaction: a value that is equal to an earlier one of this session only if nothing
        in the store changed in between (a commit of this or any other session, in any process), so a
        result read right after it may be reused while the mark stays equal. None when the engine cannot
        tell (then nothing may be reused). Costs far less than a query; a mark that moves without a
        change only costs a read."""
        return None

    # -- streams ----------------------------------------------------------------------------------

    @abstractmethod
    def stream(self, name: str) -> StreamRow | None:
        """The stream named `name`, or None."""

    @abstractmethod
    def stream_and_head(self, name: str) -> tuple[StreamRow, int] | None:
        """The stream and its head version: its newest own version, else its fork version, else 0."""

    @abstractmethod
    def stream_names(self) -> list[str]:
        """Every stream's name, oldest first."""

    @abstractmethod
    def children(self, stream: StreamRef) -> list[StreamRow]:
        """The streams forked directly from `stream`."""

    @abstractmethod
    def lineage(self, stream: StreamRef) -> list[StreamRow]:
        """The stream and its ancestors, root first."""

    @abstractmethod
    def create_stream(self, name: str, created_at: str, parent: StreamRow | None = None,
                      fork_version: int | None = None) -> StreamRow:
        """Create a stream (a fork of `parent` at `fork_version`, in the parent's tree; else the root of a
        new tree). StreamExistsError when the name is taken."""

    @abstractmethod
    def delete_stream(self, stream: StreamRef) -> None:
        """Delete a stream and its versions, events, snapshots, checkpoint ids and tool calls (the caller
        deletes its forks first), in a write transaction, taking `lock_tree` first like retention."""

    @abstractmethod
    def reclaim(self, pages: int | None = None) -> None:
        """Give freed space back (SQLite: incremental vacuum; an engine that reclaims by itself does
        nothing)."""

    # -- versions ---------------------------------------------------------------------------------

    @abstractmethod
    def append(self, commit: Commit) -> None:
        """Write one version atomically: its row, events, checkpoint id, tool calls and snapshot, all or
        nothing. Outside a transaction it is its own transaction (as few round trips as the engine
        allows); inside one it joins it. Raises, having written nothing: VersionTaken when the version
        exists or the stream is gone, CheckpointIdTaken when the id is used in the tree,
        HistoryRewritten when the stream's generation is no longer `commit.generation`."""

    @abstractmethod
    def version_row(self, owner: StreamRef, version: int) -> VersionRow | None:
        """The row of `version` stored by stream `owner`, or None."""

    @abstractmethod
    def version_rows(self, segments: Sequence[Segment]) -> list[VersionRow]:
        """The version rows within the segments, oldest first."""

    @abstractmethod
    def version_numbers(self, segments: Sequence[Segment]) -> list[int]:
        """The version numbers within the segments, oldest first (retention leaves holes)."""

    @abstractmethod
    def count_versions(self, segments: Sequence[Segment]) -> int:
        """How many versions the segments hold."""

    # -- snapshots --------------------------------------------------------------------------------

    @abstractmethod
    def insert_snapshot(self, owner: StreamRef, version: int, state: str, manifest: str) -> None:
        """Write (or replace) the snapshot of `owner` at `version` (retention's re-snapshots)."""

    @abstractmethod
    def latest_snapshot(self, segments: Sequence[Segment]) -> tuple[int, str, str] | None:
        """(version, state, manifest) of the newest snapshot within the segments."""

    @abstractmethod
    def snapshot_value(self, owner: StreamRef, version: int, key: str) -> str | None:
        """The JSON text of top-level `key` written in full by the snapshot of `owner` at `version`."""

    # -- events -----------------------------------------------------------------------------------

    @abstractmethod
    def tail(self, segments: Sequence[Segment], after: int) -> list[EventRow]:
        """Every event within the segments with version > after, in (version, seq) order."""

    @abstractmethod
    def key_values(self, segments: Sequence[Segment], path: str, start: tuple[int, int],
                   upto: int) -> list[tuple[str, str]]:
        """(op, value) of the events at exactly `path` from event `start` (version, seq) through version
        `upto`, in order (the bulk part of rebuilding a shared key)."""

    @abstractmethod
    def key_events(self, segments: Sequence[Segment], path: str, children: Iterable[tuple[str, str]],
                   after: int) -> list[EventRow]:
        """Every event at `path` or within the half-open path ranges `children`, with version > after,
        in (version, seq) order."""

    @abstractmethod
    def events_of(self, owner: StreamRef, version: int) -> list[tuple[str, str, str | None]]:
        """(op, path, value) of one version's events, in seq order."""

    @abstractmethod
    def event_paths(self, owner: StreamRef, version: int, before: int) -> list[tuple[str, str]]:
        """(op, path) of one version's events with seq < before, in seq order (their values unread)."""

    @abstractmethod
    def event_at(self, owner: StreamRef, version: int, seq: int) -> tuple[str, str, str | None]:
        """(op, path, value) of one event."""

    # -- checkpoint ids and tool calls --------------------------------------------------------------

    @abstractmethod
    def find_checkpoint_id(self, tree_id: int, checkpoint_id: str) -> tuple[int, int] | None:
        """(stream id, version) of the version saved with `checkpoint_id` in the tree, or None."""

    @abstractmethod
    def checkpoint_id_of(self, owner: StreamRef, version: int) -> str | None:
        """The checkpoint id of one version, or None."""

    @abstractmethod
    def tool_calls(self, segments: Sequence[Segment], after: int = 0) -> list[tuple[Any, ...]]:
        """(version, call_id, name, arguments, result, error, undoes) of the calls in versions > after,
        oldest first."""

    @abstractmethod
    def undone_call_ids(self, tree_id: int, call_ids: Sequence[str]) -> set[str]:
        """The ids among `call_ids` that a successful undo record anywhere in the tree names."""

    @abstractmethod
    def tool_rows_of(self, owner: StreamRef, version: int) -> list[tuple[Any, ...]]:
        """(call_id, name, arguments, result, error, undoes) of one version's calls, in order."""

    # -- retention: rewriting committed history -----------------------------------------------------

    @abstractmethod
    def generation(self, stream: StreamRef) -> int:
        """The stream's history generation: it changes whenever retention rewrites its tree's committed
        history (an engine may keep one number for a whole tree, or for all trees)."""

    @abstractmethod
    def hold_tree(self, tree_id: int) -> None:
        """Inside a write transaction, before reading the head a commit builds on: keep retention from
        rewriting the tree's history until the transaction ends, while other commits go on (SQLite:
        nothing to do, BEGIN IMMEDIATE holds the file's write lock; PostgreSQL: the tree's stream rows
        FOR KEY SHARE, in lock_tree's order, which lock_tree's FOR UPDATE waits for)."""

    @abstractmethod
    def lock_tree(self, tree_id: int) -> None:
        """Inside a write transaction, before reading what a rewrite of the tree's history will be
        planned from: wait for the tree's commits in flight, and hold the tree's writers off until the
        transaction ends (SQLite: nothing to do, BEGIN IMMEDIATE holds the file's write lock;
        PostgreSQL: the tree's stream rows FOR UPDATE, which every commit's FOR KEY SHARE waits for)."""

    @abstractmethod
    def bump_generation(self, tree_id: int) -> int:
        """In the write transaction that rewrote the tree's history (after `lock_tree`): move the tree's
        generation on, so commits built on heads from before are refused. Returns the new generation."""

    @abstractmethod
    def rewritten_since(self, stream: StreamRef, generation: int) -> bool:
        """Whether retention rewrote the stream's history since a state was built under `generation`:
        `generation(stream) != generation`, answered without a query when the engine can tell that
        nothing changed since this session last read the generation."""

    @abstractmethod
    def snapshots_in(self, owner: StreamRef, lo: int, hi: int) -> list[tuple[int, str, str]]:
        """(version, state, manifest) of one stream's snapshots with lo <= version <= hi, in order."""

    @abstractmethod
    def remove_versions(self, owner: StreamRef, versions: Sequence[int]) -> None:
        """Delete versions of one stream with their events, snapshots, checkpoint ids and tool calls."""

    @abstractmethod
    def rewrite_version(self, owner: StreamRef, version: int, events: Sequence[tuple[str, str, str | None]],
                        tools: Sequence[Sequence[Any]], event_bytes: int) -> None:
        """Replace one version's events and tool calls (in order) and its event counters."""

    @abstractmethod
    def removed_head(self, stream: StreamRef) -> int:
        """The highest version number the stream had when its head was removed (0: never): the next
        version is numbered above it, so a number never names two states."""

    @abstractmethod
    def set_removed_head(self, stream: StreamRef, version: int) -> None:
        """Record that `version`, the stream's head, was removed (the highest such number is kept)."""

    @abstractmethod
    def set_checksum(self, owner: StreamRef, version: int, checksum: bytes) -> None:
        """Replace one version's checksum (retention rechains the versions it keeps)."""

    # -- log, search, history, diff -----------------------------------------------------------------

    @abstractmethod
    def log_rows(self, segments: Sequence[Segment], *, before: int | None, limit: int | None, name: str | None,
                 auto: bool | None, meta: Sequence[MetaFilter]) -> list[LogRow]:
        """The versions of a lineage that pass the filters, newest first, at most `limit`. O(result) for
        no filter, a name, or a str/int metadata value (indexed)."""

    @abstractmethod
    def search_rows(self, *, name: str | None, meta: Sequence[MetaFilter], limit: int | None) -> list[LogRow]:
        """Versions of every stream that pass the filters, newest first (by created_at)."""

    @abstractmethod
    def history_rows(self, segments: Sequence[Segment], path: str, ancestors: Sequence[tuple[str, str, bool]],
                     since: int, until: int, limit: int | None) -> list[HistoryRow]:
        """Events at `path`, below it, and those at its ancestors that may replace or remove it, newest
        first. `ancestors` are (ancestor path, `path` relative to it, True when the ancestor is a list);
        a list ancestor's appends are never read, and of its sets only those of a list (its sets to
        something else lie among its appends: the caller finds them with last_ops_between and
        nth_between). An ancestor's `set` row carries the part of its value at the relative path (NULL
        when absent)."""

    @abstractmethod
    def list_resets(self, segments: Sequence[Segment], path: str, upto: int) -> list[tuple[Any, ...]]:
        """Events through version `upto` that change the length of the list at `path` other than by
        appending, oldest first: at `path` itself (a list set, delete, truncate or extend) and deletes below
        it. Rows are (stream_id, version, seq, op, path, n): n is the length of a set's or extend's list,
        or the length a truncate keeps (None for a delete)."""

    @abstractmethod
    def replacements(self, segments: Sequence[Segment], path: str, rel: str, upto: int) -> list[tuple[Any, ...]]:
        """Sets and deletes at exactly `path` through version `upto`, oldest first, as (stream_id, version,
        seq, op, path, n, tagged): n the length of the list at JSON path `rel` inside a set's value (None
        when there is none), tagged whether the value holds tagged forms."""

    @abstractmethod
    def counts_between(self, segments: Sequence[Segment], path: str,
                       spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[int]:
        """For each span (after, before) of event positions (version, seq), how many events lie at exactly
        `path` strictly between them (counted in the path index, never read)."""

    @abstractmethod
    def last_ops_between(self, segments: Sequence[Segment], path: str,
                         spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[str | None]:
        """For each span (after, before) of event positions (version, seq), the op of the last event at
        exactly `path` strictly between them (None when there is none): one index search per span."""

    @abstractmethod
    def nth_between(self, segments: Sequence[Segment], path: str, after: tuple[int, int], before: tuple[int, int],
                    n: int) -> tuple[Any, ...] | None:
        """The n-th (from 0) event at exactly `path` strictly between events `after` and `before`, as
        (stream_id, version, seq, op, value), or None when there are not that many."""

    @abstractmethod
    def touched(self, seg: Segment, after: int, upto: int) -> dict[str, tuple[int, int]]:
        """Every path with an event in versions (after, upto] of one segment -> (version, seq) of its
        last event there."""

    @abstractmethod
    def newest_event(self, segments: Sequence[Segment], path: str, upto: int, *, reset: bool = False) -> EventRow | None:
        """The last event at exactly `path` with version <= upto; with `reset`, the last one that
        reshapes a list other than by appending (a set of a list, a delete or a truncate)."""

    @abstractmethod
    def growth(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> int:
        """How many items appends and extends at exactly `path` added after event `after` through version
        `upto` (counted without reading appended values)."""

    @abstractmethod
    def only_grown(self, segments: Sequence[Segment], path: str, after: int, upto: int) -> int | None:
        """How many items appends and extends at exactly `path` added in versions (after, upto], or None
        when a set of a list, a delete or a truncate lies there, or any event below `path`. For a caller
        that knows the value at `upto` is a list: there are then no other events at `path` in that range
        (a set to anything else would have stopped the appends), and what engines count for such events
        otherwise is unspecified. Counts what this read sees: the caller checks that it sees `upto`."""

    @abstractmethod
    def item_deletes(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> list[str]:
        """Paths of deletes below the list at `path` after event `after` through version `upto`."""

    @abstractmethod
    def json_at(self, segments: Sequence[Segment], version: int, seq: int, rel: str, *,
                text: bool = False) -> tuple[str | None, int | None, str | None, bool]:
        """Of the part at JSON path `rel` ('$' for all) of one event's value: (JSON type as SQLite names
        it: null, true, false, integer, real, text, array, object; array length; its JSON text when
        `text`; whether the value holds tagged forms ('{"$' occurs in it))."""

    @abstractmethod
    def touched_below(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> bool:
        """Whether any event below `path` lies after event `after` through version `upto`."""

    # -- listings and partial reads (the viewer) ------------------------------------------------------

    @abstractmethod
    def stream_page(self, before_id: int | None, limit: int) -> list[SummaryRow]:
        """At most `limit` streams with stream id < before_id (all when None), newest first, each with its
        parent's and tree root's names and its own newest version row: O(limit)."""

    @abstractmethod
    def stream_tree(self, tree_id: int, limit: int | None) -> list[SummaryRow]:
        """The streams of one tree (the root and every fork below it, at most `limit`), oldest first, as
        stream_page gives them."""

    @abstractmethod
    def version_sizes(self, segments: Sequence[Segment], since: int, until: int,
                      limit: int | None) -> list[tuple[int, int, int]]:
        """(version, event count, event bytes) of the lineage's versions in since..until, oldest first, at
        most `limit`, from the version rows alone."""

    @abstractmethod
    def appended(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int, offset: int,
                 limit: int) -> list[str] | None:
        """The JSON values of the events at exactly `path` after event `after` through version `upto`, in
        order: from the `offset`-th (0-based; negative counts from the end, -1 the last), at most `limit`
        (-1: all); None when an extend lies in that range (then an event is not one item). For a window of
        a list only appended to since `after`: the caller checks that."""

    # -- verify, stats, the read-only sql command ----------------------------------------------------

    @abstractmethod
    def streams_all(self) -> list[StreamRow]:
        """Every stream, oldest first."""

    @abstractmethod
    def extent(self, stream: StreamRef) -> tuple[int, int]:
        """The lowest and highest version of the stream in its versions, events or snapshots ((0, 0):
        none). Reads the stream's rows (for verify)."""

    @abstractmethod
    def snapshot_versions(self, stream: StreamRef) -> list[int]:
        """The versions of one stream's snapshots, in order."""

    @abstractmethod
    def snapshot_row(self, owner: StreamRef, version: int) -> tuple[str, str]:
        """(state, manifest) of one snapshot."""

    @abstractmethod
    def integrity_problems(self) -> list[str]:
        """What the engine's own consistency checks find (empty when sound)."""

    @abstractmethod
    def totals(self) -> dict[str, int]:
        """Counts and bytes of the whole store: streams, forks, versions, events, event_bytes, snapshots,
        snapshot_bytes, database_bytes, free_bytes. O(store): for stats, not hot paths."""

    @abstractmethod
    def query(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run a caller's read-only SQL (the `sql` command); (column names, rows). Writes are refused."""

    @abstractmethod
    def schema_version(self) -> int:
        """The schema version the store holds."""

    # -- the LangGraph saver's tables ---------------------------------------------------------------

    @abstractmethod
    def langgraph_tree(self, thread_id: str, checkpoint_ns: str) -> tuple[StreamRow, int] | None:
        """The root stream of a thread's namespace and the root's head version."""

    @abstractmethod
    def langgraph_trees(self, thread_id: str) -> list[tuple[str, StreamRow]]:
        """(namespace, root stream) of every namespace of a thread."""

    @abstractmethod
    def langgraph_thread_of(self, tree_id: int) -> tuple[str, str] | None:
        """(thread id, namespace) whose checkpoints the tree holds, or None."""

    @abstractmethod
    def langgraph_set_tree(self, thread_id: str, checkpoint_ns: str, tree_id: int, replaces: int | None = None) -> bool:
        """Point a thread's namespace at a tree: a new row when `replaces` is None, else only if it still
        points at `replaces`. False when that did not hold."""

    @abstractmethod
    def langgraph_forget(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str] | None = None) -> None:
        """Delete a namespace's writes for `checkpoint_ids`, or (None) all its writes and its tree row."""

    @abstractmethod
    def langgraph_locate(self, tree_id: int, checkpoint_id: str) -> tuple[StreamRow, int, int] | None:
        """(stream holding it, its version, that stream's head version) of a checkpoint id in a tree."""

    @abstractmethod
    def langgraph_checkpoints(self, *, thread_id: str | None = None, checkpoint_ns: str | None = None,
                              checkpoint_id: str | None = None, before: str | None = None,
                              metadata: Sequence[tuple[str, str]] = (), limit: int | None = None,
                              child: bool = False) -> list[LangGraphRow]:
        """Checkpoints newest first (by checkpoint id) with their metadata, parent checkpoint id and writes,
        in one query. `metadata` holds (JSON path, JSON value) pairs that must all match. With `child`, each
        row also names the checkpoint at the next version of its stream (where its writes' references
        usually point)."""

    @abstractmethod
    def langgraph_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str) -> str | None:
        """The JSON array of one task's writes on a checkpoint."""

    @abstractmethod
    def langgraph_set_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                             task_path: str, writes: str, *, replace: bool) -> bool:
        """Store one task's writes; without `replace`, only if the task has none yet (False then)."""

    @abstractmethod
    def langgraph_replace_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                                 old: str, new: str) -> bool:
        """Replace one task's writes JSON, only if it is still `old` (False when it is not)."""

    @abstractmethod
    def langgraph_referencing_writes(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str, str]]:
        """(checkpoint id, task id, writes JSON) of a namespace's writes that hold a reference to another
        checkpoint's append (eventckpt/langgraph/writes.py); reads every row of the namespace."""

    @abstractmethod
    def langgraph_child_events(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str],
                               paths: Sequence[str]) -> list[tuple[str, str, int, str | None, str | None, str | None]]:
        """(checkpoint id, stream name, version, op, path, value) of the events at `paths` of each of the
        namespace's `checkpoint_ids`, in event order; a checkpoint without such events comes back once with
        op, path and value None."""

    @abstractmethod
    def langgraph_move_id(self, tree_id: int, checkpoint_id: str) -> bool:
        """Take a checkpoint id away from the version holding it, recording it as the id that version had
        (later checkpoints still name it as their parent). False when the tree does not hold the id."""

    @abstractmethod
    def langgraph_lineage_writes(self, thread_id: str, checkpoint_ns: str,
                                 segments: Sequence[Segment]) -> list[tuple[int, str, str, str, str]]:
        """(version, checkpoint id, task id, task path, writes JSON) of the checkpoints within the segments,
        by version and then task path and task id."""

    @abstractmethod
    def langgraph_copy_writes(self, source: str, target: str, checkpoint_ns: str) -> None:
        """Copy a namespace's writes from thread `source` to thread `target`."""

    @abstractmethod
    def langgraph_namespaces(self) -> list[tuple[str, str, str]]:
        """(thread_id, checkpoint_ns, root stream name) of every namespace of every thread (for copy)."""

    @abstractmethod
    def langgraph_all_writes(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str, str, str]]:
        """(checkpoint_id, task_id, task_path, writes JSON) of every pending write of a namespace (for copy)."""

    @abstractmethod
    def langgraph_moved_ids(self, tree_id: int) -> list[tuple[str, int, str]]:
        """(stream name, version, checkpoint id) of every checkpoint id that moved away from a version of
        the tree (for copy)."""

    @abstractmethod
    def langgraph_set_moved(self, stream: StreamRef, version: int, checkpoint_id: str) -> None:
        """Record that `checkpoint_id` moved away from `version` of `stream` (for copy)."""

    @abstractmethod
    def langgraph_runs(self, run_ids: Sequence[str]) -> list[tuple[str, str, str]]:
        """(thread, namespace, checkpoint id) of every checkpoint whose metadata names one of the runs."""

    @abstractmethod
    def tree_streams(self, root: StreamRef) -> list[StreamRow]:
        """The root and every stream forked from it (directly or not), parents first."""

    @abstractmethod
    def tree_fingerprint(self, tree_id: int) -> tuple[int, str | None]:
        """(number of checkpoint ids, the greatest) of a tree: changes whenever a checkpoint is added."""

    @abstractmethod
    def copy_stream_rows(self, source: StreamRef, target: StreamRef) -> None:
        """Copy a stream's versions, events, snapshots and checkpoint ids into an empty stream of the same
        shape (checksums chain over content, not ids, so they stay valid)."""


class Backend(ABC):
    """Where journals come from: one engine's connections to one store.

    `session()` gives the calling thread a journal for the duration of a `with` block. A thread that is
    already inside a session gets the same journal again (nested calls share one connection, and a
    batch's writes all go through it). An SQLite backend has one connection and serializes threads; a
    PostgreSQL backend gives each thread its own pooled connection, so threads never wait on each other
    in-process."""

    kind: str = ""
    target: str = ""  # what to show users: the file path, or the URL without its password
    timeout: float = 0.0  # seconds a call waits for an unreachable server before StoreUnavailableError

    def __init__(self) -> None:
        self._local = threading.local()

    def session(self, check: Callable[[], None] | None = None) -> AbstractContextManager[Journal]:
        """This thread's journal for a `with` block; `check()` runs once the journal is held (to refuse a
        store closed while the thread waited for it)."""
        return Session(self, self._local, check)

    @abstractmethod
    def acquire(self) -> AbstractContextManager[Journal]:
        """A journal for this thread alone until the block ends (waiting for one when none is free)."""

    @abstractmethod
    def close(self) -> None:
        """Close every connection (idempotent)."""

    def own_snapshot(self) -> AbstractContextManager[Journal] | None:
        """A journal on a connection of its own, inside one read transaction until the block ends, for a
        long read (an export) that must see one moment without holding this store's sessions: a save on
        the reading thread would join a transaction held on them, and other threads would wait. None when
        the engine has no such connection to give (an SQLite ":memory:" store; PostgreSQL, whose pool is
        for the store's calls): the reader then reads in short transactions of its own."""
        return None


class Session:
    """What Backend.session() returns. A class rather than a generator: every call of the API enters one,
    and a generator-based context manager costs several times as much."""

    __slots__ = ("_backend", "_local", "_check", "_held")

    def __init__(self, backend: Backend, local: threading.local, check: Callable[[], None] | None) -> None:
        self._backend, self._local, self._check = backend, local, check
        self._held: AbstractContextManager[Journal] | None = None

    def __enter__(self) -> Journal:
        journal: Journal | None = getattr(self._local, "journal", None)
        if journal is None:  # the thread's outermost session: take a journal
            held = self._held = self._backend.acquire()
            journal = held.__enter__()
            self._local.journal = journal
        if self._check is not None:
            try:
                self._check()
            except BaseException as exc:
                self.__exit__(type(exc), exc, exc.__traceback__)
                raise
        return journal

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        held, self._held = self._held, None
        if held is not None:
            self._local.journal = None
            held.__exit__(kind, exc, tb)
