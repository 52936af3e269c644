"""Deleting, copying and pruning LangGraph threads.

Deleting a whole thread or namespace, and copying one, are single transactions (a copy duplicates the
rows as they are: events, snapshots and checksums stay valid). Removing some checkpoints while keeping
later ones (prune "keep_latest", delete_for_runs) cannot delete versions in place: later versions are
events on top of them. The kept checkpoints are instead committed again, with their ids, metadata and
states, into a new stream tree (each kept checkpoint's parent becomes its nearest kept ancestor), and
one transaction then swaps the thread's namespace to the new tree and deletes the old one. If another
writer added a checkpoint to the namespace meanwhile, the swap is refused (ConflictError) and the new
tree is dropped. A process killed during the rebuild leaves the old tree in place and the unfinished
new one unreferenced (its streams are named `...+N`; the saver never reads them). Pending writes that
refer to a removed checkpoint (writes.py) get their values back first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..checkpoint import now
from ..errors import ConflictError, InvalidArgumentError
from ..journal import Journal, LangGraphRow, StreamRow
from . import records
from .layout import free_name, tree_name
from .replay import states_at
from .values import Values
from .writes import Write, is_reference, parse_row, resolve, row_text

if TYPE_CHECKING:
    from .saver import EventCkptSaver

_WINDOW = 256  # kept checkpoints of one stream whose states are built at once


def delete_threads(saver: EventCkptSaver, thread_ids: Iterable[str]) -> None:
    store = saver.store
    with store.core.session() as journal:
        with journal.write():
            for thread_id in thread_ids:
                for ns, root in _locked_trees(journal, thread_id):
                    journal.langgraph_forget(thread_id, ns)
                    _drop_tree(journal, root)
        journal.reclaim()


def copy_thread(saver: EventCkptSaver, source: str, target: str) -> None:
    with saver.store.core.session() as journal, journal.write():
        trees = _locked_trees(journal, source)
        if trees and journal.langgraph_trees(target):
            raise InvalidArgumentError("target_thread_id", target, "already has checkpoints")
        for ns, root in trees:
            base = tree_name(journal, target, ns)
            copies: dict[int, StreamRow] = {}
            for row in journal.tree_streams(root):  # parents before their forks
                suffix = row.name[len(root.name):] if row.name.startswith(root.name) else f"~{len(copies)}"
                copy = journal.create_stream(
                    free_name(journal, base + suffix), row.created_at,
                    copies[row.parent_id] if row.parent_id is not None else None, row.fork_version,
                )
                copies[row.id] = copy
                journal.copy_stream_rows(row, copy)
            if not journal.langgraph_set_tree(target, ns, copies[root.id].id):  # a copy to it committed first
                raise InvalidArgumentError("target_thread_id", target, "already has checkpoints")
            journal.langgraph_copy_writes(source, target, ns)


def _locked_trees(journal: Journal, thread_id: str) -> list[tuple[str, StreamRow]]:
    """The thread's trees, each locked as retention locks one (PostgreSQL: its writers and rewrites wait
    until the transaction ends; SQLite's write lock does so already). Without the lock, the copy's
    statements each see their own moment: a checkpoint committed between them was copied in part (its
    id without its version, a foreign-key error). Read again once locked: a prune may have swapped a
    namespace to a new tree meanwhile."""
    locked: set[int] = set()
    while True:
        trees = journal.langgraph_trees(thread_id)
        todo = sorted({root.tree_id for _, root in trees} - locked)  # one order, so two copies queue
        if not todo:
            return trees
        for tree_id in todo:
            journal.lock_tree(tree_id)
        locked.update(todo)


def prune(saver: EventCkptSaver, thread_ids: list[str], strategy: str) -> None:
    if strategy == "delete":
        delete_threads(saver, thread_ids)
        return
    if strategy != "keep_latest":
        raise InvalidArgumentError("strategy", strategy, 'must be "keep_latest" or "delete"')
    # A DeltaChannel's value at the newest checkpoint is rebuilt from its ancestors' writes: keeping only
    # the newest would empty it. Refused as PostgresSaver refuses it: if any thread uses one, nothing
    # is pruned (and _keep_only checks again, for a thread that started using one meanwhile).
    with saver.store.core.session() as journal:
        found = [t for t in thread_ids if _uses_delta(saver, journal.langgraph_checkpoints(thread_id=t))]
    if found:
        raise _delta_refused("keep_latest can't prune", found)
    for thread_id in thread_ids:
        with saver.store.core.session() as journal:
            namespaces = [ns for ns, _ in journal.langgraph_trees(thread_id)]
        for ns in namespaces:
            _keep_only(saver, thread_id, ns, lambda rows: {rows[0].checkpoint_id},  # newest first
                       refuse_delta="keep_latest can't prune")


# The metadata keys LangGraph gives a checkpoint whose DeltaChannel needs older checkpoints' writes (what
# PostgresSaver's prune looks for).
_DELTA_KEYS = ("counters_since_delta_snapshot", "delta_writes_versioned")


def _uses_delta(saver: EventCkptSaver, rows: list[LangGraphRow]) -> bool:
    for row in rows:
        if row.metadata and any(k in row.metadata for k in _DELTA_KEYS):  # the text first: most rows have neither
            metadata = saver.store.codec.decode(row.metadata).get("metadata") or {}
            if any(k in metadata for k in _DELTA_KEYS):
                return True
    return False


def _cuts_a_lineage(rows: list[LangGraphRow], kept: set[str]) -> bool:
    """Whether a kept checkpoint has an ancestor that goes (whose writes a DeltaChannel replays)."""
    parents = {r.checkpoint_id: r.parent_id for r in rows}
    for cid in kept:
        parent = parents.get(cid)
        while parent is not None and parent in parents:
            if parent not in kept:
                return True
            parent = parents[parent]
    return False


def _delta_refused(what: str, thread_ids: list[str]) -> NotImplementedError:
    names = ", ".join(sorted(set(thread_ids)))
    return NotImplementedError(f"{what} threads that use a DeltaChannel: {names}")


_RUNS_REFUSED = "delete_for_runs can't delete checkpoints that later ones build on, in"


def delete_checkpoints(saver: EventCkptSaver, run_ids: list[str]) -> None:
    if not run_ids:
        return
    with saver.store.core.session() as journal:
        hits = journal.langgraph_runs(run_ids)
    doomed: dict[tuple[str, str], set[str]] = {}
    for thread_id, ns, checkpoint_id in hits:
        doomed.setdefault((thread_id, ns), set()).add(checkpoint_id)
    # A DeltaChannel's value at a kept checkpoint is rebuilt from its ancestors' writes: deleting an
    # ancestor would silently shorten it (LangGraph's own savers do so). Refused, deleting nothing, unless
    # no kept checkpoint descends from a deleted one (the runs deleted are the newest of their lineage).
    broken = []
    with saver.store.core.session() as journal:
        for (thread_id, ns), ids in doomed.items():
            rows = journal.langgraph_checkpoints(thread_id=thread_id, checkpoint_ns=ns)
            if _uses_delta(saver, rows) and _cuts_a_lineage(rows, {r.checkpoint_id for r in rows} - ids):
                broken.append(thread_id)
    if broken:
        raise _delta_refused(_RUNS_REFUSED, broken)
    for (thread_id, ns), ids in doomed.items():
        _keep_only(saver, thread_id, ns, lambda rows, ids=ids: {r.checkpoint_id for r in rows} - ids,
                   refuse_delta=_RUNS_REFUSED)


def _keep_only(saver: EventCkptSaver, thread_id: str, ns: str, choose: Any, refuse_delta: str) -> None:
    """Keep only the checkpoints `choose(rows)` names in a namespace (rows: newest first); a namespace that
    uses a DeltaChannel is refused (`refuse_delta` says what was refused) if a kept checkpoint would lose
    an ancestor (checked again here: another writer may have added checkpoints since the caller looked)."""
    store = saver.store
    with store.core.session() as journal:
        tree = journal.langgraph_tree(thread_id, ns)
        rows = journal.langgraph_checkpoints(thread_id=thread_id, checkpoint_ns=ns) if tree else []
    if tree is None:
        return
    kept = choose(rows) if rows else set()
    if _uses_delta(saver, rows) and _cuts_a_lineage(rows, kept):
        raise _delta_refused(refuse_delta, [thread_id])
    if len(kept) == len(rows):
        return
    root = tree[0]
    seen = (len(rows), rows[0].checkpoint_id if rows else None)
    doomed = [r.checkpoint_id for r in rows if r.checkpoint_id not in kept]
    expand_references(saver, thread_id, ns, set(doomed))
    new_root = _rebuild(saver, thread_id, ns, rows, kept) if kept else None
    try:
        with store.core.session() as journal:
            with journal.write():
                # Locked before the check (PostgreSQL): a put in flight is waited for and seen, and later
                # ones wait for the swap. Checked before the lock, a put committing in between was lost
                # with the old tree, though the saver had returned its config.
                journal.lock_tree(root.tree_id)
                if journal.tree_fingerprint(root.id) != seen:
                    raise ConflictError(f"{thread_id}/{ns}", seen[0], journal.tree_fingerprint(root.id)[0])
                if new_root is None:
                    journal.langgraph_forget(thread_id, ns)
                else:
                    journal.langgraph_set_tree(thread_id, ns, new_root.id, replaces=root.id)
                    journal.langgraph_forget(thread_id, ns, doomed)
                _drop_tree(journal, root)
            journal.reclaim()
    except BaseException:
        if new_root is not None:
            with store.core.session() as journal, journal.write():
                _drop_tree(journal, new_root)
        raise


def _rebuild(saver: EventCkptSaver, thread_id: str, ns: str, rows: list[LangGraphRow], kept: set[str]) -> StreamRow:
    """Commit the kept checkpoints again into a new, unreferenced stream tree; returns its root."""
    store = saver.store
    by_id = {r.checkpoint_id: r for r in rows}

    def kept_parent(row: LangGraphRow) -> str | None:
        parent = row.parent_id
        while parent is not None and parent not in kept:
            parent = by_id[parent].parent_id if parent in by_id else None
        return parent

    depth: dict[str, int] = {}
    for row in rows:  # lineage depth, so that every checkpoint comes after its ancestors
        chain: list[str] = []
        cursor: str | None = row.checkpoint_id
        while cursor is not None and cursor in by_id and cursor not in depth:
            chain.append(cursor)
            cursor = by_id[cursor].parent_id
        base = depth.get(cursor, -1) if cursor is not None else -1
        for cid in reversed(chain):
            base += 1
            depth[cid] = base
    order = sorted((by_id[c] for c in kept), key=lambda r: (depth[r.checkpoint_id], r.checkpoint_id))
    pending: dict[str, list[int]] = {}
    for row in order:
        pending.setdefault(row.stream, []).append(row.version)

    with store.core.session() as journal, journal.write():
        root = journal.create_stream(tree_name(journal, thread_id, ns), now())
    try:
        where: dict[str, tuple[str, int]] = {}  # kept checkpoint id -> (new stream, version)
        heads: dict[str, int] = {root.name: 0}
        window: dict[tuple[str, int], dict[str, Any]] = {}
        for row in order:
            key = (row.stream, row.version)
            if key not in window:  # the next versions of this stream, in one pass
                versions = pending[row.stream]
                upto = versions[versions.index(row.version):][:_WINDOW]
                window = {k: v for k, v in window.items() if k[0] != row.stream}
                window.update({(row.stream, v): s for v, s in states_at(store, row.stream, upto).items()})
            parent = kept_parent(row)
            if parent is None:
                stream = root.name if heads[root.name] == 0 else store.stream(root.name).fork(at=0).task_id
                expected = 0
            else:
                stream, expected = where[parent]
                if heads.get(stream) != expected:
                    stream = store.stream(stream).fork(at=expected).task_id
            metadata = records.explicit(store.codec.decode(row.metadata), row.created_at) if row.metadata else None
            cp = store.stream(stream).save(window.pop(key), metadata=metadata, expected_version=expected,
                                           checkpoint_id=row.checkpoint_id)
            where[row.checkpoint_id] = (stream, cp.version)
            heads[stream] = cp.version
    except BaseException:
        with store.core.session() as journal, journal.write():
            _drop_tree(journal, root)
        raise
    return root


def _drop_tree(journal: Journal, root: StreamRow) -> None:
    """Delete a stream tree: every fork before the stream it forked from (locked first, PostgreSQL: a fork
    created after the streams were read would be left behind, its parent deleted from under it)."""
    journal.lock_tree(root.tree_id)
    for row in reversed(journal.tree_streams(root)):
        journal.delete_stream(row)


def expand_references(saver: EventCkptSaver, thread_id: str, ns: str, children: set[str]) -> None:
    """Give the pending writes of a namespace that refer to one of `children` their values back (in the
    caller's transaction, or one of their own)."""
    store = saver.store
    codec = store.codec
    with store.core.session() as journal:
        rows = journal.langgraph_referencing_writes(thread_id, ns)
    todo = []
    for checkpoint_id, task_id, text in rows:
        writes = parse_row(codec, text)
        refs = [idx for idx, w in writes.items() if is_reference(w.encoding) and w.encoding[1] in children]
        if refs:
            todo.append((checkpoint_id, task_id, text, writes, refs))
    if not todo:
        return
    wanted = [(thread_id, ns, writes[idx].channel, writes[idx].encoding) for *_, writes, refs in todo for idx in refs]
    values = resolve(store, Values(saver.serde, codec), wanted, decode=False)
    with store.core.session() as journal, journal.write():
        for checkpoint_id, task_id, text, writes, refs in todo:
            for idx in refs:
                stored, encoding = values[id(writes[idx].encoding)]
                writes[idx] = Write(writes[idx].channel, encoding, stored)
            journal.langgraph_replace_writes(thread_id, ns, checkpoint_id, task_id, text, row_text(codec, writes))
