"""Workload W on PostgreSQL: eventckpt's transactions next to a bare psycopg commit of the same rows, the
writer processes of the scaling run, and the table bytes of a schema.

The bare commit is the fastest honest way to write one W version with psycopg: one statement (a
data-modifying CTE inserting the version row and, from it, the event rows unnested from arrays bound in
binary), prepared, in autocommit, on a connection out of eventckpt's own pool (so it has eventckpt's
settings), into eventckpt's tables (so rows and indexes are the same).
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import psycopg

import eventckpt
from eventckpt.checkpoint import format_time, utc_now
from eventckpt.integrity import ROOT
from eventckpt.journal.postgres import connect
from systems import EventckptTx, initial_state
from workload import Step, event_rows, steps

STREAM = "w"

# Version row, then its events from the version the first insert returned: one statement, one round trip.
BARE_SQL = (
    "WITH v AS (INSERT INTO eventckpt.versions (tree_id, stream_id, version, created_at, name, auto, metadata, usage,"
    " event_count, event_bytes, checksum) VALUES (%(t)s, %(s)s, %(v)s, %(created)s, NULL, 0, NULL, %(usage)s,"
    " %(count)s, %(bytes)s, %(checksum)s) RETURNING version)"
    " INSERT INTO eventckpt.events (tree_id, stream_id, version, seq, op, path, value)"
    " SELECT %(t)s, %(s)s, v.version, x.seq - 1, x.op, x.path, x.value FROM v,"
    " unnest(%(ops)b::text[], %(paths)b::text[], %(values)b::text[]) WITH ORDINALITY AS x(op, path, value, seq)"
)


class BarePg:
    """W's version and event rows written with nothing but one prepared psycopg statement per step.

    Version 1 (W's initial state) is saved by eventckpt, as on the eventckpt side, so W step v is version
    v + 1 on both and the tables end up holding the same rows."""

    label = "bare psycopg"

    def __init__(self, name: str = STREAM) -> None:
        self.name = name

    def open(self, url: str) -> None:
        with eventckpt.open(url) as store:
            store.stream(self.name).save(initial_state())
        self.backend = connect(url)  # eventckpt's pool: its connection settings, autocommit
        assert self.backend.pool is not None
        self.conn: psycopg.Connection[Any] = self.backend.pool.getconn()
        row = self.conn.execute("SELECT tree_id, stream_id FROM eventckpt.stream_names WHERE name = %s",
                                (self.name,)).fetchone()
        assert row is not None
        self.tree_id, self.stream_id = row

    def close(self) -> None:
        assert self.backend.pool is not None
        self.backend.pool.putconn(self.conn)
        self.backend.close()

    def commit(self, s: Step) -> None:
        """One W step: its version row and event rows, one statement."""
        rows = event_rows(s)
        values = [r[2] for r in rows]
        self.conn.execute(BARE_SQL, {
            "t": self.tree_id, "s": self.stream_id, "v": s.step + 1, "created": format_time(utc_now()),
            "usage": orjson.dumps({"input_tokens": s.input_tokens, "output_tokens": s.output_tokens}).decode(),
            "count": len(rows), "bytes": sum(map(len, values)), "checksum": ROOT,
            "ops": [r[0] for r in rows], "paths": [r[1] for r in rows], "values": values,
        }, prepare=True)


class EventckptPg(EventckptTx):
    """eventckpt's transactions (bench/systems.py) on a PostgreSQL URL, on stream `name`; W step v is
    version v + 1."""

    def __init__(self, name: str = STREAM) -> None:
        super().__init__("normal")  # the server's synchronous_commit (on by default), as the bare commit has
        self.name = name

    def open(self, url: str) -> None:
        self.store = eventckpt.open(url, durability=self.durability)
        self.stream = self.store.stream(self.name)
        self.stream.save(initial_state())


def table_bytes(url: str, schema: str, tables: tuple[str, ...] | None = None) -> dict[str, int]:
    """pg_total_relation_size (heap, TOAST, indexes) of each table of `schema` (or of the named ones)."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class AS c"
            " JOIN pg_namespace AS n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'p') AND (%s::text[] IS NULL OR c.relname = ANY(%s))"
            " ORDER BY 2 DESC, 1", (schema, list(tables) if tables else None, list(tables) if tables else None)).fetchall()
    return {name: int(size) for name, size in rows}


SYSTEMS = {"eventckpt": EventckptPg, "bare": BarePg}


def writer(kind: str, url: str, stream: str, warmup: int, seconds: float, barrier: Any, results: Any) -> None:
    """One writer process of the scaling run: W commits (`kind`: "eventckpt" transactions or "bare" psycopg
    statements) on its own stream of the store, `warmup` commits first, then (once every writer is ready)
    as many as it can in `seconds`; reports the count and the CPU seconds this process spent on them."""
    system = SYSTEMS[kind](stream)
    system.open(url)
    try:
        work = steps(10**7)
        for _ in range(warmup):
            system.commit(next(work))
        barrier.wait(timeout=600)
        commits, cpu, deadline = 0, time.process_time(), time.perf_counter() + seconds
        while time.perf_counter() < deadline:
            system.commit(next(work))
            commits += 1
        results.put((commits, time.process_time() - cpu))
    finally:
        system.close()
