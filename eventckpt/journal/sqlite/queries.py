"""Log, search, history, diff, verify and stats as SQL (schema/002_queries.sql)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import apsw
import apsw.ext

from ... import errors
from ...paths import child_ranges
from ..rows import EventRow, HistoryRow, LogRow, MetaFilter, Segment, StreamRef, StreamRow, SummaryRow, clip
from .columns import S_COLS, STREAM_COLS, json_list
from .engine import Engine, undecodable

# -- query fragments (schema/002_queries.sql) --------------------------------------------------------

# The partial index events_reshaping is used only by queries that repeat its WHERE clause verbatim.
RESHAPING = "(e.op = 'delete' OR e.op = 'truncate' OR e.op = 'extend' OR (e.op = 'set' AND substr(e.value, 1, 1) = '['))"
_NOTHING_MORE = re.compile(r"(?:\s|;|--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))*", re.DOTALL)  # after a statement
_DIRECT_GROUP_LIMIT = 500  # versions in a range below which grouping its events beats seeking every path

_LOG_ROW = "v.stream_id, v.version, v.created_at, v.name, v.auto, v.metadata, v.usage"
_LOG_COLS = _LOG_ROW + ", (SELECT c.checkpoint_id FROM checkpoint_ids AS c WHERE c.stream_id = v.stream_id AND c.version = v.version)"

_HISTORY = ("SELECT e.stream_id, e.version, e.seq, e.op, e.path, {value}, v.created_at FROM events AS e INDEXED BY {index}"
            " JOIN versions AS v ON v.stream_id = e.stream_id AND v.version = e.version"
            " WHERE e.stream_id = ? AND {where} AND e.version >= ? AND e.version <= ? ORDER BY e.version DESC, e.seq DESC LIMIT ?")
# (>= and <=, not BETWEEN: with BETWEEN and the join, SQLite 3.54 searches the index with the lower bound
# only and steps through every newer event of the path to reach `until`: 60 ms at 100k versions.)

_NEWEST = ("SELECT version, seq, op, path, value FROM events INDEXED BY events_by_path"
           " WHERE stream_id = ? AND path = ? AND version BETWEEN ? AND ? ORDER BY version DESC, seq DESC LIMIT 1")
_NEWEST_RESET = ("SELECT e.version, e.seq, e.op, e.path, e.value FROM events AS e INDEXED BY events_reshaping"
                 f" WHERE e.stream_id = ? AND e.path = ? AND e.version BETWEEN ? AND ? AND {RESHAPING} AND e.op <> 'extend'"
                 " ORDER BY e.version DESC, e.seq DESC LIMIT 1")

# Distinct paths of a stream by a loose index scan (one seek each), with the last event of each in a range.
_LOOSE_TOUCHED = """
WITH RECURSIVE p(path) AS (
    SELECT (SELECT min(path) FROM events INDEXED BY events_by_path WHERE stream_id = ?1)
    UNION ALL
    SELECT (SELECT min(path) FROM events INDEXED BY events_by_path WHERE stream_id = ?1 AND path > p.path)
    FROM p WHERE p.path IS NOT NULL
    LIMIT ?4)
SELECT path, (SELECT (version << 32) | seq FROM events INDEXED BY events_by_path
              WHERE stream_id = ?1 AND path = p.path AND version BETWEEN ?2 AND ?3 ORDER BY version DESC, seq DESC LIMIT 1)
