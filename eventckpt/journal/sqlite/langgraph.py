"""The LangGraph saver's tables (eventckpt.langgraph; schema/004_langgraph.sql, 007_langgraph_moved.sql)."""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from itertools import islice
from operator import attrgetter
from typing import Any

import apsw
import orjson

from ..rows import LangGraphRow, StreamRef, StreamRow
from .columns import S_COLS, STREAM_COLS, VERSION_COLS
from .engine import Engine


# The parent is the one the put named when the record says so (a parent the thread does not hold), else
# the previous version of the lineage: in the same stream, or (for a fork's first own version) the fork
# point, which the saver always takes in the stream that owns it; that version's checkpoint id, or the id
# it held before the id moved to a newer put (langgraph_moved). Writes come back in writes_sort_key order
# (task_path, task_id, idx).
_LG_CHECKPOINTS = """
SELECT t.thread_id, t.checkpoint_ns, c.checkpoint_id, s.name, c.version, v.metadata,
  coalesce(json_extract(v.metadata, '$.parent'),
    (SELECT coalesce(
        (SELECT p.checkpoint_id FROM checkpoint_ids AS p WHERE p.stream_id = a.id AND p.version = a.version),
        (SELECT m.checkpoint_id FROM langgraph_moved AS m WHERE m.stream_id = a.id AND m.version = a.version))
       FROM (SELECT CASE WHEN c.version - 1 > coalesce(s.fork_version, 0) THEN s.id ELSE s.parent_id END AS id,
                    c.version - 1 AS version) AS a)),
  (SELECT '[' || group_concat('[' || json_quote(w.task_id) || ',' || w.writes || ']', ','
                               ORDER BY w.task_path, w.task_id) || ']'
     FROM langgraph_writes AS w
    WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = t.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id),
  s.id, v.created_at, {child}
FROM langgraph_threads AS t
JOIN checkpoint_ids AS c ON c.tree_id = t.tree_id
JOIN streams AS s ON s.id = c.stream_id
JOIN versions AS v ON v.stream_id = c.stream_id AND v.version = c.version
WHERE {where}
ORDER BY c.checkpoint_id DESC
LIMIT ?
"""
_MERGED_NAMESPACES = 8  # a thread-wide listing runs one query per namespace up to this many (see below)
_LG_CHILD = "(SELECT n.checkpoint_id FROM checkpoint_ids AS n WHERE n.stream_id = c.stream_id AND n.version = c.version + 1)"


