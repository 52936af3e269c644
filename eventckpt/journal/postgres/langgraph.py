"""The LangGraph saver's tables on PostgreSQL (schema/postgresql/004_langgraph.sql).

A thread's namespace is found by its names in `langgraph_threads`; pending writes are keyed by the same
names (LangGraph addresses everything by thread), the checkpoints by the namespace's tree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...paths import relative_parts
from ..rows import LangGraphRow, Segment, StreamRef, StreamRow
from .engine import Engine
from .tables import S_COLS, SEGS, V_COLS, over

# The parent is the previous version of the lineage (see the SQLite journal's langgraph.py). A thread's
# checkpoints are taken from checkpoint_ids alone, newest first along its primary key (tree_id,
# checkpoint_id), before anything is joined: the newest (`limit` 1) is one index probe, not a sort of every
# checkpoint of the thread (which the planner chose for the joined query whenever it expected few rows).
_LG_CHECKPOINTS = """
SELECT t.thread_id, t.checkpoint_ns, c.checkpoint_id, s.name, c.version, v.metadata,
  coalesce(eventckpt.json_safe(v.metadata)::json ->> 'parent',
    (SELECT coalesce(
        (SELECT p.checkpoint_id FROM eventckpt.checkpoint_ids AS p
          WHERE p.tree_id = c.tree_id AND p.stream_id = a.id AND p.version = a.version),
        (SELECT m.checkpoint_id FROM eventckpt.langgraph_moved AS m
          WHERE m.tree_id = c.tree_id AND m.stream_id = a.id AND m.version = a.version))
       FROM (SELECT CASE WHEN c.version - 1 > coalesce(s.fork_version, 0) THEN s.stream_id ELSE s.parent_id END AS id,
                    c.version - 1 AS version) AS a)),
  (SELECT '[' || string_agg('[' || to_json(w.task_id)::text || ',' || w.writes || ']', ',' ORDER BY w.task_path, w.task_id) || ']'
     FROM eventckpt.langgraph_writes AS w
    WHERE w.thread_id = t.thread_id AND w.checkpoint_ns = t.checkpoint_ns AND w.checkpoint_id = c.checkpoint_id),
  s.stream_id, v.created_at, {child}
FROM eventckpt.langgraph_threads AS t
CROSS JOIN LATERAL (
  SELECT c.tree_id, c.checkpoint_id, c.stream_id, c.version FROM eventckpt.checkpoint_ids AS c
  WHERE c.tree_id = t.tree_id AND {checkpoints}
  ORDER BY c.checkpoint_id DESC
  LIMIT %(limit)s) AS c
JOIN eventckpt.streams AS s ON s.tree_id = c.tree_id AND s.stream_id = c.stream_id
CROSS JOIN LATERAL (
  SELECT v.metadata, v.created_at FROM eventckpt.versions AS v
  WHERE v.tree_id = c.tree_id AND v.stream_id = c.stream_id AND v.version = c.version
  OFFSET 0) AS v  -- kept a subquery (not merged into the join), so the version is always one key probe