FROM p WHERE path IS NOT NULL"""

# A stream with its parent's and root's names and its own newest version row (the viewer's stream list).
_SUMMARY = (f"SELECT {S_COLS}, p.name, r.name, v.version, v.created_at, v.usage FROM {{source}}"
            " LEFT JOIN streams AS p ON p.id = s.parent_id"
            " JOIN streams AS r ON r.id = coalesce(s.root_id, s.id)"
            " LEFT JOIN versions AS v ON v.stream_id = s.id"
            " AND v.version = (SELECT max(version) FROM versions WHERE stream_id = s.id)")
_TREE = """WITH RECURSIVE t(id) AS (SELECT ?1 UNION ALL SELECT c.id FROM streams AS c JOIN t ON c.parent_id = t.id LIMIT ?2)
"""
_APPENDS = ("FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ? AND (version, seq) > (?, ?)"
            " AND version >= ? AND version <= ?")

_EXPECTED_TAGS = ("SELECT e.key, e.value, v.stream_id, v.version FROM versions AS v, json_each(v.metadata) AS e"
                  " WHERE v.metadata IS NOT NULL AND (e.type = 'text' OR e.type = 'integer')")
_INDEX_CHECKS = (
    ("lacks", f"{_EXPECTED_TAGS} EXCEPT SELECT key, value, stream_id, version FROM metadata_index"),
    ("has a stray row", f"SELECT key, value, stream_id, version FROM metadata_index EXCEPT {_EXPECTED_TAGS}"),
)


def _version_source(name: str | None, auto: bool | None, meta: Sequence[MetaFilter]) -> tuple[str, list[str], list[Any], str]:
    """FROM clause, WHERE terms, their arguments and the alias that drives the scan for a filtered list of
    versions: the name index, else metadata_index for a str/int metadata value, else versions itself."""
    where: list[str] = []
    args: list[Any] = []
    driver = next((m for m in meta if m.indexed is not None), None) if name is None else None
    if name is not None:
        source, alias = "versions AS v INDEXED BY versions_by_name", "v"
        where.append("v.name = ?")
        args.append(name)
    elif driver is not None:
        source, alias = "metadata_index AS m JOIN versions AS v ON v.stream_id = m.stream_id AND v.version = m.version", "m"
        where += ["m.key = ?", "m.value = ?"]
        args += driver.indexed  # type: ignore[arg-type]
    else:
        source, alias = "versions AS v", "v"
    if auto is not None:
        where.append("v.auto = ?")
        args.append(int(auto))
    for m in meta:
        if m.terms:  # an object of several keys: compared key by key, whatever the stored key order
            for term in m.terms:
                if term.kind == "object":
                    where.append("json_type(v.metadata, ?) = 'object' AND (SELECT count(*) FROM json_each(v.metadata, ?)) = ?")
                    args += [term.path, term.path, term.size]
                elif term.kind == "array":
                    where.append("json_type(v.metadata, ?) = 'array' AND json_array_length(v.metadata, ?) = ?")
                    args += [term.path, term.path, term.size]
                else:
                    where.append("v.metadata -> ? = json(?)")
                    args += [term.path, term.json]
        elif m is not driver:
            where.append("v.metadata -> ? = json(?)")
            args += [m.path, m.json]
    return source, where, args, alias


class Queries(Engine):
    """Log, search, history, diff, verify and stats."""

    # -- queries: log, search, history, diff, verify, stats (schema/002_queries.sql) ---------------
    # Caller strings (names, paths, metadata keys and values) only ever travel as bound parameters: the
    # SQL below is assembled from fixed fragments. INDEXED BY where SQLite, without statistics, would
    # rather scan a stream's events by version than use the path indexes.

    def log_rows(self, segments: Sequence[Segment], *, before: int | None, limit: int | None, name: str | None,
                 auto: bool | None, meta: Sequence[MetaFilter]) -> list[LogRow]:
        """The versions of a lineage that pass the filters, newest first (at most `limit`)."""
        source, where, args, alias = _version_source(name, auto, meta)
        ids = any(self._one("SELECT 1 FROM checkpoint_ids WHERE stream_id = ? AND version BETWEEN ? AND ? LIMIT 1",
                            (seg.stream_id, seg.lo, seg.hi)) for seg in segments)
        columns = _LOG_COLS if ids else _LOG_ROW + ", NULL"  # most lineages have no checkpoint ids
        sql = (f"SELECT {columns} FROM {source} WHERE {' AND '.join(where + [f'{alias}.stream_id = ?', f'{alias}.version BETWEEN ? AND ?'])}"
               f" ORDER BY {alias}.version DESC LIMIT ?")
        out: list[LogRow] = []
        for seg in reversed(segments):
            hi = seg.hi if before is None else min(seg.hi, before - 1)
            wanted = -1 if limit is None else limit - len(out)
            if hi >= seg.lo and wanted:
                out.extend(LogRow(*r) for r in self._rows(sql, [*args, seg.stream_id, seg.lo, hi, wanted]))
        return out

    def search_rows(self, *, name: str | None, meta: Sequence[MetaFilter], limit: int | None) -> list[LogRow]:
        """Stored versions of every stream that pass the filters, newest first."""
        source, where, args, _ = _version_source(name, None, meta)
        tree = ", (SELECT coalesce(s.root_id, s.id) FROM streams AS s WHERE s.id = v.stream_id)"
        sql = f"SELECT {_LOG_COLS}{tree} FROM {source}" + (f" WHERE {' AND '.join(where)}" if where else "")
        return list(map(LogRow._make, self._rows(sql + " ORDER BY v.created_at DESC, v.stream_id, v.version DESC LIMIT ?",
                                                 [*args, -1 if limit is None else limit])))

    def history_rows(self, segments: Sequence[Segment], path: str, ancestors: Sequence[tuple[str, str, bool]],
                     since: int, until: int, limit: int | None) -> list[HistoryRow]:
        """Events at `path`, below it, and those at its ancestors that replace or remove it, newest first.

        `ancestors` are (path, path relative to it, True when the ancestor is a list): a list ancestor is
        read through events_reshaping, so its appends are never scanned (nor its sets to something that
        is not a list: query._creations finds those).
        """
        below = child_ranges(path)
        out: list[HistoryRow] = []
        for seg in reversed(segments):
            lo, hi = max(seg.lo, since), min(seg.hi, until)
            wanted = -1 if limit is None else limit - len(out)
            if lo > hi or not wanted:
                continue
            span = (lo, hi, wanted)
            rows = self._rows(_HISTORY.format(value="e.value", index="events_by_path", where="e.path = ?"),
                              (seg.stream_id, path, *span))
            more = []
            for start, stop in below:
                more += self._rows(_HISTORY.format(value="e.value", index="events_by_path", where="e.path >= ? AND e.path < ?"),
                                   (seg.stream_id, start, stop, *span))
            for text, rel, is_list in ancestors:
                index, ops = ("events_reshaping", f"{RESHAPING} AND e.op <> 'extend'") if is_list else ("events_by_path", "e.op IN ('set', 'delete')")
                more += self._rows(_HISTORY.format(value="CASE e.op WHEN 'set' THEN e.value -> ? ELSE e.value END", index=index,
                                                   where=f"e.path = ? AND {ops}"), (rel, seg.stream_id, text, *span))
            if more:
                rows += more
                rows.sort(key=lambda r: (r[1], r[2]), reverse=True)
            out.extend(map(HistoryRow._make, rows if limit is None else rows[:wanted]))
        return out

    # history: the append or extend that created a list item

    def list_resets(self, segments: Sequence[Segment], path: str, upto: int) -> list[tuple[Any, ...]]:
        """Events through version `upto` that change the length of the list at `path` other than by
        appending, oldest first: at `path` itself (a list set, delete, truncate or extend) and deletes
        below it (the caller keeps those of its items). Rows are (stream_id, version, seq, op, path, n):
        n is the length of a set's or extend's list, or the length a truncate keeps. From events_reshaping."""
        out: list[tuple[Any, ...]] = []
        n = "CASE e.op WHEN 'truncate' THEN CAST(e.value AS INTEGER) WHEN 'delete' THEN NULL ELSE json_array_length(e.value) END"
        for seg, lo, hi in clip(segments, 0, upto):
            rows = self._rows(f"SELECT e.stream_id, e.version, e.seq, e.op, e.path, {n} FROM events AS e INDEXED BY events_reshaping"
                              f" WHERE e.stream_id = ? AND e.path = ? AND e.version BETWEEN ? AND ? AND {RESHAPING}",
                              (seg.stream_id, path, lo, hi))
            rows += self._rows(f"SELECT e.stream_id, e.version, e.seq, e.op, e.path, NULL FROM events AS e INDEXED BY events_reshaping"
                               f" WHERE e.stream_id = ? AND e.path >= ? AND e.path < ? AND e.version BETWEEN ? AND ?"
                               f" AND {RESHAPING} AND e.op = 'delete'", (seg.stream_id, path + "[", path + "\\", lo, hi))
            out += sorted(rows, key=lambda r: (r[1], r[2]))
        return out

    def replacements(self, segments: Sequence[Segment], path: str, rel: str, upto: int) -> list[tuple[Any, ...]]:
        """Sets and deletes at exactly `path` through version `upto`, oldest first, as (stream_id, version,
        seq, op, path, n, tagged): n is the length of the list at `rel` inside a set's value (None when
        there is none), tagged whether the value holds tagged forms that could hide it from JSON paths."""
        out: list[tuple[Any, ...]] = []
        for seg, lo, hi in clip(segments, 0, upto):
            out += self._rows("SELECT stream_id, version, seq, op, path, CASE WHEN op = 'set' AND json_type(value, ?1) = 'array'"
                              " THEN json_array_length(value, ?1) END, op = 'set' AND instr(value, '{\"$') > 0"
                              " FROM events INDEXED BY events_by_path WHERE stream_id = ?2 AND path = ?3 AND version BETWEEN ?4 AND ?5"
                              " AND op IN ('set', 'delete') ORDER BY version, seq", (rel, seg.stream_id, path, lo, hi))
        return out

    def counts_between(self, segments: Sequence[Segment], path: str,
                       spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[int]:
        """For each span (after, before) of event positions (version, seq), how many events lie at exactly
        `path` strictly between them: one statement per segment, an index-only count per span."""
        bounds = json_list([[*after, *before] for after, before in spans])
        totals = [0] * len(spans)
        for seg in segments:
            rows = self._rows(
                "SELECT s.key, (SELECT count(*) FROM events INDEXED BY events_by_path WHERE stream_id = ?1 AND path = ?2"
                " AND version BETWEEN max(?3, s.value ->> 0) AND min(?4, s.value ->> 2)"
                " AND (version, seq) > (s.value ->> 0, s.value ->> 1) AND (version, seq) < (s.value ->> 2, s.value ->> 3))"
                " FROM json_each(?5) AS s", (seg.stream_id, path, seg.lo, seg.hi, bounds))
            for i, n in rows:
                totals[i] += n
        return totals

    def last_ops_between(self, segments: Sequence[Segment], path: str,
                         spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[str | None]:
        """For each span (after, before) of event positions, the op of the last event at exactly `path`
        strictly between them (None when none): one statement per segment, one index search per span."""
        bounds = json_list([[*after, *before] for after, before in spans])
        ops: list[str | None] = [None] * len(spans)
        for seg in segments:  # oldest first: a later segment's event is the later one
            rows = self._rows(
                "SELECT s.key, (SELECT op FROM events INDEXED BY events_by_path WHERE stream_id = ?1 AND path = ?2"
                " AND version BETWEEN max(?3, s.value ->> 0) AND min(?4, s.value ->> 2)"
                " AND (version, seq) > (s.value ->> 0, s.value ->> 1) AND (version, seq) < (s.value ->> 2, s.value ->> 3)"
                " ORDER BY version DESC, seq DESC LIMIT 1)"
                " FROM json_each(?5) AS s", (seg.stream_id, path, seg.lo, seg.hi, bounds))
            for i, op in rows:
                if op is not None:
                    ops[i] = op
        return ops

    def nth_between(self, segments: Sequence[Segment], path: str, after: tuple[int, int], before: tuple[int, int],
                    n: int) -> tuple[Any, ...] | None:
        """The `n`-th (from 0) event at exactly `path` strictly between events `after` and `before`, as
        (stream_id, version, seq, op, value), or None when there are not that many."""
        for seg, lo, hi in clip(segments, after[0] - 1, before[0]):
            args = (seg.stream_id, path, lo, hi, *after, *before)
            where = ("FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ? AND version BETWEEN ? AND ?"
                     " AND (version, seq) > (?, ?) AND (version, seq) < (?, ?)")
            row = self._one(f"SELECT stream_id, version, seq, op, value {where} ORDER BY version, seq LIMIT 1 OFFSET ?", (*args, n))
            if row is not None:
                return row
            n -= self._one(f"SELECT count(*) {where}", args)[0]
        return None

    # diff: what a range of events touched, and the value or list length of a path at a version

    def touched(self, seg: Segment, after: int, upto: int) -> dict[str, tuple[int, int]]:
        """Every path with an event in versions (after, upto] of one segment -> (version, seq) of its last.

        A range of few events is grouped directly; a long one is answered by a loose scan of the path
        index (one seek per distinct path), unless the stream has more distinct paths than that is worth.
        """
        lo, hi = max(seg.lo, after + 1), min(seg.hi, upto)
        if lo > hi:
            return {}
        rows = None
        if hi - lo >= _DIRECT_GROUP_LIMIT:  # versions: a lower bound of the events in the range
            cap = (hi - lo) // 4
            rows = self._rows(_LOOSE_TOUCHED, (seg.stream_id, lo, hi, cap + 1))
            if len(rows) > cap:
                rows = None
        if rows is None:
            rows = self._rows("SELECT path, max((version << 32) | seq) FROM events WHERE stream_id = ? AND version BETWEEN ? AND ?"
                              " GROUP BY path", (seg.stream_id, lo, hi))
        return {path: (last >> 32, last & 0xFFFFFFFF) for path, last in rows if last is not None}

    def event_at(self, owner: StreamRef, version: int, seq: int) -> tuple[str, str, str | None]:
        return self._one("SELECT op, path, value FROM events WHERE stream_id = ? AND version = ? AND seq = ?",
                         (owner.stream_id, version, seq))

    def newest_event(self, segments: Sequence[Segment], path: str, upto: int, *, reset: bool = False) -> EventRow | None:
        """The last event at exactly `path` with version <= upto (with `reset`: the last set of a list,
        delete or truncate there, read from events_reshaping)."""
        sql = _NEWEST_RESET if reset else _NEWEST
        for seg in reversed(segments):
            hi = min(seg.hi, upto)
            if hi >= seg.lo:
                row = self._one(sql, (seg.stream_id, path, seg.lo, hi))
                if row:
                    return row
        return None

    def growth(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> int:
        """How many items appends and extends at exactly `path` added after event `after` through `upto`.

        Appends are counted in the path index without reading them; extends (rare) are read from
        events_reshaping. The caller knows that nothing reset the list in that range.
        """
        total = 0
        for seg, lo, hi in clip(segments, after[0] - 1, upto):
            args = (seg.stream_id, path, after[0], after[1], lo, hi)
            count = self._one("SELECT count(*) FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ?"
                              " AND (version, seq) > (?, ?) AND version BETWEEN ? AND ?", args)[0]
            extends, items = self._one(
                f"SELECT count(*), coalesce(sum(json_array_length(e.value)), 0) FROM events AS e INDEXED BY events_reshaping"
                f" WHERE e.stream_id = ? AND e.path = ? AND (e.version, e.seq) > (?, ?) AND e.version BETWEEN ? AND ?"
                f" AND {RESHAPING} AND e.op = 'extend'", args)
            total += count - extends + items
        return total

    def only_grown(self, segments: Sequence[Segment], path: str, after: int, upto: int) -> int | None:
        """See the contract. A probe of events_reshaping and of the path index below `path`, and a count of
        the appends in the path index (extends, rare, are read from events_reshaping)."""
        if self.touched_below(segments, path, (after + 1, -1), upto):
            return None
        total = 0
        for seg, lo, hi in clip(segments, after, upto):
            args = (seg.stream_id, path, lo, hi)
            reshaped, extends, items = self._one(
                f"SELECT count(*) FILTER (WHERE e.op <> 'extend'), count(*) FILTER (WHERE e.op = 'extend'),"
                f" coalesce(sum(json_array_length(e.value)) FILTER (WHERE e.op = 'extend'), 0)"
                f" FROM events AS e INDEXED BY events_reshaping WHERE e.stream_id = ? AND e.path = ?"
                f" AND e.version BETWEEN ? AND ? AND {RESHAPING}", args)
            if reshaped:
                return None
            appends = self._one("SELECT count(*) FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ?"
                                " AND version BETWEEN ? AND ?", args)[0]
            total += appends - extends + items
        return total

    def item_deletes(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> list[str]:
        """Paths of deletes below the list at `path` after event `after` through `upto` (the caller keeps
        those of its items)."""
        out: list[str] = []
        for seg, lo, hi in clip(segments, after[0] - 1, upto):
            out.extend(r[0] for r in self._rows(
                f"SELECT e.path FROM events AS e INDEXED BY events_reshaping WHERE e.stream_id = ? AND e.path >= ? AND e.path < ?"
                f" AND (e.version, e.seq) > (?, ?) AND e.version BETWEEN ? AND ? AND {RESHAPING} AND e.op = 'delete'",
                (seg.stream_id, path + "[", path + "\\", after[0], after[1], lo, hi)))
        return out

    def json_at(self, segments: Sequence[Segment], version: int, seq: int, rel: str, *, text: bool = False
                ) -> tuple[str | None, int | None, str | None, bool]:
        """(JSON type, array length, JSON text when `text`) of the part at `rel` ('$': all) of one event's
        value, and whether the value holds tagged forms (a "$dict" hides its keys from JSON paths)."""
        owner = next(s for s in segments if s.lo <= version <= s.hi)
        return self._one("SELECT json_type(value, ?1), json_array_length(value, ?1), CASE WHEN ?2 THEN value -> ?1 END,"
                         " instr(value, '{\"$') > 0 FROM events WHERE stream_id = ?3 AND version = ?4 AND seq = ?5",
                         (rel, text, owner.stream_id, version, seq))

    def touched_below(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> bool:
        """Whether any event below `path` lies after event `after` through version `upto`."""
        for seg, lo, hi in clip(segments, after[0] - 1, upto):
            for start, stop in child_ranges(path):
                if self._one("SELECT 1 FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path >= ? AND path < ?"
                             " AND (version, seq) > (?, ?) AND version BETWEEN ? AND ? LIMIT 1",
                             (seg.stream_id, start, stop, after[0], after[1], lo, hi)):
                    return True
        return False

    # the viewer (eventckpt serve): stream lists, a tree's streams, per-version sizes, list windows

    def stream_page(self, before_id: int | None, limit: int) -> list[SummaryRow]:
        """At most `limit` streams with id < before_id (all when None), newest first, each with its
        parent's and tree root's names and its own newest version row: one primary-key range of
        streams and, per stream, primary-key searches (O(limit))."""
        sql = _SUMMARY.format(source="streams AS s") + " WHERE s.id < ? ORDER BY s.id DESC LIMIT ?"
        return [_summary(r) for r in self._rows(sql, (2**63 - 1 if before_id is None else before_id, limit))]

    def stream_tree(self, tree_id: int, limit: int | None) -> list[SummaryRow]:
        """Found through streams_by_parent from the root (a tree's id is its root's)."""
        sql = _TREE + _SUMMARY.format(source="t JOIN streams AS s ON s.id = t.id") + " ORDER BY s.id"
        return [_summary(r) for r in self._rows(sql, (tree_id, -1 if limit is None else limit))]

    def version_sizes(self, segments: Sequence[Segment], since: int, until: int, limit: int | None) -> list[tuple[int, int, int]]:
        """(version, event count, event bytes) of the lineage's versions in since..until, oldest first,
        at most `limit`: primary-key ranges of versions."""
        out: list[tuple[int, int, int]] = []
        for seg in segments:
            lo, hi = max(seg.lo, since), min(seg.hi, until)
            wanted = -1 if limit is None else limit - len(out)
            if lo <= hi and wanted:
                out.extend(self._rows("SELECT version, event_count, event_bytes FROM versions WHERE stream_id = ?"
                                      " AND version >= ? AND version <= ? ORDER BY version LIMIT ?",
                                      (seg.stream_id, lo, hi, wanted)))
        return out

    def appended(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int, offset: int,
                 limit: int) -> list[str] | None:
        """The JSON values of the events at exactly `path` after event `after` through version `upto`, in
        order: from the `offset`-th (0-based; a negative offset counts from the end, -1 being the last),
        at most `limit` (-1: all); None when an extend lies in that range.

        For a window of a list that nothing but appends and extends changed since `after` (the caller
        checks): without extends, the n-th event is the n-th item appended. The window's first event is
        found by stepping over the covering path index from the nearer end (no value before the window
        is read, and nothing is counted unless the window starts in an earlier segment).
        """
        parts = list(clip(segments, after[0] - 1, upto))
        for seg, lo, hi in parts:
            if self._one(f"SELECT 1 FROM events AS e INDEXED BY events_reshaping WHERE e.stream_id = ? AND e.path = ?"
                         f" AND (e.version, e.seq) > (?, ?) AND e.version >= ? AND e.version <= ? AND {RESHAPING}"
                         f" AND e.op = 'extend' LIMIT 1", (seg.stream_id, path, after[0], after[1], lo, hi)):
                return None
        order, skip = ("ASC", offset) if offset >= 0 else ("DESC", -offset - 1)
        for i in range(len(parts)) if offset >= 0 else reversed(range(len(parts))):
            seg, lo, hi = parts[i]
            args = (seg.stream_id, path, after[0], after[1], lo, hi)
            first = self._one(f"SELECT version, seq {_APPENDS} ORDER BY version {order}, seq {order} LIMIT 1 OFFSET ?",
                              (*args, skip))
            if first is None:  # the window starts in another segment
                skip -= self._one(f"SELECT count(*) {_APPENDS}", args)[0]
                continue
            out: list[str] = []
            for j, (seg, lo, hi) in enumerate(parts[i:]):
                if limit != -1 and len(out) >= limit:
                    break
                begin = first if j == 0 else max((lo, 0), (after[0], after[1] + 1))
                out += [r[0] for r in self._rows(  # from `begin` alone: SQLite seeks the first row-value bound only
                    "SELECT value FROM events INDEXED BY events_by_path WHERE stream_id = ? AND path = ?"
                    " AND (version, seq) >= (?, ?) AND version <= ? ORDER BY version, seq LIMIT ?",
                    (seg.stream_id, path, begin[0], begin[1], hi, -1 if limit == -1 else limit - len(out)))]
            return out
        if offset < 0 and limit != 0:  # the window starts before the first event: from the first on
            return self.appended(segments, path, after, upto, 0, -1 if limit == -1 else max(limit - skip - 1, 0))
        return []

    # verify and stats

    def streams_all(self) -> list[StreamRow]:
        return [StreamRow(*r) for r in self._rows(f"SELECT {STREAM_COLS} FROM streams ORDER BY id")]

    def extent(self, stream: StreamRef) -> tuple[int, int]:
        bounds = [self._one(f"SELECT min(version), max(version) FROM {t} WHERE stream_id = ?", (stream.stream_id,))
                  for t in ("versions", "events", "snapshots")]
        return min((lo for lo, _ in bounds if lo is not None), default=0), max((hi or 0 for _, hi in bounds), default=0)

    def snapshot_versions(self, stream: StreamRef) -> list[int]:
        return [r[0] for r in self._rows("SELECT version FROM snapshots WHERE stream_id = ? ORDER BY version",
                                         (stream.stream_id,))]

    def snapshot_row(self, owner: StreamRef, version: int) -> tuple[str, str]:
        return self._one("SELECT state, manifest FROM snapshots WHERE stream_id = ? AND version = ?",
                         (owner.stream_id, version))

    def integrity_problems(self) -> list[str]:
        """What PRAGMA integrity_check and foreign_key_check find, and metadata_index rows that disagree
        with versions.metadata (empty when the file is sound)."""
        out = [r[0] for r in self._rows("PRAGMA integrity_check") if r[0] != "ok"]
        out += [f"foreign key: {table} row {rowid} has no {parent} row" for table, rowid, parent, _ in self._rows("PRAGMA foreign_key_check")]
        for label, sql in _INDEX_CHECKS:
            out += [f"metadata_index {label}: stream {r[2]} version {r[3]} {r[0]!r}={r[1]!r}" for r in self._rows(sql)]
        return out

    def totals(self) -> dict[str, int]:
        """Counts and bytes of the whole file (O(file): for stats, not for hot paths)."""
        streams, forks = self._one("SELECT count(*), count(parent_id) FROM streams")
        versions, event_bytes = self._one("SELECT count(*), coalesce(sum(event_bytes), 0) FROM versions")
        events = self._one("SELECT count(*) FROM events")[0]
        snapshots, snapshot_bytes = self._one("SELECT count(*), coalesce(sum(length(CAST(state AS BLOB)) + length(CAST(manifest AS BLOB))), 0) FROM snapshots")
        page_size, pages, free = (self._one(f"PRAGMA {p}")[0] for p in ("page_size", "page_count", "freelist_count"))
        return {"streams": streams, "forks": forks, "versions": versions, "events": events, "event_bytes": event_bytes,
                "snapshots": snapshots, "snapshot_bytes": snapshot_bytes, "database_bytes": page_size * pages,
                "free_bytes": page_size * free}

    def query(self, sql: str, args: Sequence[Any] = ()) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run a caller's own SQL read-only and return its column names and rows (the `sql` command).

        An authorizer allows reading only: SELECT (recursive CTEs and functions included, but not
        load_extension), EXPLAIN, and PRAGMAs that read. Every statement that would write or change the
        connection (INSERT/UPDATE/DELETE, CREATE/DROP/ALTER, ATTACH/DETACH, VACUUM (INTO), REINDEX,
        ANALYZE, BEGIN/SAVEPOINT, writing PRAGMAs) is refused with ReadOnlyStoreError before it runs."""
        refused: list[str] = []

        def authorize(action: int, first: str | None, second: str | None, db: str | None, trigger: str | None) -> int:
            if action in _READ_ACTIONS:
                return apsw.SQLITE_OK
            if action == apsw.SQLITE_FUNCTION and (second or "").lower() not in _UNSAFE_FUNCTIONS:
                return apsw.SQLITE_OK
            if action == apsw.SQLITE_PRAGMA and ((first or "").lower() in _READ_PRAGMAS_WITH_ARGUMENT
                                                 or ((first or "").lower() in _READ_PRAGMAS and second is None)):
                return apsw.SQLITE_OK
            refused.append(_describe(action, first, second))
            return apsw.SQLITE_DENY

        cursor = self.conn.cursor()
        self.conn.authorizer = authorize
        try:
            # one statement, as on PostgreSQL: SQLite would run them all and name only the first's columns.
            # Each is prepared (not run) first, so a write among them is refused as a write.
            rest, statements = apsw.ext.query_info(self.conn, sql, args).query_remaining, 1
            while rest is not None and not _NOTHING_MORE.fullmatch(rest):
                rest, statements = apsw.ext.query_info(self.conn, rest).query_remaining, statements + 1
            if statements > 1:
                raise errors.InvalidArgumentError("sql", sql, "one statement at a time (another follows the first ';')")
            cursor.execute(sql, args)
            try:
                columns = [d[0] for d in cursor.get_description()]
            except apsw.ExecutionCompleteError:
                return [], []
            return columns, [tuple(r) for r in cursor]
        except (apsw.AuthError, apsw.SQLError) as exc:
            if not refused:
                raise errors.InvalidArgumentError("sql", sql, str(exc)) from None
            shown = refused[0]
            if "sqlite_master" in shown or "sqlite_temp_master" in shown:  # what CREATE and DROP do first
                shown = "changing the schema (CREATE, DROP)"
            raise errors.ReadOnlyStoreError(f"{self.path}: sql runs read-only queries; {shown} is not allowed",
                                            code="readonly") from None
        except apsw.Error as exc:
            self._fail(exc, sql)
        except UnicodeDecodeError as exc:
            raise undecodable(exc, self.path, sql) from None
        finally:
            self.conn.authorizer = None