class LangGraphTables(Engine):
    """Threads, namespaces, pending writes and checkpoint listings of the LangGraph saver."""

    def langgraph_tree(self, thread_id: str, checkpoint_ns: str) -> tuple[StreamRow, int] | None:
        """The root stream of a thread's namespace and the root's head version."""
        row = self._one(
            f"SELECT {S_COLS}, coalesce((SELECT max(version) FROM versions WHERE stream_id = s.id), 0)"
            " FROM langgraph_threads AS t JOIN streams AS s ON s.id = t.tree_id"
            " WHERE t.thread_id = ? AND t.checkpoint_ns = ?",
            (thread_id, checkpoint_ns),
        )
        return (StreamRow(*row[:6]), row[6]) if row else None

    def langgraph_trees(self, thread_id: str) -> list[tuple[str, StreamRow]]:
        """(namespace, root stream) of every namespace of a thread."""
        rows = self._rows(
            f"SELECT t.checkpoint_ns, {S_COLS} FROM langgraph_threads AS t JOIN streams AS s ON s.id = t.tree_id"
            " WHERE t.thread_id = ? ORDER BY t.checkpoint_ns",
            (thread_id,),
        )
        return [(r[0], StreamRow(*r[1:])) for r in rows]

    def langgraph_thread_of(self, tree_id: int) -> tuple[str, str] | None:
        row = self._one("SELECT thread_id, checkpoint_ns FROM langgraph_threads WHERE tree_id = ?", (tree_id,))
        return (row[0], row[1]) if row else None

    def langgraph_set_tree(self, thread_id: str, checkpoint_ns: str, tree_id: int, replaces: int | None = None) -> bool:
        """Point a thread's namespace at a stream tree: a new row when `replaces` is None, else only if it
        still points at `replaces`. False when that did not hold (someone else changed it)."""
        if replaces is None:
            try:
                self.conn.execute(
                    "INSERT INTO langgraph_threads (thread_id, checkpoint_ns, tree_id) VALUES (?, ?, ?)",
                    (thread_id, checkpoint_ns, tree_id),
                )
            except apsw.ConstraintError:
                return False
            except apsw.Error as exc:
                self._fail(exc, "INSERT INTO langgraph_threads")
            return True
        self._run(
            "UPDATE langgraph_threads SET tree_id = ? WHERE thread_id = ? AND checkpoint_ns = ? AND tree_id = ?",
            (tree_id, thread_id, checkpoint_ns, replaces),
        )
        return self.conn.changes() == 1

    def langgraph_forget(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str] | None = None) -> None:
        """Delete a namespace's writes for `checkpoint_ids`, or (None) its writes and its tree row."""
        if checkpoint_ids is None:
            args: tuple[Any, ...] = (thread_id, checkpoint_ns)
            self._run("DELETE FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ?", args)
            self._run("DELETE FROM langgraph_threads WHERE thread_id = ? AND checkpoint_ns = ?", args)
            return
        self._run(
            "DELETE FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ?"
            " AND checkpoint_id IN (SELECT value FROM json_each(?))",
            (thread_id, checkpoint_ns, orjson.dumps(list(checkpoint_ids)).decode()),
        )

    def langgraph_locate(self, tree_id: int, checkpoint_id: str) -> tuple[StreamRow, int, int] | None:
        """(stream holding it, its version, that stream's head version) of a checkpoint id in a tree."""
        row = self._one(
            f"SELECT {S_COLS}, c.version, (SELECT max(version) FROM versions WHERE stream_id = s.id)"
            " FROM checkpoint_ids AS c JOIN streams AS s ON s.id = c.stream_id"
            " WHERE c.tree_id = ? AND c.checkpoint_id = ?",
            (tree_id, checkpoint_id),
        )
        return (StreamRow(*row[:6]), row[6], row[7]) if row else None

    def langgraph_checkpoints(
        self,
        *,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        before: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        limit: int | None = None,
        child: bool = False,
    ) -> list[LangGraphRow]:
        """Checkpoints newest first (by checkpoint id), each with its metadata, its parent's checkpoint id
        and its writes, in one query. `metadata` holds (JSON path, JSON value) pairs that must all match.
        With `child`, each row also names the checkpoint at the next version of its stream.

        A thread's checkpoints of every namespace are each namespace's, merged, when it has a few: one query
        over them all sorts every checkpoint of the thread (and builds each one's row) before taking
        `limit`, while one namespace walks its key newest first and stops there. (A thread with many
        subgraph namespaces keeps the one query: a query per namespace would cost more.)"""
        if thread_id is not None and checkpoint_ns is None:
            with self.read():
                namespaces = [row[0] for row in self._rows(
                    "SELECT checkpoint_ns FROM langgraph_threads WHERE thread_id = ? LIMIT ?",
                    (thread_id, _MERGED_NAMESPACES + 1))]
                if len(namespaces) <= _MERGED_NAMESPACES:
                    parts = [self.langgraph_checkpoints(thread_id=thread_id, checkpoint_ns=ns,
                                                        checkpoint_id=checkpoint_id, before=before, metadata=metadata,
                                                        limit=limit, child=child) for ns in namespaces]
                    if len(parts) == 1:
                        return parts[0]
                    return list(islice(heapq.merge(*parts, key=attrgetter("checkpoint_id"), reverse=True), limit))
        where, args = [], []
        for column, value, test in (
            ("t.thread_id", thread_id, "="), ("t.checkpoint_ns", checkpoint_ns, "="),
            ("c.checkpoint_id", checkpoint_id, "="), ("c.checkpoint_id", before, "<"),
        ):
            if value is not None:
                where.append(f"{column} {test} ?")
                args.append(value)
        for path, value in metadata:
            where.append("json_extract(v.metadata, ?) IS json_extract(?, '$')")
            args += [path, value]
        args.append(-1 if limit is None else limit)
        rows = self._rows(
            _LG_CHECKPOINTS.format(where=" AND ".join(where) or "1", child=_LG_CHILD if child else "NULL"),
            args,
        )
        return [LangGraphRow(*r) for r in rows]

    def langgraph_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str) -> str | None:
        """The JSON array of one task's writes on a checkpoint."""
        row = self._one(
            "SELECT writes FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
            " AND task_id = ?",
            (thread_id, checkpoint_ns, checkpoint_id, task_id),
        )
        return row[0] if row else None

    def langgraph_set_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                             task_path: str, writes: str, *, replace: bool) -> bool:
        """Store one task's writes; without `replace`, only if the task has none yet (False then)."""
        self._run(
            ("INSERT OR REPLACE" if replace else "INSERT OR IGNORE") + " INTO langgraph_writes (thread_id,"
            " checkpoint_ns, checkpoint_id, task_id, task_path, writes) VALUES (?, ?, ?, ?, ?, ?)",
            (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes),
        )
        return self.conn.changes() == 1

    def langgraph_replace_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                                 old: str, new: str) -> bool:
        """Replace one task's writes JSON, only if it is still `old` (False when it is not)."""
        self._run(
            "UPDATE langgraph_writes SET writes = ? WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
            " AND task_id = ? AND writes = ?",
            (new, thread_id, checkpoint_ns, checkpoint_id, task_id, old),
        )
        return self.conn.changes() == 1

    def langgraph_referencing_writes(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str, str]]:
        """(checkpoint id, task id, writes JSON) of a namespace's rows holding a reference to another
        checkpoint (see eventckpt/langgraph/writes.py); reads every row of the namespace."""
        return self._rows(
            "SELECT checkpoint_id, task_id, writes FROM langgraph_writes WHERE thread_id = ? AND checkpoint_ns = ?"
            " AND instr(writes, '[\"@\",') > 0",
            (thread_id, checkpoint_ns),
        )

    def langgraph_child_events(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str],
                               paths: Sequence[str]) -> list[tuple[str, str, int, str | None, str | None, str | None]]:
        """(checkpoint id, stream name, version, op, path, value) of the events at `paths` of each of the
        namespace's `checkpoint_ids`, in event order; a checkpoint without such events comes back once
        with op, path and value NULL. One query, one index range per checkpoint."""
        return self._rows(
            "SELECT c.checkpoint_id, s.name, c.version, e.op, e.path, e.value"
            " FROM langgraph_threads AS t"
            " JOIN checkpoint_ids AS c ON c.tree_id = t.tree_id"
            " JOIN streams AS s ON s.id = c.stream_id"
            " LEFT JOIN events AS e ON e.stream_id = c.stream_id AND e.version = c.version"
            "  AND e.path IN (SELECT value FROM json_each(?))"
            " WHERE t.thread_id = ? AND t.checkpoint_ns = ? AND c.checkpoint_id IN (SELECT value FROM json_each(?))"
            " ORDER BY c.checkpoint_id, e.seq",
            (orjson.dumps(list(paths)).decode(), thread_id, checkpoint_ns, orjson.dumps(list(checkpoint_ids)).decode()),
        )

    def langgraph_move_id(self, tree_id: int, checkpoint_id: str) -> bool:
        """Take a checkpoint id away from the version holding it, recording it in langgraph_moved as the
        id that version had (its later checkpoints still name it as their parent). False when the tree
        does not hold the id."""
        row = self._one("SELECT stream_id, version FROM checkpoint_ids WHERE tree_id = ? AND checkpoint_id = ?",
                        (tree_id, checkpoint_id))
        if row is None:
            return False
        self._run("INSERT OR REPLACE INTO langgraph_moved (stream_id, version, checkpoint_id) VALUES (?, ?, ?)",
                  (row[0], row[1], checkpoint_id))
        self._run("DELETE FROM checkpoint_ids WHERE tree_id = ? AND checkpoint_id = ?", (tree_id, checkpoint_id))
        return True

    def langgraph_lineage_writes(self, thread_id: str, checkpoint_ns: str,
                                 segments: Sequence[Any]) -> list[tuple[int, str, str, str, str]]:
        """(version, checkpoint id, task id, task path, writes JSON) of the checkpoints of a lineage's
        `segments` (stream id, lo, hi), by version and then in writes_sort_key order (task path, task id)."""
        out: list[tuple[int, str, str, str, str]] = []
        for seg in segments:
            out.extend(self._rows(
                "SELECT c.version, c.checkpoint_id, w.task_id, w.task_path, w.writes FROM checkpoint_ids AS c"
                " JOIN langgraph_writes AS w ON w.thread_id = ? AND w.checkpoint_ns = ? AND w.checkpoint_id = c.checkpoint_id"
                " WHERE c.stream_id = ? AND c.version BETWEEN ? AND ? ORDER BY c.version, w.task_path, w.task_id",
                (thread_id, checkpoint_ns, seg.stream_id, seg.lo, seg.hi),
            ))
        return out

    def langgraph_copy_writes(self, source: str, target: str, checkpoint_ns: str) -> None:
        self._run(
            "INSERT INTO langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes)"
            " SELECT ?, checkpoint_ns, checkpoint_id, task_id, task_path, writes FROM langgraph_writes"
            " WHERE thread_id = ? AND checkpoint_ns = ?",
            (target, source, checkpoint_ns),
        )

    def langgraph_namespaces(self) -> list[tuple[str, str, str]]:
        return self._rows("SELECT t.thread_id, t.checkpoint_ns, s.name FROM langgraph_threads AS t"
                          " JOIN streams AS s ON s.id = t.tree_id ORDER BY t.thread_id, t.checkpoint_ns")

    def langgraph_all_writes(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str, str, str]]:
        return self._rows("SELECT checkpoint_id, task_id, task_path, writes FROM langgraph_writes"
                          " WHERE thread_id = ? AND checkpoint_ns = ? ORDER BY checkpoint_id, task_id",
                          (thread_id, checkpoint_ns))

    def langgraph_moved_ids(self, tree_id: int) -> list[tuple[str, int, str]]:
        return self._rows("SELECT s.name, m.version, m.checkpoint_id FROM langgraph_moved AS m JOIN streams AS s"
                          " ON s.id = m.stream_id WHERE coalesce(s.root_id, s.id) = ? ORDER BY s.id, m.version", (tree_id,))

    def langgraph_set_moved(self, stream: StreamRef, version: int, checkpoint_id: str) -> None:
        self._run("INSERT OR REPLACE INTO langgraph_moved (stream_id, version, checkpoint_id) VALUES (?, ?, ?)",
                  (stream.stream_id, version, checkpoint_id))

    def langgraph_runs(self, run_ids: Sequence[str]) -> list[tuple[str, str, str]]:
        """(thread, namespace, checkpoint id) of every checkpoint whose metadata names one of the runs."""
        return self._rows(
            "SELECT t.thread_id, t.checkpoint_ns, c.checkpoint_id FROM versions AS v"
            " JOIN checkpoint_ids AS c ON c.stream_id = v.stream_id AND c.version = v.version"
            " JOIN streams AS s ON s.id = v.stream_id"
            " JOIN langgraph_threads AS t ON t.tree_id = coalesce(s.root_id, s.id)"
            " WHERE json_extract(v.metadata, '$.metadata.run_id') IS NOT NULL"
            " AND json_extract(v.metadata, '$.metadata.run_id') IN (SELECT value FROM json_each(?))",
            (orjson.dumps(list(run_ids)).decode(),),
        )

    def tree_streams(self, root: StreamRef) -> list[StreamRow]:
        """The root and every stream forked from it (directly or not), oldest first (parents first)."""
        rows = self._rows(
            "WITH RECURSIVE sub(id) AS"
            " (SELECT ? UNION ALL SELECT s.id FROM streams AS s JOIN sub ON s.parent_id = sub.id)"
            f" SELECT {STREAM_COLS} FROM streams WHERE id IN sub ORDER BY id",
            (root.stream_id,),
        )
        return [StreamRow(*r) for r in rows]

    def tree_fingerprint(self, tree_id: int) -> tuple[int, str | None]:
        """(number of checkpoint ids, the greatest) of a tree: changes whenever a checkpoint is added."""
        return tuple(self._one("SELECT count(*), max(checkpoint_id) FROM checkpoint_ids WHERE tree_id = ?", (tree_id,)))

    def copy_stream_rows(self, source: StreamRef, target: StreamRef) -> None:
        """Copy a stream's versions, events, snapshots and checkpoint ids into an empty stream of the same
        shape (same parent versions). Checksums stay valid: they chain over content, not stream ids."""
        for sql in (
            f"INSERT INTO versions ({VERSION_COLS}) SELECT ?, version, created_at, name, auto, metadata, usage,"
            " event_count, event_bytes, checksum FROM versions WHERE stream_id = ?",
            "INSERT INTO events (stream_id, version, seq, op, path, value)"
            " SELECT ?, version, seq, op, path, value FROM events WHERE stream_id = ?",
            "INSERT INTO snapshots (stream_id, version, state, manifest)"
            " SELECT ?, version, state, manifest FROM snapshots WHERE stream_id = ?",
        ):
            self._run(sql, (target.stream_id, source.stream_id))
        self._run(
            "INSERT INTO checkpoint_ids (tree_id, checkpoint_id, stream_id, version)"
            " SELECT ?, checkpoint_id, ?, version FROM checkpoint_ids WHERE stream_id = ?",
            (target.tree_id, target.stream_id, source.stream_id),
        )
        self._run(
            "INSERT INTO langgraph_moved (stream_id, version, checkpoint_id)"
            " SELECT ?, version, checkpoint_id FROM langgraph_moved WHERE stream_id = ?",
            (target.stream_id, source.stream_id),
        )

