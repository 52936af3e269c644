"""The systems that run workload W without a graph: eventckpt (transactions, a tracked state's save() and
whole-state save()), the `eventsourcing` library on SQLite with snapshots, and a bare apsw commit of
eventckpt's rows (the limit).

Every system gets the same durability: `normal` (WAL, synchronous=NORMAL: survives a killed process) or
`full` (every commit fsynced), since an fsync costs more than everything else a step does on most disks.
"""

from __future__ import annotations

import time
from typing import Any

import apsw
import orjson

import eventckpt
from eventckpt.checkpoint import format_time, utc_now
from eventckpt.integrity import ROOT
from eventckpt.journal.sqlite import STATEMENT_CACHE, configure
from harness import Recorder, Unavailable
from workload import Step, event_rows, initial_scratch, steps

SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
HISTORY_PATH = "step"  # changes at every version: the longest history W has
ISSUE3 = "eventckpt has no {0}() in this build (issue 3 adds it)"


def count(result: Any) -> int:
    """Rows in a result: a sequence, an iterator, or an object holding added/removed/changed lists."""
    parts = [getattr(result, name) for name in ("added", "removed", "changed") if hasattr(result, name)]
    if parts:
        return sum(map(count, parts))
    return len(result) if hasattr(result, "__len__") else sum(1 for _ in result)


def initial_state() -> dict[str, Any]:
    return {"messages": [], "step": 0, "scratch": initial_scratch()}


class EventckptTx:
    """eventckpt's native API, one transaction per step (append, set, usage): the O(change) path.

    Version 1 holds the initial state, so W step v is version v + 1. `begin()` and `step()` are what
    `write()` times, so a driver can also interleave several systems step by step."""

    label = "eventckpt"
    driver = "apsw"

    def __init__(self, durability: str = "normal") -> None:
        self.durability = durability
        self.store: eventckpt.Store | None = None

    def open(self, path: str) -> None:
        self.store = eventckpt.open(path, durability=self.durability)
        self.stream = self.store.stream("w")

    def close(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None

    def write(self, n: int, rec: Recorder) -> None:
        self.begin()
        for s in steps(n):
            t0 = time.perf_counter()
            self.step(s)
            rec.record(time.perf_counter() - t0)
            if rec.should_stop():
                return

    def begin(self) -> None:
        """The initial state, as version 1 (not timed)."""
        self.stream.save(initial_state())

    def step(self, s: Step) -> None:
        self.commit(s)

    def commit(self, s: Step) -> None:
        """One W step as one transaction."""
        with self.stream.transaction() as tx:
            tx.append("messages", s.message)
            tx.set("step", s.step)
            for k, v in s.scratch.items():
                tx.set(("scratch", k), v)
            tx.add_usage(input_tokens=120, output_tokens=40)

    def restore(self, version: int) -> dict[str, Any]:
        return self.stream.state(version + 1)

    def log(self, limit: int, deadline: float) -> int:
        if not hasattr(self.stream, "log"):
            raise Unavailable(ISSUE3.format("log"))
        return count(self.stream.log(limit))

    def history(self, deadline: float) -> int:
        if not hasattr(self.stream, "history"):
            raise Unavailable(ISSUE3.format("history"))
        return count(self.stream.history(HISTORY_PATH))

    def diff(self, a: int, b: int) -> int:
        if not hasattr(self.stream, "diff"):
            raise Unavailable(ISSUE3.format("diff"))
        return count(self.stream.diff(a + 1, b + 1))


class EventckptSave(EventckptTx):
    """eventckpt's native API, save(values) of the whole state per step (compared with the head); the
    step's edits of the state are timed with the save."""

    label = "eventckpt save()"

    def begin(self) -> None:
        self.state = initial_state()
        self.stream.save(self.state)

    def step(self, s: Step) -> None:
        state = self.state
        state["messages"].append(s.message)
        state["step"] = s.step
        state["scratch"].update(s.scratch)
        self.stream.save(state, {"input_tokens": s.input_tokens, "output_tokens": s.output_tokens})


class EventckptTracked(EventckptSave):
    """eventckpt's native API, a tracked state (checkout()) edited in place and save()d each step: the
    edits are recorded as they happen, so the step's time includes them."""

    label = "eventckpt tracked save()"

    def begin(self) -> None:
        self.stream.save(initial_state())
        self.state = self.stream.checkout()


class Bare:
    """The rows eventckpt writes for W, with nothing but apsw calls around them: the physical limit.

    The file has eventckpt's schema; versions are W's steps 1..n. It has no restore (nothing folds the
    rows back); its log and history are the bare SQL over the same indexes."""

    label = "bare apsw (limit)"
    driver = "apsw"

    def __init__(self, durability: str = "normal") -> None:
        self.durability = durability
        self.conn: apsw.Connection | None = None

    def open(self, path: str) -> None:
        eventckpt.open(path).close()  # the same schema and file settings
        self.conn = apsw.Connection(path, statementcachesize=STATEMENT_CACHE)
        self.conn.execute("PRAGMA journal_mode = WAL").fetchall()
        configure(self.conn, self.durability)  # the store's own connection settings (foreign keys included)

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def write(self, n: int, rec: Recorder) -> None:
        self.begin()
        for s in steps(n):
            t0 = time.perf_counter()
            self.step(s)
            rec.record(time.perf_counter() - t0)
            if rec.should_stop():
                return

    def begin(self) -> None:
        assert self.conn is not None
        self.conn.execute("INSERT INTO streams (name, created_at) VALUES ('w', ?)", (format_time(utc_now()),))

    def step(self, s: Step) -> None:
        self.commit(s, s.step)

    def commit(self, s: Step, version: int, stream_id: int = 1) -> None:
        """One step's version row and event rows in one write transaction, and nothing else."""
        conn = self.conn
        assert conn is not None
        rows = event_rows(s)
        usage = orjson.dumps({"input_tokens": s.input_tokens, "output_tokens": s.output_tokens}).decode()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO versions VALUES (?, ?, ?, NULL, 0, NULL, ?, 4, ?, ?)",
                     (stream_id, version, format_time(utc_now()), usage, sum(len(r[2]) for r in rows), ROOT))
        conn.executemany("INSERT INTO events VALUES (?, ?, ?, ?, ?, ?)",
                         [(stream_id, version, i, op, p, v) for i, (op, p, v) in enumerate(rows)])
        conn.execute("COMMIT")

    def restore(self, version: int) -> dict[str, Any]:
        raise Unavailable("bare rows: nothing folds them back into a state")

    def log(self, limit: int, deadline: float) -> int:
        assert self.conn is not None
        return len(self.conn.execute(
            "SELECT version, created_at, name, auto, metadata, usage FROM versions"
            " WHERE stream_id = 1 ORDER BY version DESC LIMIT ?", (limit,)).fetchall())

    def history(self, deadline: float) -> int:
        assert self.conn is not None
        return len(self.conn.execute(
            "SELECT version, op, value FROM events WHERE stream_id = 1 AND path = ? ORDER BY version",
            (f"$.{HISTORY_PATH}",)).fetchall())

    def diff(self, a: int, b: int) -> int:
        raise Unavailable("bare rows: no diff")