_READ_ACTIONS = frozenset((apsw.SQLITE_SELECT, apsw.SQLITE_READ, apsw.SQLITE_RECURSIVE))
_UNSAFE_FUNCTIONS = frozenset(("load_extension", "fts3_tokenizer"))
_READ_PRAGMAS = frozenset((
    "application_id", "user_version", "schema_version", "data_version", "journal_mode", "page_size", "page_count",
    "freelist_count", "encoding", "auto_vacuum", "foreign_keys", "synchronous", "cache_size", "busy_timeout",
    "compile_options", "database_list", "collation_list", "function_list", "module_list", "pragma_list",
))
_READ_PRAGMAS_WITH_ARGUMENT = frozenset((
    "table_info", "table_xinfo", "table_list", "index_info", "index_xinfo", "index_list", "foreign_key_list",
    "integrity_check", "quick_check", "foreign_key_check",
))
_ACTION_NAMES = {getattr(apsw, n): n[7:].replace("_", " ") for n in dir(apsw) if n.startswith("SQLITE_") and
                 type(getattr(apsw, n)) is int and n[7:] in (
                     "CREATE_INDEX CREATE_TABLE CREATE_TEMP_INDEX CREATE_TEMP_TABLE CREATE_TEMP_TRIGGER CREATE_TEMP_VIEW"
                     " CREATE_TRIGGER CREATE_VIEW DELETE DROP_INDEX DROP_TABLE DROP_TEMP_INDEX DROP_TEMP_TABLE"
                     " DROP_TEMP_TRIGGER DROP_TEMP_VIEW DROP_TRIGGER DROP_VIEW INSERT UPDATE ATTACH DETACH ALTER_TABLE"
                     " REINDEX ANALYZE CREATE_VTABLE DROP_VTABLE TRANSACTION SAVEPOINT").split()}


def _describe(action: int, first: str | None, second: str | None) -> str:
    """What a refused authorizer action was, for the error message."""
    if action == apsw.SQLITE_PRAGMA:
        return f"PRAGMA {first}" + (f" = {second}" if second is not None else "")
    if action == apsw.SQLITE_FUNCTION:
        return f"the function {second}()"
    if action == apsw.SQLITE_ALTER_TABLE:
        return f"ALTER TABLE {second}"
    if action == apsw.SQLITE_ATTACH:
        return "ATTACH (and VACUUM, which attaches its target)"
    if action in (apsw.SQLITE_TRANSACTION, apsw.SQLITE_SAVEPOINT):
        return f"{_ACTION_NAMES[action]} {first}"
    name = _ACTION_NAMES.get(action, f"action {action}")
    return f"{name} {first}" if first else name


def _summary(row: Sequence[Any]) -> SummaryRow:
    return SummaryRow(StreamRow(*row[:6]), *row[6:])
