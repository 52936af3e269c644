"""Streams, versions, snapshots, events, checkpoint ids and tool calls on PostgreSQL (schema/postgresql).

Every statement names one tree (`tree_id = %(t)s`) and, where it reads a lineage, takes the lineage's
segments as arrays (`unnest`), so a read is one round trip however many forks deep the stream is.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import errors as pg

from ... import errors
from ..rows import (CheckpointIdTaken, Commit, EventRow, HistoryRewritten, Segment, StreamRef, StreamRow, VersionRow,
                    VersionTaken)
from .engine import Engine, lost, with_nul

# A StreamRow from eventckpt.streams AS s: a root's root_id is NULL, a fork's is its tree.
S_COLS = ("s.stream_id, s.name, s.parent_id, s.fork_version,"
          " CASE WHEN s.parent_id IS NULL THEN NULL ELSE s.tree_id END, s.created_at")
V_COLS = "stream_id, version, created_at, name, auto, metadata, usage, event_count, event_bytes, checksum"
# A lineage's segments as a row source `seg(stream_id, lo, hi)`: one segment (most streams) as three scalar
# parameters, which the planner folds into index bounds; a fork's several segments as arrays to unnest.
SEGS = "unnest(%(sids)s::bigint[], %(los)s::bigint[], %(his)s::bigint[]) AS seg(stream_id, lo, hi)"
_ONE_SEG = "(SELECT %(sid)s::bigint AS stream_id, %(lo)s::bigint AS lo, %(hi)s::bigint AS hi) AS seg"
_HEAD = ("coalesce((SELECT max(v.version) FROM eventckpt.versions AS v WHERE v.tree_id = s.tree_id"
         " AND v.stream_id = s.stream_id), s.fork_version, 0)")
_BY_NAME = ("FROM eventckpt.stream_names AS n JOIN eventckpt.streams AS s"
            " ON s.tree_id = n.tree_id AND s.stream_id = n.stream_id WHERE n.name = %s")


def over(sql: str, segments: Sequence[Segment], **more: Any) -> tuple[str, dict[str, Any]]:
    """A statement over a lineage's segments (`sql` names them as {SEGS}, its tree as `t`) and its
    bound parameters."""
    args: dict[str, Any] = {"t": segments[0].tree_id if segments else 0, **more}
    if len(segments) == 1:
        seg = segments[0]
        return sql.replace(SEGS, _ONE_SEG), {**args, "sid": seg.stream_id, "lo": seg.lo, "hi": seg.hi}
    return sql, {**args, "sids": [s.stream_id for s in segments], "los": [s.lo for s in segments],
                 "his": [s.hi for s in segments]}


def _version_row(row: Sequence[Any]) -> VersionRow:
    return VersionRow(*row[:9], bytes(row[9]))


def _append_sql(checkpoint_id: bool, tools: bool, snapshot: bool) -> str:
    """The one statement that writes a version: the stream's row is locked FOR KEY SHARE (the lock the
    versions foreign key takes anyway; retention holds the tree's rows FOR UPDATE while it rewrites) and
    must still have the generation the writer built on; then the version row and, from it, the events,
    checkpoint id, tool calls and snapshot. Nothing is written when the generation moved; the primary keys
    refuse a version or id another writer took. Arrays are bound in binary (no per-item escaping)."""
    parts = [
        "WITH g AS (SELECT generation FROM eventckpt.streams WHERE tree_id = %(t)s AND stream_id = %(s)s"
        " FOR KEY SHARE),",
        " v AS (INSERT INTO eventckpt.versions (tree_id, stream_id, version, created_at, name, auto, metadata, usage,"
        " event_count, event_bytes, checksum) SELECT %(t)s, %(s)s, %(v)s, %(created)s, %(name)s, %(auto)s, %(meta)s,"
        " %(usage)s, %(count)s, %(bytes)s, %(checksum)s FROM g WHERE g.generation = %(gen)s RETURNING version),",
        " e AS (INSERT INTO eventckpt.events (tree_id, stream_id, version, seq, op, path, value)"
        " SELECT %(t)s, %(s)s, v.version, x.seq - 1, x.op, x.path, x.value FROM v,"
        " unnest(%(ops)b::text[], %(paths)b::text[], %(values)b::text[]) WITH ORDINALITY AS x(op, path, value, seq))",
    ]
    if checkpoint_id:
        parts.append(", c AS (INSERT INTO eventckpt.checkpoint_ids (tree_id, checkpoint_id, stream_id, version)"
                     " SELECT %(t)s, %(cid)s, %(s)s, v.version FROM v)")
    if tools:
        parts.append(", tc AS (INSERT INTO eventckpt.tool_calls (tree_id, stream_id, version, seq, call_id, name, arguments,"
                     " result, error, undoes) SELECT %(t)s, %(s)s, v.version, x.seq - 1, x.call_id, x.name, x.arguments,"
                     " x.result, x.error, x.undoes FROM v, unnest(%(tc_ids)s::text[], %(tc_names)s::text[],"
                     " %(tc_args)s::text[], %(tc_results)s::text[], %(tc_errors)s::text[], %(tc_undoes)s::text[])"
                     " WITH ORDINALITY AS x(call_id, name, arguments, result, error, undoes, seq))")
    if snapshot:
        parts.append(", sn AS (INSERT INTO eventckpt.snapshots (tree_id, stream_id, version, state, manifest)"
                     " SELECT %(t)s, %(s)s, v.version, %(state)s, %(manifest)s FROM v)")
    parts.append(" SELECT (SELECT generation FROM g), (SELECT count(*) FROM v)")
    return "".join(parts)


_APPEND = {(c, t, s): _append_sql(c, t, s) for c in (False, True) for t in (False, True) for s in (False, True)}


class Tables(Engine):
    """Streams, versions, snapshots, events, checkpoint ids, tool calls and retention's rewrites."""

    # -- streams ----------------------------------------------------------------------------------

    def stream(self, name: str) -> StreamRow | None:
        row = self._one(f"SELECT {S_COLS} {_BY_NAME}", (name,))
        return StreamRow(*row) if row else None

    def stream_and_head(self, name: str) -> tuple[StreamRow, int] | None:
        row = self._one(f"SELECT {S_COLS}, {_HEAD} {_BY_NAME}", (name,))
        return (StreamRow(*row[:6]), int(row[6])) if row else None

    def stream_names(self) -> list[str]:
        return [r[0] for r in self._rows("SELECT name FROM eventckpt.streams ORDER BY stream_id")]

    def children(self, stream: StreamRef) -> list[StreamRow]:
        rows = self._rows(f"SELECT {S_COLS} FROM eventckpt.streams AS s WHERE s.tree_id = %s AND s.parent_id = %s"
                          " ORDER BY s.stream_id", (stream.tree_id, stream.stream_id))
        return [StreamRow(*r) for r in rows]

    def lineage(self, stream: StreamRef) -> list[StreamRow]:
        rows = self._rows(
            f"""WITH RECURSIVE chain (stream_id, depth) AS (
                  SELECT %(s)s::bigint, 0
                  UNION ALL
                  SELECT p.parent_id, c.depth + 1 FROM chain AS c
                  JOIN eventckpt.streams AS p ON p.tree_id = %(t)s AND p.stream_id = c.stream_id
                  WHERE p.parent_id IS NOT NULL)
                SELECT {S_COLS} FROM chain AS c
                JOIN eventckpt.streams AS s ON s.tree_id = %(t)s AND s.stream_id = c.stream_id
                ORDER BY c.depth DESC""",
            {"t": stream.tree_id, "s": stream.stream_id},
        )
        return [StreamRow(*r) for r in rows]

    def create_stream(self, name: str, created_at: str, parent: StreamRow | None = None,
                      fork_version: int | None = None) -> StreamRow:
        args = {"name": name, "created": created_at, "tree": parent.tree_id if parent else None,
                "parent": parent.id if parent else None, "fork": fork_version}
        sql = f"""WITH n AS (SELECT nextval('eventckpt.stream_ids') AS id),
            t AS (INSERT INTO eventckpt.trees (tree_id) SELECT id FROM n WHERE %(tree)s::bigint IS NULL),
            s AS (INSERT INTO eventckpt.streams (tree_id, stream_id, name, parent_id, fork_version, created_at)
                  SELECT coalesce(%(tree)s::bigint, n.id), n.id, %(name)s, %(parent)s, %(fork)s, %(created)s FROM n
                  RETURNING *),
            k AS (INSERT INTO eventckpt.stream_names (name, tree_id, stream_id) SELECT name, tree_id, stream_id FROM s)
            SELECT {S_COLS} FROM s"""
        try:
            with self.conn.transaction():  # a savepoint: a taken name must not abort the caller's transaction
                row = self.conn.execute(sql, args).fetchone()
        except pg.UniqueViolation:
            raise errors.StreamExistsError(name) from None
        except pg.ForeignKeyViolation:  # the parent was deleted by another host (a fork that did not hold the tree)
            if parent is None:
                raise
            raise errors.StreamNotFoundError(parent.name) from None
        except psycopg.Error as exc:
            self._fail(exc)
        assert row is not None
        return StreamRow(*row)

    def delete_stream(self, stream: StreamRef) -> None:
        """Lock the tree first, as retention does (lock_tree), then delete: rows deleted before the tree's
        lock was held would be locked in the opposite order to a prune of the same tree (deadlock)."""
        self.lock_tree(stream.tree_id)
        key = (stream.tree_id, stream.stream_id)
        for table in ("checkpoint_ids", "snapshots", "events", "tool_calls", "versions"):
            self._run(f"DELETE FROM eventckpt.{table} WHERE tree_id = %s AND stream_id = %s", key)
        self._run("DELETE FROM eventckpt.stream_names WHERE name = (SELECT name FROM eventckpt.streams"
                  " WHERE tree_id = %s AND stream_id = %s)", key)
        self._run("DELETE FROM eventckpt.streams WHERE tree_id = %s AND stream_id = %s", key)
        if stream.tree_id == stream.stream_id:  # the root goes last: the tree goes with it
            self._run("DELETE FROM eventckpt.trees WHERE tree_id = %s", (stream.tree_id,))

    def reclaim(self, pages: int | None = None) -> None:
        """Autovacuum reclaims PostgreSQL's space."""

    # -- versions ---------------------------------------------------------------------------------

    def append(self, commit: Commit) -> None:
        row, stream = commit.row, commit.stream
        tools = commit.tool_rows
        args: dict[str, Any] = {
            "t": stream.tree_id, "s": stream.id, "v": row.version, "created": row.created_at, "name": row.name,
            "auto": row.auto, "meta": row.metadata, "usage": row.usage, "count": row.event_count,
            "bytes": row.event_bytes, "checksum": row.checksum, "gen": commit.generation,
            "ops": [e[0] for e in commit.events], "paths": [e[1] for e in commit.events],
            "values": [e[2].decode() if e[2] is not None else None for e in commit.events],
            "cid": commit.checkpoint_id,
        }
        if tools:
            for i, key in enumerate(("tc_ids", "tc_names", "tc_args", "tc_results", "tc_errors", "tc_undoes")):
                args[key] = [t[i] for t in tools]
        if commit.snapshot is not None:
            args["state"], args["manifest"] = commit.snapshot
        sql = _APPEND[(commit.checkpoint_id is not None, bool(tools), commit.snapshot is not None)]
        try:
            if self._depth:  # inside a transaction: a savepoint, so a refusal leaves it usable
                with self.conn.transaction():
                    found = self.conn.execute(sql, args).fetchone()
            else:
                found = self.conn.execute(sql, args).fetchone()
        except pg.UniqueViolation as exc:
            if exc.diag.constraint_name == "checkpoint_ids_pkey":
                raise CheckpointIdTaken() from None
            raise VersionTaken() from None
        except pg.ForeignKeyViolation:  # the stream is gone
            raise VersionTaken() from None
        except psycopg.Error as exc:
            if lost(exc) and not self._depth:  # the next statement replaces the connection
                raise errors.StoreUnavailableError(f"{self.path}: the connection dropped during a commit ({exc})",
                                                   code="lost", committed=None) from None
            self._fail(exc)
        assert found is not None
        generation, written = found
        if generation is None:
            raise VersionTaken()  # the stream is gone
        if not written:
            raise HistoryRewritten()

    def version_row(self, owner: StreamRef, version: int) -> VersionRow | None:
        row = self._one(f"SELECT {V_COLS} FROM eventckpt.versions WHERE tree_id = %s AND stream_id = %s AND version = %s",
                        (owner.tree_id, owner.stream_id, version))
        return _version_row(row) if row else None

    def version_rows(self, segments: Sequence[Segment]) -> list[VersionRow]:
        if not segments:
            return []
        rows = self._rows(*over(f"SELECT {', '.join('v.' + c for c in V_COLS.split(', '))} FROM {SEGS}"
                          " JOIN eventckpt.versions AS v ON v.tree_id = %(t)s AND v.stream_id = seg.stream_id"
                          " AND v.version BETWEEN seg.lo AND seg.hi ORDER BY v.version", segments))
        return [_version_row(r) for r in rows]

    def version_numbers(self, segments: Sequence[Segment]) -> list[int]:
        if not segments:
            return []
        return [r[0] for r in self._rows(*over(
            f"SELECT v.version FROM {SEGS} JOIN eventckpt.versions AS v ON v.tree_id = %(t)s AND"
            " v.stream_id = seg.stream_id AND v.version BETWEEN seg.lo AND seg.hi ORDER BY v.version", segments))]

    def count_versions(self, segments: Sequence[Segment]) -> int:
        if not segments:
            return 0
        return int(self._one(*over(
            f"SELECT count(*) FROM {SEGS} JOIN eventckpt.versions AS v ON v.tree_id = %(t)s AND"
            " v.stream_id = seg.stream_id AND v.version BETWEEN seg.lo AND seg.hi", segments))[0])

    # -- snapshots --------------------------------------------------------------------------------

    def insert_snapshot(self, owner: StreamRef, version: int, state: str, manifest: str) -> None:
        self._run("INSERT INTO eventckpt.snapshots (tree_id, stream_id, version, state, manifest) VALUES (%s, %s, %s, %s, %s)"
                  " ON CONFLICT (tree_id, stream_id, version) DO UPDATE SET state = excluded.state, manifest = excluded.manifest",
                  (owner.tree_id, owner.stream_id, version, state, manifest))

    def latest_snapshot(self, segments: Sequence[Segment]) -> tuple[int, str, str] | None:
        if not segments:
            return None
        row = self._one(*over(f"SELECT x.version, x.state, x.manifest FROM {SEGS} JOIN eventckpt.snapshots AS x"
                        " ON x.tree_id = %(t)s AND x.stream_id = seg.stream_id AND x.version BETWEEN seg.lo AND seg.hi"
                        " ORDER BY x.version DESC LIMIT 1", segments))
        return (int(row[0]), row[1], row[2]) if row else None

    def snapshot_value(self, owner: StreamRef, version: int, key: str) -> str | None:
        row = self._one("SELECT (eventckpt.json_safe(state)::json -> %s)::text FROM eventckpt.snapshots"
                        " WHERE tree_id = %s AND stream_id = %s AND version = %s",
                        (key, owner.tree_id, owner.stream_id, version))
        return with_nul(row[0]) if row else None

    # -- events -----------------------------------------------------------------------------------

    def tail(self, segments: Sequence[Segment], after: int) -> list[EventRow]:
        segments = [s for s in segments if s.hi > after]
        if not segments:
            return []
        return self._rows(*over(f"SELECT e.version, e.seq, e.op, e.path, e.value FROM {SEGS} JOIN eventckpt.events AS e"
                          " ON e.tree_id = %(t)s AND e.stream_id = seg.stream_id AND e.version > greatest(%(after)s, seg.lo - 1)"
                          " AND e.version <= seg.hi ORDER BY e.version, e.seq", segments, after=after))

    def key_values(self, segments: Sequence[Segment], path: str, start: tuple[int, int], upto: int) -> list[tuple[str, str]]:
        if not segments:
            return []
        return self._rows(*over(
            f"SELECT e.op, e.value FROM {SEGS} JOIN eventckpt.events AS e ON e.tree_id = %(t)s AND e.stream_id = seg.stream_id"
            " AND e.path = %(path)s AND e.version BETWEEN greatest(seg.lo, %(v0)s) AND least(seg.hi, %(upto)s)"
            " AND (e.version, e.seq) >= (%(v0)s, %(s0)s) ORDER BY e.version, e.seq",
            segments, path=path, v0=start[0], s0=start[1], upto=upto))

    def key_events(self, segments: Sequence[Segment], path: str, children: Iterable[tuple[str, str]],
                   after: int) -> list[EventRow]:
        segments = [s for s in segments if s.hi > after]
        if not segments:
            return []
        ranges = list(children)
        below = " ".join(f"UNION ALL SELECT e.version, e.seq, e.op, e.path, e.value FROM {SEGS} JOIN eventckpt.events AS e"
                         f" ON e.tree_id = %(t)s AND e.stream_id = seg.stream_id AND e.path >= %(lo{i})s AND e.path < %(hi{i})s"
                         " AND e.version > greatest(%(after)s, seg.lo - 1) AND e.version <= seg.hi" for i in range(len(ranges)))
        more = {f"lo{i}": lo for i, (lo, _) in enumerate(ranges)} | {f"hi{i}": hi for i, (_, hi) in enumerate(ranges)}
        return self._rows(*over(
            f"SELECT * FROM (SELECT e.version, e.seq, e.op, e.path, e.value FROM {SEGS} JOIN eventckpt.events AS e"
            " ON e.tree_id = %(t)s AND e.stream_id = seg.stream_id AND e.path = %(path)s"
            f" AND e.version > greatest(%(after)s, seg.lo - 1) AND e.version <= seg.hi {below}) AS u ORDER BY 1, 2",
            segments, path=path, after=after, **more))

    def events_of(self, owner: StreamRef, version: int) -> list[tuple[str, str, str | None]]:
        return self._rows("SELECT op, path, value FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND version = %s"
                          " ORDER BY seq", (owner.tree_id, owner.stream_id, version))

    def event_paths(self, owner: StreamRef, version: int, before: int) -> list[tuple[str, str]]:
        return self._rows("SELECT op, path FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND version = %s"
                          " AND seq < %s ORDER BY seq", (owner.tree_id, owner.stream_id, version, before))

    def event_at(self, owner: StreamRef, version: int, seq: int) -> tuple[str, str, str | None]:
        return self._one("SELECT op, path, value FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s"
                         " AND version = %s AND seq = %s", (owner.tree_id, owner.stream_id, version, seq))

    # -- checkpoint ids and tool calls --------------------------------------------------------------

    def find_checkpoint_id(self, tree_id: int, checkpoint_id: str) -> tuple[int, int] | None:
        row = self._one("SELECT stream_id, version FROM eventckpt.checkpoint_ids WHERE tree_id = %s AND checkpoint_id = %s",
                        (tree_id, checkpoint_id))
        return (int(row[0]), int(row[1])) if row else None

    def checkpoint_id_of(self, owner: StreamRef, version: int) -> str | None:
        row = self._one("SELECT checkpoint_id FROM eventckpt.checkpoint_ids WHERE tree_id = %s AND stream_id = %s"
                        " AND version = %s", (owner.tree_id, owner.stream_id, version))
        return row[0] if row else None

    _TOOL_COLS = "call_id, name, arguments, result, error, undoes"

    def tool_calls(self, segments: Sequence[Segment], after: int = 0) -> list[tuple[Any, ...]]:
        segments = [s for s in segments if s.hi > after]
        if not segments:
            return []
        cols = ", ".join("c." + c for c in self._TOOL_COLS.split(", "))
        return [tuple(r) for r in self._rows(*over(
            f"SELECT c.version, {cols} FROM {SEGS} JOIN eventckpt.tool_calls AS c ON c.tree_id = %(t)s"
            " AND c.stream_id = seg.stream_id AND c.version > greatest(%(after)s, seg.lo - 1) AND c.version <= seg.hi"
            " ORDER BY c.version, c.seq", segments, after=after))]

    def undone_call_ids(self, tree_id: int, call_ids: Sequence[str]) -> set[str]:
        rows = self._rows("SELECT DISTINCT undoes FROM eventckpt.tool_calls WHERE tree_id = %s AND undoes = ANY(%s)"
                          " AND error IS NULL", (tree_id, list(call_ids)))
        return {r[0] for r in rows}

    def tool_rows_of(self, owner: StreamRef, version: int) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self._rows(
            f"SELECT {self._TOOL_COLS} FROM eventckpt.tool_calls WHERE tree_id = %s AND stream_id = %s AND version = %s"
            " ORDER BY seq", (owner.tree_id, owner.stream_id, version))]

    # -- retention (rewriting committed history) --------------------------------------------------

    def generation(self, stream: StreamRef) -> int:
        row = self._one("SELECT generation FROM eventckpt.streams WHERE tree_id = %s AND stream_id = %s",
                        (stream.tree_id, stream.stream_id))
        return int(row[0]) if row else 0

    def rewritten_since(self, stream: StreamRef, generation: int) -> bool:
        return self.generation(stream) != generation  # other hosts commit without telling us: always read

    def hold_tree(self, tree_id: int) -> None:
        # shared with other commits; in lock_tree's order, so a rewrite waiting for it cannot deadlock with it
        self._run("SELECT 1 FROM eventckpt.streams WHERE tree_id = %s ORDER BY stream_id FOR KEY SHARE", (tree_id,))

    def lock_tree(self, tree_id: int) -> None:
        # in one order (by stream id), so that two transactions locking one tree queue instead of deadlocking
        self._run("SELECT 1 FROM eventckpt.streams WHERE tree_id = %s ORDER BY stream_id FOR UPDATE", (tree_id,))

    def bump_generation(self, tree_id: int) -> int:
        row = self._one("WITH u AS (UPDATE eventckpt.streams SET generation = generation + 1 WHERE tree_id = %s"
                        " RETURNING generation) SELECT max(generation) FROM u", (tree_id,))
        return int(row[0]) if row and row[0] is not None else 0

    def snapshots_in(self, owner: StreamRef, lo: int, hi: int) -> list[tuple[int, str, str]]:
        return [(int(r[0]), r[1], r[2]) for r in self._rows(
            "SELECT version, state, manifest FROM eventckpt.snapshots WHERE tree_id = %s AND stream_id = %s"
            " AND version BETWEEN %s AND %s ORDER BY version", (owner.tree_id, owner.stream_id, lo, hi))]

    def remove_versions(self, owner: StreamRef, versions: Sequence[int]) -> None:
        for table in ("checkpoint_ids", "snapshots", "events", "versions"):  # tool calls cascade
            self._run(f"DELETE FROM eventckpt.{table} WHERE tree_id = %s AND stream_id = %s AND version = ANY(%s)",
                      (owner.tree_id, owner.stream_id, list(versions)))

    def rewrite_version(self, owner: StreamRef, version: int, events: Sequence[tuple[str, str, str | None]],
                        tools: Sequence[Sequence[Any]], event_bytes: int) -> None:
        key = (owner.tree_id, owner.stream_id, version)
        self._run("DELETE FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND version = %s", key)
        self._run("DELETE FROM eventckpt.tool_calls WHERE tree_id = %s AND stream_id = %s AND version = %s", key)
        self._many("INSERT INTO eventckpt.events (tree_id, stream_id, version, seq, op, path, value)"
                   " VALUES (%s, %s, %s, %s, %s, %s, %s)", [(*key, seq, *event) for seq, event in enumerate(events)])
        self._many(f"INSERT INTO eventckpt.tool_calls (tree_id, stream_id, version, seq, {self._TOOL_COLS})"
                   " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", [(*key, seq, *row) for seq, row in enumerate(tools)])
        self._run("UPDATE eventckpt.versions SET event_count = %s, event_bytes = %s WHERE tree_id = %s AND stream_id = %s"
                  " AND version = %s", (len(events), event_bytes, *key))

    def removed_head(self, stream: StreamRef) -> int:
        row = self._one("SELECT removed_head FROM eventckpt.streams WHERE tree_id = %s AND stream_id = %s",
                        (stream.tree_id, stream.stream_id))
        return int(row[0]) if row and row[0] is not None else 0

    def set_removed_head(self, stream: StreamRef, version: int) -> None:
        self._run("UPDATE eventckpt.streams SET removed_head = greatest(coalesce(removed_head, 0), %s)"
                  " WHERE tree_id = %s AND stream_id = %s", (version, stream.tree_id, stream.stream_id))

    def set_checksum(self, owner: StreamRef, version: int, checksum: bytes) -> None:
        self._run("UPDATE eventckpt.versions SET checksum = %s WHERE tree_id = %s AND stream_id = %s AND version = %s",
                  (checksum, owner.tree_id, owner.stream_id, version))