# -- eventsourcing ----------------------------------------------------------------------------------

SNAPSHOT_EVERY = 100  # the interval eventsourcing's documentation uses; LangGraph's DeltaChannel default too

try:
    from eventsourcing.application import Application
    from eventsourcing.domain import Aggregate, event

    class Agent(Aggregate):
        """W's state as an eventsourcing aggregate: one domain event per step."""

        def __init__(self, scratch: dict[str, str]) -> None:
            self.messages: list[dict[str, Any]] = []
            self.step = 0
            self.scratch = dict(scratch)
            self.input_tokens = 0
            self.output_tokens = 0

        @event("Stepped")
        def advance(self, step: int, message: dict[str, Any], scratch: dict[str, str], input_tokens: int,
                    output_tokens: int) -> None:
            self.messages.append(message)
            self.step = step
            self.scratch.update(scratch)
            self.input_tokens += input_tokens
            self.output_tokens += output_tokens

    class Agents(Application):
        snapshotting_intervals = {Agent: SNAPSHOT_EVERY}

    EVENTSOURCING_MISSING = ""
except ImportError as exc:  # the bench extra is not installed
    EVENTSOURCING_MISSING = f"eventsourcing is not installed ({exc})"


class EventSourcing:
    """The `eventsourcing` library with SQLite persistence and a snapshot every 100 events.

    The aggregate's version 1 is its creation, so W step v is version v + 1."""

    label = "eventsourcing"
    driver = "sqlite3"

    def __init__(self, durability: str = "normal") -> None:
        self.durability = durability
        self.app: Any = None
        self.agent_id: Any = None

    def open(self, path: str) -> None:
        self.app = Agents(env={"PERSISTENCE_MODULE": "eventsourcing.sqlite", "SQLITE_DBNAME": path})
        self._set_synchronous(self.app.factory.datastore.pool)

    def _set_synchronous(self, pool: Any) -> None:
        """eventsourcing leaves SQLite's default (FULL) in place; give it the same durability as the rest,
        on the pooled connections and on any it opens later."""
        pragma = f"PRAGMA synchronous = {SYNCHRONOUS[self.durability]}"
        for conn in list(pool._pool):
            conn._sqlite_conn.execute(pragma)
        create = pool._create_connection

        def create_with_pragma() -> Any:
            conn = create()
            conn._sqlite_conn.execute(pragma)
            return conn

        pool._create_connection = create_with_pragma

    def close(self) -> None:
        if self.app is not None:
            self.app.close()
            self.app = None

    def write(self, n: int, rec: Recorder) -> None:
        app = self.app
        agent = Agent(initial_scratch())
        app.save(agent)
        self.agent_id = agent.id
        for s in steps(n):
            t0 = time.perf_counter()
            agent.advance(s.step, s.message, s.scratch, 120, 40)
            app.save(agent)
            rec.record(time.perf_counter() - t0)
            if rec.should_stop():
                return

    def restore(self, version: int) -> dict[str, Any]:
        agent = self.app.repository.get(self.agent_id, version=version + 1)
        return {"messages": agent.messages, "step": agent.step, "scratch": agent.scratch}

    def log(self, limit: int, deadline: float) -> int:
        return len(list(self.app.events.get(self.agent_id, desc=True, limit=limit)))

    def history(self, deadline: float) -> int:
        raise Unavailable("no per-path history (events are opaque to its store)")

    def diff(self, a: int, b: int) -> int:
        raise Unavailable("no diff")
