"""Log, search, history, diff, verify and stats on PostgreSQL (schema/postgresql/002_queries.sql).

The same questions as the SQLite journal asks, in PostgreSQL's dialect: JSON paths are read with `#>`
on the stored text cast to json (which keeps each value's own text), metadata values are compared as
stored JSON text (so 1 and 1.0 stay apart, as on SQLite; an object of several keys key by key, so their
order does not matter), and caller strings only ever travel as bound parameters.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from ...paths import child_ranges, relative_parts
from ..rows import EventRow, HistoryRow, LogRow, MetaFilter, Segment, StreamRef, StreamRow, SummaryRow, clip
from .engine import Engine, with_nul
from .tables import S_COLS

RESHAPING = "(e.op IN ('delete', 'truncate', 'extend') OR (e.op = 'set' AND left(e.value, 1) = '['))"
_DIRECT_GROUP_LIMIT = 500  # versions in a range below which grouping its events beats seeking every path

_LOG_ROW = "v.stream_id, v.version, v.created_at, v.name, v.auto, v.metadata, v.usage"
_LOG_ID = ("(SELECT c.checkpoint_id FROM eventckpt.checkpoint_ids AS c WHERE c.tree_id = v.tree_id"
           " AND c.stream_id = v.stream_id AND c.version = v.version)")

_HISTORY = ("SELECT e.stream_id, e.version, e.seq, e.op, e.path, {value}, v.created_at FROM eventckpt.events AS e"
            " JOIN eventckpt.versions AS v ON v.tree_id = e.tree_id AND v.stream_id = e.stream_id AND v.version = e.version"
            " WHERE e.tree_id = %(t)s AND e.stream_id = %(s)s AND {where} AND e.version BETWEEN %(lo)s AND %(hi)s"
            " ORDER BY e.version DESC, e.seq DESC LIMIT %(limit)s")

_TYPES = {"string": "text", "array": "array", "object": "object", "null": "null"}


def json_path(rel: str) -> list[str]:
    """A stored path relative to a value ('$.a[3]') as PostgreSQL's text[] path ({a,3})."""
    return [str(k) for k in relative_parts(rel)]


def _sqlite_type(kind: str | None, text: str | None) -> str | None:
    """json_typeof's answer in SQLite's json_type names (the contract's)."""
    if kind is None:
        return None
    if kind == "boolean":
        return "true" if text == "true" else "false"
    if kind == "number":
        return "real" if text is not None and any(c in text for c in ".eE") else "integer"
    return _TYPES.get(kind, kind)


def _version_source(name: str | None, auto: bool | None, meta: Sequence[MetaFilter]) -> tuple[str, list[str], dict[str, Any]]:
    """FROM clause, WHERE terms and their arguments for a filtered list of versions (`v`): the name index,
    else metadata_index for a str/int metadata value, else the versions themselves."""
    where: list[str] = []
    args: dict[str, Any] = {}
    driver = next((m for m in meta if m.indexed is not None), None) if name is None else None
    if name is not None:
        where.append("v.name = %(name)s")
        args["name"] = name
        source = "eventckpt.versions AS v"
    elif driver is not None:
        source = ("eventckpt.metadata_index AS m JOIN eventckpt.versions AS v ON v.tree_id = m.tree_id"
                  " AND v.stream_id = m.stream_id AND v.version = m.version")
        where += ["m.key = %(mkey)s", "m.value = eventckpt.json_safe(%(mvalue)s)::jsonb"]
        args["mkey"], args["mvalue"] = driver.key, driver.json
    else:
        source = "eventckpt.versions AS v"
    if auto is not None:
        where.append("v.auto = %(auto)s")
        args["auto"] = int(auto)
    for i, m in enumerate(meta):  # the indexed value too: jsonb holds \ufffe and a NUL alike (json_safe)
        if not m.terms:
            where.append(f"(eventckpt.json_safe(v.metadata)::json -> %(mk{i})s)::text = eventckpt.json_safe(%(mv{i})s)")
            args[f"mk{i}"], args[f"mv{i}"] = m.key, m.json
            continue
        # An object of several keys: compared key by key, whatever the stored key order (jsonb would ignore
        # the order too, but it also equates 1 and 1.0). CASE, because json_object_keys fails on a non-object.
        for j, term in enumerate(m.terms):
            at, p = f"(eventckpt.json_safe(v.metadata)::json #> %(mp{i}_{j})s)", f"mp{i}_{j}"
            args[p] = [str(part) for part in term.parts]
            if term.kind == "object":
                where.append(f"CASE WHEN json_typeof({at}) = 'object' THEN (SELECT count(*) FROM json_object_keys({at}))"
                             f" = %(mn{i}_{j})s ELSE false END")
            elif term.kind == "array":
                where.append(f"CASE WHEN json_typeof({at}) = 'array' THEN json_array_length({at}) = %(mn{i}_{j})s ELSE false END")
            else:
                where.append(f"{at}::text = eventckpt.json_safe(%(mn{i}_{j})s)")
            args[f"mn{i}_{j}"] = term.json if term.kind == "value" else term.size
    return source, where, args