WHERE {threads}
ORDER BY c.checkpoint_id DESC
LIMIT %(limit)s
"""
# A metadata filter of the listing: checked on each checkpoint's version while walking them newest first.
_LG_METADATA = ("EXISTS (SELECT 1 FROM eventckpt.versions AS m WHERE m.tree_id = c.tree_id AND m.stream_id = c.stream_id"
                " AND m.version = c.version"
                " AND (eventckpt.json_safe(m.metadata)::jsonb #> %(mp{i})s) = eventckpt.json_safe(%(mv{i})s)::jsonb)")
_LG_CHILD = ("(SELECT n.checkpoint_id FROM eventckpt.checkpoint_ids AS n"
             " WHERE n.tree_id = c.tree_id AND n.stream_id = c.stream_id AND n.version = c.version + 1)")


class LangGraphTables(Engine):
    """Threads, namespaces, pending writes and checkpoint listings of the LangGraph saver."""

    def langgraph_tree(self, thread_id: str, checkpoint_ns: str) -> tuple[StreamRow, int] | None:
        row = self._one(
            f"SELECT {S_COLS}, coalesce((SELECT max(v.version) FROM eventckpt.versions AS v WHERE v.tree_id = s.tree_id"
            " AND v.stream_id = s.stream_id), 0) FROM eventckpt.langgraph_threads AS t JOIN eventckpt.streams AS s"
            " ON s.tree_id = t.tree_id AND s.stream_id = t.tree_id WHERE t.thread_id = %s AND t.checkpoint_ns = %s",
            (thread_id, checkpoint_ns))
        return (StreamRow(*row[:6]), int(row[6])) if row else None

    def langgraph_trees(self, thread_id: str) -> list[tuple[str, StreamRow]]:
        rows = self._rows(
            f"SELECT t.checkpoint_ns, {S_COLS} FROM eventckpt.langgraph_threads AS t JOIN eventckpt.streams AS s"
            " ON s.tree_id = t.tree_id AND s.stream_id = t.tree_id WHERE t.thread_id = %s ORDER BY t.checkpoint_ns",
            (thread_id,))
        return [(r[0], StreamRow(*r[1:])) for r in rows]

    def langgraph_thread_of(self, tree_id: int) -> tuple[str, str] | None:
        row = self._one("SELECT thread_id, checkpoint_ns FROM eventckpt.langgraph_threads WHERE tree_id = %s", (tree_id,))
        return (row[0], row[1]) if row else None

    def langgraph_set_tree(self, thread_id: str, checkpoint_ns: str, tree_id: int, replaces: int | None = None) -> bool:
        if replaces is None:
            return self._run("INSERT INTO eventckpt.langgraph_threads (thread_id, checkpoint_ns, tree_id) VALUES (%s, %s, %s)"
                             " ON CONFLICT DO NOTHING", (thread_id, checkpoint_ns, tree_id)) == 1
        return self._run("UPDATE eventckpt.langgraph_threads SET tree_id = %s WHERE thread_id = %s AND checkpoint_ns = %s"
                         " AND tree_id = %s", (tree_id, thread_id, checkpoint_ns, replaces)) == 1

    def langgraph_forget(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str] | None = None) -> None:
        args = {"thread": thread_id, "ns": checkpoint_ns}
        writes = "DELETE FROM eventckpt.langgraph_writes WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s"
        if checkpoint_ids is None:
            self._run(writes, args)
            self._run("DELETE FROM eventckpt.langgraph_threads WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s", args)
            return
        self._run(writes + " AND checkpoint_id = ANY(%(ids)s)", {**args, "ids": list(checkpoint_ids)})

    def langgraph_locate(self, tree_id: int, checkpoint_id: str) -> tuple[StreamRow, int, int] | None:
        row = self._one(
            f"SELECT {S_COLS}, c.version, (SELECT max(v.version) FROM eventckpt.versions AS v WHERE v.tree_id = s.tree_id"
            " AND v.stream_id = s.stream_id) FROM eventckpt.checkpoint_ids AS c JOIN eventckpt.streams AS s"
            " ON s.tree_id = c.tree_id AND s.stream_id = c.stream_id WHERE c.tree_id = %s AND c.checkpoint_id = %s",
            (tree_id, checkpoint_id))
        return (StreamRow(*row[:6]), int(row[6]), int(row[7])) if row else None

    def langgraph_checkpoints(self, *, thread_id: str | None = None, checkpoint_ns: str | None = None,
                              checkpoint_id: str | None = None, before: str | None = None,
                              metadata: Sequence[tuple[str, str]] = (), limit: int | None = None,
                              child: bool = False) -> list[LangGraphRow]:
        threads: list[str] = []
        checkpoints: list[str] = []
        args: dict[str, Any] = {"limit": limit}
        for where, column, name, value, test in (
                (threads, "t.thread_id", "thread", thread_id, "="), (threads, "t.checkpoint_ns", "ns", checkpoint_ns, "="),
                (checkpoints, "c.checkpoint_id", "cid", checkpoint_id, "="),
                (checkpoints, "c.checkpoint_id", "before", before, "<")):
            if value is not None:
                where.append(f"{column} {test} %({name})s")
                args[name] = value
        for i, (path, value) in enumerate(metadata):
            checkpoints.append(_LG_METADATA.format(i=i))
            args[f"mp{i}"], args[f"mv{i}"] = [str(k) for k in relative_parts(path)], value
        rows = self._rows(_LG_CHECKPOINTS.format(threads=" AND ".join(threads) or "TRUE",
                                                 checkpoints=" AND ".join(checkpoints) or "TRUE",
                                                 child=_LG_CHILD if child else "NULL"), args)
        return [LangGraphRow(*r[:4], int(r[4]), *r[5:8], int(r[8]), r[9], r[10]) for r in rows]

    def langgraph_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str) -> str | None:
        row = self._one("SELECT writes FROM eventckpt.langgraph_writes WHERE thread_id = %s AND checkpoint_ns = %s"
                        " AND checkpoint_id = %s AND task_id = %s", (thread_id, checkpoint_ns, checkpoint_id, task_id))
        return row[0] if row else None

    def langgraph_set_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                             task_path: str, writes: str, *, replace: bool) -> bool:
        conflict = ("DO UPDATE SET task_path = excluded.task_path, writes = excluded.writes" if replace else "DO NOTHING")
        return self._run(
            "INSERT INTO eventckpt.langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes)"
            f" VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id) {conflict}",
            (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes)) == 1

    def langgraph_replace_writes(self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, task_id: str,
                                 old: str, new: str) -> bool:
        return self._run("UPDATE eventckpt.langgraph_writes SET writes = %s WHERE thread_id = %s AND checkpoint_ns = %s"
                         " AND checkpoint_id = %s AND task_id = %s AND writes = %s",
                         (new, thread_id, checkpoint_ns, checkpoint_id, task_id, old)) == 1

    def langgraph_referencing_writes(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self._rows(
            "SELECT checkpoint_id, task_id, writes FROM eventckpt.langgraph_writes WHERE thread_id = %s"
            " AND checkpoint_ns = %s AND strpos(writes, '[\"@\",') > 0", (thread_id, checkpoint_ns))]

    def langgraph_child_events(self, thread_id: str, checkpoint_ns: str, checkpoint_ids: Sequence[str],
                               paths: Sequence[str]) -> list[tuple[str, str, int, str | None, str | None, str | None]]:
        return [(r[0], r[1], int(r[2]), r[3], r[4], r[5]) for r in self._rows(
            "SELECT c.checkpoint_id, s.name, c.version, e.op, e.path, e.value FROM eventckpt.langgraph_threads AS t"
            " JOIN eventckpt.checkpoint_ids AS c ON c.tree_id = t.tree_id"
            " JOIN eventckpt.streams AS s ON s.tree_id = c.tree_id AND s.stream_id = c.stream_id"
            " LEFT JOIN eventckpt.events AS e ON e.tree_id = c.tree_id AND e.stream_id = c.stream_id"
            "  AND e.version = c.version AND e.path = ANY(%s)"
            " WHERE t.thread_id = %s AND t.checkpoint_ns = %s AND c.checkpoint_id = ANY(%s)"
            " ORDER BY c.checkpoint_id, e.seq NULLS FIRST",
            (list(paths), thread_id, checkpoint_ns, list(checkpoint_ids)))]

    def langgraph_move_id(self, tree_id: int, checkpoint_id: str) -> bool:
        row = self._one("DELETE FROM eventckpt.checkpoint_ids WHERE tree_id = %s AND checkpoint_id = %s"
                        " RETURNING stream_id, version", (tree_id, checkpoint_id))
        if row is None:
            return False
        self._run("INSERT INTO eventckpt.langgraph_moved (tree_id, stream_id, version, checkpoint_id) VALUES (%s, %s, %s, %s)"
                  " ON CONFLICT (tree_id, stream_id, version) DO UPDATE SET checkpoint_id = excluded.checkpoint_id",
                  (tree_id, row[0], row[1], checkpoint_id))
        return True

    def langgraph_lineage_writes(self, thread_id: str, checkpoint_ns: str,
                                 segments: Sequence[Segment]) -> list[tuple[int, str, str, str, str]]:
        if not segments:
            return []
        return [(int(r[0]), *r[1:]) for r in self._rows(*over(
            f"SELECT c.version, c.checkpoint_id, w.task_id, w.task_path, w.writes FROM {SEGS}"
            " JOIN eventckpt.checkpoint_ids AS c ON c.tree_id = %(t)s AND c.stream_id = seg.stream_id"
            " AND c.version BETWEEN seg.lo AND seg.hi"
            " JOIN eventckpt.langgraph_writes AS w ON w.thread_id = %(thread)s AND w.checkpoint_ns = %(ns)s"
            " AND w.checkpoint_id = c.checkpoint_id ORDER BY c.version, w.task_path, w.task_id",
            segments, thread=thread_id, ns=checkpoint_ns))]

    def langgraph_copy_writes(self, source: str, target: str, checkpoint_ns: str) -> None:
        self._run(
            "INSERT INTO eventckpt.langgraph_writes (thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, writes)"
            " SELECT %s, checkpoint_ns, checkpoint_id, task_id, task_path, writes FROM eventckpt.langgraph_writes"
            " WHERE thread_id = %s AND checkpoint_ns = %s", (target, source, checkpoint_ns))

    def langgraph_namespaces(self) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self._rows(
            "SELECT t.thread_id, t.checkpoint_ns, s.name FROM eventckpt.langgraph_threads AS t JOIN eventckpt.streams AS s"
            " ON s.tree_id = t.tree_id AND s.stream_id = t.tree_id ORDER BY t.thread_id, t.checkpoint_ns")]

    def langgraph_all_writes(self, thread_id: str, checkpoint_ns: str) -> list[tuple[str, str, str, str]]:
        return [tuple(r) for r in self._rows(
            "SELECT checkpoint_id, task_id, task_path, writes FROM eventckpt.langgraph_writes WHERE thread_id = %s"
            " AND checkpoint_ns = %s ORDER BY checkpoint_id, task_id", (thread_id, checkpoint_ns))]

    def langgraph_moved_ids(self, tree_id: int) -> list[tuple[str, int, str]]:
        return [(r[0], int(r[1]), r[2]) for r in self._rows(
            "SELECT s.name, m.version, m.checkpoint_id FROM eventckpt.langgraph_moved AS m JOIN eventckpt.streams AS s"
            " ON s.tree_id = m.tree_id AND s.stream_id = m.stream_id WHERE m.tree_id = %s ORDER BY s.stream_id, m.version",
            (tree_id,))]

    def langgraph_set_moved(self, stream: StreamRef, version: int, checkpoint_id: str) -> None:
        self._run("INSERT INTO eventckpt.langgraph_moved (tree_id, stream_id, version, checkpoint_id) VALUES (%s, %s, %s, %s)"
                  " ON CONFLICT (tree_id, stream_id, version) DO UPDATE SET checkpoint_id = excluded.checkpoint_id",
                  (stream.tree_id, stream.stream_id, version, checkpoint_id))

    def langgraph_runs(self, run_ids: Sequence[str]) -> list[tuple[str, str, str]]:
        return [tuple(r) for r in self._rows(
            "SELECT t.thread_id, t.checkpoint_ns, c.checkpoint_id FROM eventckpt.versions AS v"
            " JOIN eventckpt.checkpoint_ids AS c ON c.tree_id = v.tree_id AND c.stream_id = v.stream_id AND c.version = v.version"
            " JOIN eventckpt.langgraph_threads AS t ON t.tree_id = v.tree_id"
            " WHERE v.metadata IS NOT NULL AND (eventckpt.json_safe(v.metadata)::jsonb #>> '{metadata,run_id}') = ANY(%s)", (list(run_ids),))]

    def tree_streams(self, root: StreamRef) -> list[StreamRow]:
        return [StreamRow(*r) for r in self._rows(
            f"SELECT {S_COLS} FROM eventckpt.streams AS s WHERE s.tree_id = %s ORDER BY s.stream_id", (root.tree_id,))]

    def tree_fingerprint(self, tree_id: int) -> tuple[int, str | None]:
        row = self._one("SELECT count(*), max(checkpoint_id) FROM eventckpt.checkpoint_ids WHERE tree_id = %s", (tree_id,))
        return int(row[0]), row[1]

    def copy_stream_rows(self, source: StreamRef, target: StreamRef) -> None:
        args = {"st": source.tree_id, "ss": source.stream_id, "tt": target.tree_id, "ts": target.stream_id}
        cols = V_COLS.replace("stream_id, ", "")
        self._run(f"INSERT INTO eventckpt.versions (tree_id, stream_id, {cols}) SELECT %(tt)s, %(ts)s, {cols}"
                  " FROM eventckpt.versions WHERE tree_id = %(st)s AND stream_id = %(ss)s", args)
        self._run("INSERT INTO eventckpt.events (tree_id, stream_id, version, seq, op, path, value)"
                  " SELECT %(tt)s, %(ts)s, version, seq, op, path, value FROM eventckpt.events"
                  " WHERE tree_id = %(st)s AND stream_id = %(ss)s", args)
        self._run("INSERT INTO eventckpt.snapshots (tree_id, stream_id, version, state, manifest)"
                  " SELECT %(tt)s, %(ts)s, version, state, manifest FROM eventckpt.snapshots"
                  " WHERE tree_id = %(st)s AND stream_id = %(ss)s", args)
        self._run("INSERT INTO eventckpt.checkpoint_ids (tree_id, checkpoint_id, stream_id, version)"
                  " SELECT %(tt)s, checkpoint_id, %(ts)s, version FROM eventckpt.checkpoint_ids"
                  " WHERE tree_id = %(st)s AND stream_id = %(ss)s", args)
        self._run("INSERT INTO eventckpt.langgraph_moved (tree_id, stream_id, version, checkpoint_id)"
                  " SELECT %(tt)s, %(ts)s, version, checkpoint_id FROM eventckpt.langgraph_moved"
                  " WHERE tree_id = %(st)s AND stream_id = %(ss)s", args)