class Queries(Engine):
    """Log, search, history, diff, verify and stats."""

    def log_rows(self, segments: Sequence[Segment], *, before: int | None, limit: int | None, name: str | None,
                 auto: bool | None, meta: Sequence[MetaFilter]) -> list[LogRow]:
        source, where, args = _version_source(name, auto, meta)
        where += ["v.tree_id = %(t)s", "v.stream_id = %(s)s", "v.version BETWEEN %(lo)s AND %(hi)s"]
        if "metadata_index" in source:
            where += ["m.tree_id = %(t)s", "m.stream_id = %(s)s"]
        sql = f"SELECT {_LOG_ROW}, {_LOG_ID} FROM {source} WHERE {' AND '.join(where)} ORDER BY v.version DESC LIMIT %(limit)s"
        out: list[LogRow] = []
        for seg in reversed(segments):
            hi = seg.hi if before is None else min(seg.hi, before - 1)
            wanted = None if limit is None else limit - len(out)
            if hi >= seg.lo and wanted != 0:
                rows = self._rows(sql, {**args, "t": seg.tree_id, "s": seg.stream_id, "lo": seg.lo, "hi": hi, "limit": wanted})
                out.extend(LogRow(*r) for r in rows)
        return out

    def search_rows(self, *, name: str | None, meta: Sequence[MetaFilter], limit: int | None) -> list[LogRow]:
        source, where, args = _version_source(name, None, meta)
        sql = (f"SELECT {_LOG_ROW}, {_LOG_ID}, v.tree_id FROM {source}" + (f" WHERE {' AND '.join(where)}" if where else "")
               + " ORDER BY v.created_at DESC, v.stream_id, v.version DESC LIMIT %(limit)s")
        return [LogRow(*r) for r in self._rows(sql, {**args, "limit": limit})]

    def history_rows(self, segments: Sequence[Segment], path: str, ancestors: Sequence[tuple[str, str, bool]],
                     since: int, until: int, limit: int | None) -> list[HistoryRow]:
        below = child_ranges(path)
        out: list[HistoryRow] = []
        for seg in reversed(segments):
            lo, hi = max(seg.lo, since), min(seg.hi, until)
            wanted = None if limit is None else limit - len(out)
            if lo > hi or wanted == 0:
                continue
            span = {"t": seg.tree_id, "s": seg.stream_id, "lo": lo, "hi": hi, "limit": wanted}
            rows = self._rows(_HISTORY.format(value="e.value", where="e.path = %(path)s"), {**span, "path": path})
            more = []
            for start, stop in below:
                more += self._rows(_HISTORY.format(value="e.value", where="e.path >= %(a)s AND e.path < %(b)s"),
                                   {**span, "a": start, "b": stop})
            for text, rel, is_list in ancestors:
                ops = f"{RESHAPING} AND e.op <> 'extend'" if is_list else "e.op IN ('set', 'delete')"
                more += self._rows(_HISTORY.format(value="CASE e.op WHEN 'set' THEN (eventckpt.json_safe(e.value)::json #> %(rel)s)::text"
                                                         " ELSE e.value END", where=f"e.path = %(path)s AND {ops}"),
                                   {**span, "path": text, "rel": json_path(rel)})
            if more:
                rows += more
                rows.sort(key=lambda r: (r[1], r[2]), reverse=True)
            out.extend(HistoryRow(*r[:5], with_nul(r[5]), r[6]) for r in (rows if wanted is None else rows[:wanted]))
        return out

    # history: the append or extend that created a list item

    def list_resets(self, segments: Sequence[Segment], path: str, upto: int) -> list[tuple[Any, ...]]:
        n = ("CASE e.op WHEN 'truncate' THEN e.value::bigint WHEN 'delete' THEN NULL"
             " ELSE json_array_length(e.value::json) END")
        out: list[tuple[Any, ...]] = []
        for seg, lo, hi in clip(segments, 0, upto):
            key = (seg.tree_id, seg.stream_id)
            rows = self._rows(f"SELECT e.stream_id, e.version, e.seq, e.op, e.path, {n} FROM eventckpt.events AS e"
                              f" WHERE e.tree_id = %s AND e.stream_id = %s AND e.path = %s AND e.version BETWEEN %s AND %s"
                              f" AND {RESHAPING}", (*key, path, lo, hi))
            rows += self._rows(f"SELECT e.stream_id, e.version, e.seq, e.op, e.path, NULL FROM eventckpt.events AS e"
                               f" WHERE e.tree_id = %s AND e.stream_id = %s AND e.path >= %s AND e.path < %s"
                               f" AND e.version BETWEEN %s AND %s AND {RESHAPING} AND e.op = 'delete'",
                               (*key, path + "[", path + "\\", lo, hi))
            out += sorted((tuple(r) for r in rows), key=lambda r: (r[1], r[2]))
        return out

    def replacements(self, segments: Sequence[Segment], path: str, rel: str, upto: int) -> list[tuple[Any, ...]]:
        out: list[tuple[Any, ...]] = []
        for seg, lo, hi in clip(segments, 0, upto):
            out += [tuple(r) for r in self._rows(
                "SELECT x.stream_id, x.version, x.seq, x.op, x.path,"
                " CASE WHEN x.op = 'set' AND json_typeof(x.part) = 'array' THEN json_array_length(x.part) END,"
                " x.op = 'set' AND strpos(x.value, '{\"$') > 0"
                " FROM (SELECT e.*, CASE WHEN e.op = 'set' THEN eventckpt.json_safe(e.value)::json #> %s END AS part FROM eventckpt.events AS e"
                " WHERE e.tree_id = %s AND e.stream_id = %s AND e.path = %s AND e.version BETWEEN %s AND %s"
                " AND e.op IN ('set', 'delete')) AS x ORDER BY x.version, x.seq",
                (json_path(rel), seg.tree_id, seg.stream_id, path, lo, hi))]
        return out

    def counts_between(self, segments: Sequence[Segment], path: str,
                       spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[int]:
        totals = [0] * len(spans)
        for rows in self._per_span(segments, path, spans, "count(*) " + _SPAN_EVENTS):
            for i, n in rows:
                totals[int(i) - 1] += int(n)
        return totals

    def last_ops_between(self, segments: Sequence[Segment], path: str,
                         spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> list[str | None]:
        ops: list[str | None] = [None] * len(spans)
        last = "e.op " + _SPAN_EVENTS + " ORDER BY e.version DESC, e.seq DESC LIMIT 1"
        for rows in self._per_span(segments, path, spans, last):  # oldest first: a later segment's event is later
            for i, op in rows:
                if op is not None:
                    ops[int(i) - 1] = op
        return ops

    def _per_span(self, segments: Sequence[Segment], path: str,
                  spans: Sequence[tuple[tuple[int, int], tuple[int, int]]], pick: str) -> Iterator[list[Any]]:
        """For each segment, oldest first: (span number from 1, `pick` over the span's events at `path`) rows,
        one statement per segment. `pick` is this module's own SQL, never a caller's."""
        bounds = _span_bounds(spans)
        for seg in segments:
            yield self._rows(
                f"SELECT s.i, (SELECT {pick}) FROM unnest(%(av)s::bigint[], %(as)s::bigint[], %(bv)s::bigint[],"
                " %(bs)s::bigint[]) WITH ORDINALITY AS s(av, aseq, bv, bseq, i)",
                {"t": seg.tree_id, "s": seg.stream_id, "path": path, "lo": seg.lo, "hi": seg.hi, **bounds})

    def nth_between(self, segments: Sequence[Segment], path: str, after: tuple[int, int], before: tuple[int, int],
                    n: int) -> tuple[Any, ...] | None:
        where = ("FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND path = %s AND version BETWEEN %s AND %s"
                 " AND (version, seq) > (%s, %s) AND (version, seq) < (%s, %s)")
        for seg, lo, hi in clip(segments, after[0] - 1, before[0]):
            args = (seg.tree_id, seg.stream_id, path, lo, hi, *after, *before)
            row = self._one(f"SELECT stream_id, version, seq, op, value {where} ORDER BY version, seq LIMIT 1 OFFSET %s",
                            (*args, n))
            if row is not None:
                return tuple(row)
            n -= int(self._one(f"SELECT count(*) {where}", args)[0])
        return None

    # diff: what a range of events touched, and the value or list length of a path at a version

    def touched(self, seg: Segment, after: int, upto: int) -> dict[str, tuple[int, int]]:
        lo, hi = max(seg.lo, after + 1), min(seg.hi, upto)
        if lo > hi:
            return {}
        key = {"t": seg.tree_id, "s": seg.stream_id, "lo": lo, "hi": hi}
        rows = None
        if hi - lo >= _DIRECT_GROUP_LIMIT:  # a loose scan of the path index: one seek per distinct path
            cap = (hi - lo) // 4
            rows = self._rows(
                """WITH RECURSIVE p(path) AS (
                     SELECT (SELECT min(path) FROM eventckpt.events WHERE tree_id = %(t)s AND stream_id = %(s)s)
                     UNION ALL
                     SELECT (SELECT min(e.path) FROM eventckpt.events AS e WHERE e.tree_id = %(t)s AND e.stream_id = %(s)s
                             AND e.path > p.path)
                     FROM p WHERE p.path IS NOT NULL)
                   SELECT path, (SELECT e.version * 4294967296 + e.seq FROM eventckpt.events AS e
                                 WHERE e.tree_id = %(t)s AND e.stream_id = %(s)s AND e.path = p.path
                                 AND e.version BETWEEN %(lo)s AND %(hi)s ORDER BY e.version DESC, e.seq DESC LIMIT 1)
                   FROM (SELECT path FROM p WHERE path IS NOT NULL LIMIT %(cap)s) AS p""", {**key, "cap": cap + 1})
            if len(rows) > cap:
                rows = None
        if rows is None:
            rows = self._rows("SELECT path, max(version * 4294967296 + seq) FROM eventckpt.events WHERE tree_id = %(t)s"
                              " AND stream_id = %(s)s AND version BETWEEN %(lo)s AND %(hi)s GROUP BY path", key)
        return {path: (int(last) >> 32, int(last) & 0xFFFFFFFF) for path, last in rows if last is not None}

    def newest_event(self, segments: Sequence[Segment], path: str, upto: int, *, reset: bool = False) -> EventRow | None:
        extra = f" AND {RESHAPING} AND e.op <> 'extend'" if reset else ""
        for seg in reversed(segments):
            hi = min(seg.hi, upto)
            if hi >= seg.lo:
                row = self._one(f"SELECT e.version, e.seq, e.op, e.path, e.value FROM eventckpt.events AS e"
                                f" WHERE e.tree_id = %s AND e.stream_id = %s AND e.path = %s AND e.version BETWEEN %s AND %s"
                                f"{extra} ORDER BY e.version DESC, e.seq DESC LIMIT 1",
                                (seg.tree_id, seg.stream_id, path, seg.lo, hi))
                if row:
                    return tuple(row)
        return None

    def growth(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> int:
        total = 0
        for seg, lo, hi in clip(segments, after[0] - 1, upto):
            count, items = self._one(
                "SELECT count(*) FILTER (WHERE e.op = 'append'),"
                " coalesce(sum(json_array_length(e.value::json)) FILTER (WHERE e.op = 'extend'), 0)"
                " FROM eventckpt.events AS e WHERE e.tree_id = %s AND e.stream_id = %s AND e.path = %s"
                " AND (e.version, e.seq) > (%s, %s) AND e.version BETWEEN %s AND %s AND e.op IN ('append', 'extend')",
                (seg.tree_id, seg.stream_id, path, after[0], after[1], lo, hi))
            total += int(count) + int(items)
        return total

    def only_grown(self, segments: Sequence[Segment], path: str, after: int, upto: int) -> int | None:
        if self.touched_below(segments, path, (after + 1, -1), upto):
            return None
        total = 0
        for seg, lo, hi in clip(segments, after, upto):
            other, appends, items = self._one(
                f"SELECT count(*) FILTER (WHERE {RESHAPING} AND e.op <> 'extend'), count(*) FILTER (WHERE e.op = 'append'),"
                " coalesce(sum(json_array_length(e.value::json)) FILTER (WHERE e.op = 'extend'), 0)"
                f" FROM eventckpt.events AS e WHERE e.tree_id = %s AND e.stream_id = %s AND e.path = %s"
                f" AND e.version BETWEEN %s AND %s", (seg.tree_id, seg.stream_id, path, lo, hi))
            if other:
                return None
            total += int(appends) + int(items)
        return total

    def item_deletes(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> list[str]:
        out: list[str] = []
        for seg, lo, hi in clip(segments, after[0] - 1, upto):
            out.extend(r[0] for r in self._rows(
                f"SELECT e.path FROM eventckpt.events AS e WHERE e.tree_id = %s AND e.stream_id = %s AND e.path >= %s"
                f" AND e.path < %s AND (e.version, e.seq) > (%s, %s) AND e.version BETWEEN %s AND %s AND {RESHAPING}"
                " AND e.op = 'delete'", (seg.tree_id, seg.stream_id, path + "[", path + "\\", after[0], after[1], lo, hi)))
        return out

    def json_at(self, segments: Sequence[Segment], version: int, seq: int, rel: str, *, text: bool = False
                ) -> tuple[str | None, int | None, str | None, bool]:
        owner = next(s for s in segments if s.lo <= version <= s.hi)
        row = self._one(
            "SELECT json_typeof(x.part), CASE WHEN json_typeof(x.part) = 'array' THEN json_array_length(x.part) END,"
            " x.part::text, strpos(x.value, '{\"$') > 0 FROM (SELECT e.value, eventckpt.json_safe(e.value)::json #> %s AS part"
            " FROM eventckpt.events AS e WHERE e.tree_id = %s AND e.stream_id = %s AND e.version = %s AND e.seq = %s) AS x",
            (json_path(rel), owner.tree_id, owner.stream_id, version, seq))
        if row is None:
            return None, None, None, False
        kind, length, part, tagged = row
        return _sqlite_type(kind, part), length, with_nul(part) if text else None, bool(tagged)

    def touched_below(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int) -> bool:
        for seg, lo, hi in clip(segments, after[0] - 1, upto):
            for start, stop in child_ranges(path):
                if self._one("SELECT 1 FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND path >= %s"
                             " AND path < %s AND (version, seq) > (%s, %s) AND version BETWEEN %s AND %s LIMIT 1",
                             (seg.tree_id, seg.stream_id, start, stop, after[0], after[1], lo, hi)):
                    return True
        return False

    # listings and partial reads (the viewer)

    _SUMMARY = (f"SELECT {S_COLS}, p.name, r.name, v.version, v.created_at, v.usage FROM eventckpt.streams AS s"
                " LEFT JOIN eventckpt.streams AS p ON p.tree_id = s.tree_id AND p.stream_id = s.parent_id"
                " JOIN eventckpt.streams AS r ON r.tree_id = s.tree_id AND r.stream_id = s.tree_id"
                " LEFT JOIN LATERAL (SELECT x.version, x.created_at, x.usage FROM eventckpt.versions AS x"
                " WHERE x.tree_id = s.tree_id AND x.stream_id = s.stream_id ORDER BY x.version DESC LIMIT 1) AS v ON TRUE")

    def stream_page(self, before_id: int | None, limit: int) -> list[SummaryRow]:
        rows = self._rows(self._SUMMARY + " WHERE s.stream_id < %s ORDER BY s.stream_id DESC LIMIT %s",
                          (2**63 - 1 if before_id is None else before_id, limit))
        return [SummaryRow(StreamRow(*r[:6]), *r[6:]) for r in rows]

    def stream_tree(self, tree_id: int, limit: int | None) -> list[SummaryRow]:
        rows = self._rows(self._SUMMARY + " WHERE s.tree_id = %s ORDER BY s.stream_id LIMIT %s", (tree_id, limit))
        return [SummaryRow(StreamRow(*r[:6]), *r[6:]) for r in rows]

    def version_sizes(self, segments: Sequence[Segment], since: int, until: int,
                      limit: int | None) -> list[tuple[int, int, int]]:
        out: list[tuple[int, int, int]] = []
        for seg in segments:
            lo, hi = max(seg.lo, since), min(seg.hi, until)
            wanted = None if limit is None else limit - len(out)
            if lo <= hi and wanted != 0:
                out += [(int(v), int(n), int(b)) for v, n, b in self._rows(
                    "SELECT version, event_count, event_bytes FROM eventckpt.versions WHERE tree_id = %s AND stream_id = %s"
                    " AND version BETWEEN %s AND %s ORDER BY version LIMIT %s", (seg.tree_id, seg.stream_id, lo, hi, wanted))]
        return out

    def appended(self, segments: Sequence[Segment], path: str, after: tuple[int, int], upto: int, offset: int,
                 limit: int) -> list[str] | None:
        parts = list(clip(segments, after[0] - 1, upto))
        where = ("FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND path = %s AND (version, seq) > (%s, %s)"
                 " AND version BETWEEN %s AND %s")
        for seg, lo, hi in parts:
            if self._one(f"SELECT 1 {where} AND op = 'extend' LIMIT 1",
                         (seg.tree_id, seg.stream_id, path, after[0], after[1], lo, hi)):
                return None
        order, skip = ("ASC", offset) if offset >= 0 else ("DESC", -offset - 1)
        for i in range(len(parts)) if offset >= 0 else reversed(range(len(parts))):
            seg, lo, hi = parts[i]
            args = (seg.tree_id, seg.stream_id, path, after[0], after[1], lo, hi)
            first = self._one(f"SELECT version, seq {where} ORDER BY version {order}, seq {order} LIMIT 1 OFFSET %s",
                              (*args, skip))
            if first is None:  # the window starts in another segment
                skip -= int(self._one(f"SELECT count(*) {where}", args)[0])
                continue
            out: list[str] = []
            for j, (seg, lo, hi) in enumerate(parts[i:]):
                if limit != -1 and len(out) >= limit:
                    break
                begin = tuple(first) if j == 0 else max((lo, 0), (after[0], after[1] + 1))
                out += [r[0] for r in self._rows(
                    "SELECT value FROM eventckpt.events WHERE tree_id = %s AND stream_id = %s AND path = %s"
                    " AND (version, seq) >= (%s, %s) AND version <= %s ORDER BY version, seq LIMIT %s",
                    (seg.tree_id, seg.stream_id, path, begin[0], begin[1], hi, None if limit == -1 else limit - len(out)))]
            return out
        if offset < 0 and limit != 0:  # the window starts before the first event: from the first on
            return self.appended(segments, path, after, upto, 0, -1 if limit == -1 else max(limit - skip - 1, 0))
        return []

    # verify and stats

    def streams_all(self) -> list[StreamRow]:
        return [StreamRow(*r) for r in self._rows(f"SELECT {S_COLS} FROM eventckpt.streams AS s ORDER BY s.stream_id")]

    def extent(self, stream: StreamRef) -> tuple[int, int]:
        bounds = [self._one(f"SELECT min(version), max(version) FROM eventckpt.{t} WHERE tree_id = %s AND stream_id = %s",
                            (stream.tree_id, stream.stream_id)) for t in ("versions", "events", "snapshots")]
        return (min((int(lo) for lo, _ in bounds if lo is not None), default=0),
                max((int(hi or 0) for _, hi in bounds), default=0))

    def snapshot_versions(self, stream: StreamRef) -> list[int]:
        return [int(r[0]) for r in self._rows("SELECT version FROM eventckpt.snapshots WHERE tree_id = %s AND stream_id = %s"
                                              " ORDER BY version", (stream.tree_id, stream.stream_id))]

    def snapshot_row(self, owner: StreamRef, version: int) -> tuple[str, str]:
        return tuple(self._one("SELECT state, manifest FROM eventckpt.snapshots WHERE tree_id = %s AND stream_id = %s"
                               " AND version = %s", (owner.tree_id, owner.stream_id, version)))

    def integrity_problems(self) -> list[str]:
        """Rows whose version row is gone (only possible with foreign keys disabled), stream names that
        disagree with streams, and metadata_index rows that disagree with versions.metadata (PostgreSQL
        checks its own pages)."""
        out = [f"stream_names: {r[0]!r} does not name its stream" for r in self._rows(
            "SELECT n.name FROM eventckpt.stream_names AS n LEFT JOIN eventckpt.streams AS s ON s.tree_id = n.tree_id"
            " AND s.stream_id = n.stream_id WHERE s.name IS DISTINCT FROM n.name"
            " UNION ALL SELECT s.name FROM eventckpt.streams AS s LEFT JOIN eventckpt.stream_names AS n ON n.name = s.name"
            " WHERE n.name IS NULL")]
        for table in ("events", "snapshots", "checkpoint_ids"):
            out += [f"foreign key: {table} of stream {r[0]} version {r[1]} has no versions row" for r in self._rows(
                f"SELECT DISTINCT x.stream_id, x.version FROM eventckpt.{table} AS x WHERE NOT EXISTS (SELECT 1 FROM"
                " eventckpt.versions AS v WHERE v.tree_id = x.tree_id AND v.stream_id = x.stream_id AND v.version = x.version)")]
        expected = ("SELECT v.tree_id, e.key, e.value, v.stream_id, v.version FROM eventckpt.versions AS v,"
                    " jsonb_each(eventckpt.json_safe(v.metadata)::jsonb) AS e WHERE v.metadata IS NOT NULL AND (jsonb_typeof(e.value) = 'string'"
                    " OR (jsonb_typeof(e.value) = 'number' AND e.value::text ~ '^-?[0-9]+$'))")
        stored = "SELECT tree_id, key, value, stream_id, version FROM eventckpt.metadata_index"
        for label, sql in (("lacks", f"{expected} EXCEPT {stored}"), ("has a stray row", f"{stored} EXCEPT {expected}")):
            out += [f"metadata_index {label}: stream {r[3]} version {r[4]} {r[1]!r}={r[2]!r}" for r in self._rows(sql)]
        return out

    def totals(self) -> dict[str, int]:
        streams, forks = self._one("SELECT count(*), count(parent_id) FROM eventckpt.streams")
        versions, event_bytes = self._one("SELECT count(*), coalesce(sum(event_bytes), 0) FROM eventckpt.versions")
        events = self._one("SELECT count(*) FROM eventckpt.events")[0]
        snapshots, snapshot_bytes = self._one(
            "SELECT count(*), coalesce(sum(octet_length(state) + octet_length(manifest)), 0) FROM eventckpt.snapshots")
        size = self._one("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c"
                         " JOIN pg_namespace AS n ON n.oid = c.relnamespace WHERE n.nspname = 'eventckpt' AND c.relkind = 'r'")[0]
        return {"streams": int(streams), "forks": int(forks), "versions": int(versions), "events": int(events),
                "event_bytes": int(event_bytes), "snapshots": int(snapshots), "snapshot_bytes": int(snapshot_bytes),
                "database_bytes": int(size), "free_bytes": 0}


# The events at one path strictly between a span's two event positions (s: the span's row).
_SPAN_EVENTS = ("FROM eventckpt.events AS e WHERE e.tree_id = %(t)s AND e.stream_id = %(s)s AND e.path = %(path)s"
                " AND e.version BETWEEN greatest(%(lo)s, s.av) AND least(%(hi)s, s.bv)"
                " AND (e.version, e.seq) > (s.av, s.aseq) AND (e.version, e.seq) < (s.bv, s.bseq)")


def _span_bounds(spans: Sequence[tuple[tuple[int, int], tuple[int, int]]]) -> dict[str, list[int]]:
    """Spans (after, before) of event positions as the four arrays the span queries unnest."""
    return {"av": [a[0] for a, _ in spans], "as": [a[1] for a, _ in spans],
            "bv": [b[0] for _, b in spans], "bs": [b[1] for _, b in spans]}
