"""log, history, diff and search are O(result): EXPLAIN QUERY PLAN of every statement they run shows no
full scan of the events table (and none of versions or metadata_index for the indexed filters). And every
read's statements are prepared once: run again, a read compiles nothing."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

import apsw
import pytest

import eventckpt
from eventckpt import SnapshotPolicy

FULL_SCAN = re.compile(r"^SCAN (events|e|versions|v|metadata_index|m)\b")


@pytest.fixture(scope="module")
def busy(tmp_path_factory: pytest.TempPathFactory) -> eventckpt.Store:
    """A store with a long conversation (enough events for the loose index scan), snapshots, a fork,
    list resets, item deletes, counters, and a list set to something else after many appends."""
    path = tmp_path_factory.mktemp("plans") / "plans.db"
    store = eventckpt.open(path, snapshots=SnapshotPolicy(min_tail_bytes=4096))
    task = store.stream("w")
    task.save({"messages": [], "step": 0, "scratch": {f"k{i}": "v" for i in range(20)}, "todo": [1, 2, 3]},
              name="start", metadata={"node": "input"})
    for i in range(1, 801):
        with task.transaction(name="tool" if i % 50 == 0 else None, auto=i % 2 == 0,
                              metadata={"node": "tools" if i % 10 == 0 else "agent", "step": i, "ratio": i / 2}) as tx:
            tx.append("messages", {"n": i, "text": "x" * 40})
            tx.set("step", i)
            tx.set(("scratch", f"k{i % 20:d}"), f"value {i}")
            tx.incr("tokens", 3)
            if i % 100 == 0:
                tx.delete(("todo", 0))
                tx.extend("todo", [i, i + 1])
    task.fork(at=400, task_id="w-fork").save({"step": -1, "messages": [{"n": 0}]}, metadata={"node": "replan"})
    archived = store.stream("archived")  # a long list set to something that is not a list
    archived.save({"log": []})
    for i in range(300):
        with archived.transaction() as tx:
            tx.append("log", {"n": i})
    archived.save({"log": "archived"})
    refold = store.stream("refold")  # ancestors' events after earlier events of their version
    refold.save({"cfg": {"model": "a"}, "m": [], "xs": [{"n": 1}, {"n": 2}]})
    with refold.transaction() as tx:
        tx.append("m", {"n": 1})
        tx.set("m", "x")
        tx.set("cfg.model", "b")
        tx.set("cfg", {"t": 1})
        tx.delete("xs[0]")
        tx.set("xs", [{"n": 3}])
    yield store
    store.close()


def plans(store: eventckpt.Store, call: Callable[[], Any]) -> list[tuple[str, list[str]]]:
    """Run `call`, capturing every statement it executes, and return each with its query plan."""
    conn = store.core.backend.journal.conn
    seen: list[tuple[str, Any]] = []

    def trace(cursor: Any, sql: str, bindings: Any) -> bool:
        if re.search(r"\b(events|versions|metadata_index)\b", sql) and not sql.lstrip().upper().startswith("EXPLAIN"):
            seen.append((sql, bindings))
        return True

    conn.exec_trace = trace
    try:
        result = call()
        if isinstance(result, eventckpt.diffing.Diff):
            [c.new for c in result]  # lazily read values run their own queries
    finally:
        conn.exec_trace = None
    assert seen, "nothing was captured"
    return [(sql, [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings or ())]) for sql, bindings in seen]


CALLS: dict[str, Callable[[eventckpt.Store], Any]] = {
    "log": lambda s: s.stream("w").log(100),
    "log before": lambda s: s.stream("w").log(10, before=300),
    "log name": lambda s: s.stream("w").log(name="tool"),
    "log auto": lambda s: s.stream("w").log(5, auto=False),
    "log metadata": lambda s: s.stream("w").log(metadata={"node": "tools", "ratio": 5.0}),
    "log metadata int": lambda s: s.stream("w").log(metadata={"step": 7}),
    "log metadata dict": lambda s: s.stream("w").log(metadata={"node": "tools", "cfg": {"b": [{"y": 1, "x": 2}], "a": 1}}),
    "search metadata dict": lambda s: s.search(metadata={"node": "replan", "cfg": {"b": 2, "a": 1}}),
    "log fork": lambda s: s.stream("w-fork").log(metadata={"node": "tools"}),
    "search name": lambda s: s.search(name="tool"),
    "search metadata": lambda s: s.search(metadata={"node": "replan"}),
    "search both": lambda s: s.search("tool", {"step": 100}),
    "history key": lambda s: s.stream("w").history("step", limit=20),
    "history nested": lambda s: s.stream("w").history(("scratch", "k3")),
    "history dict": lambda s: s.stream("w").history("scratch", since=700),
    "history item": lambda s: s.stream("w").history(("messages", 5, "n")),
    "history fork": lambda s: s.stream("w-fork").history("step"),
    "history appended item": lambda s: s.stream("w").history(("messages", 700, "n")),
    "history item of a list set to a str": lambda s: s.stream("archived").history(("log", 5, "n")),
    "history after earlier events of a version": lambda s: [s.stream("refold").history(p) for p in
                                                            ("cfg.model", ("m", 0, "n"), ("xs", 0, "n"))],
    "diff short": lambda s: s.stream("w").diff(100, 110),
    "diff long": lambda s: s.stream("w").diff(50, 750),
    "diff backwards": lambda s: s.stream("w").diff(700, 90),
    "diff fork": lambda s: s.stream("w").diff(600, ("w-fork", 401)),
    "diff resets": lambda s: s.stream("w").diff(95, 305),
    # the viewer's reads (eventckpt serve)
    "summaries": lambda s: s.summaries(10),
    "summaries before": lambda s: s.summaries(10, before="w-fork"),
    "tree": lambda s: s.tree("w-fork"),
    "sizes": lambda s: s.stream("w").sizes(300, 400),
    "sizes fork": lambda s: s.stream("w-fork").sizes(390, limit=20),
    "events": lambda s: s.stream("w").events(500),
    "keys": lambda s: s.stream("w").keys(700),
    "length": lambda s: s.stream("w").length("messages", 700),
    "value window": lambda s: s.stream("w").value("messages", 700, start=600, stop=650),
    "value window fork": lambda s: s.stream("w-fork").value("messages", start=395, stop=401),
    "value item": lambda s: s.stream("w").value(("messages", 10, "n"), 700),
    "value dict": lambda s: s.stream("w").value("scratch", 777),
}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_no_full_scans(busy: eventckpt.Store, name: str) -> None:
    """Every statement of this call searches an index; none scans events (or versions) in full."""
    for sql, plan in plans(busy, lambda: CALLS[name](busy)):
        scans = [step for step in plan if FULL_SCAN.match(step)]
        assert not scans, f"{name}: {scans} in\n{sql}\n{plan}"


def compiled(conn: Any, call: Callable[[], Any]) -> int:
    """How many times SQLite compiled a statement while `call` ran: the authorizer is asked only while a
    statement is prepared (or prepared again), never when a cached one runs."""
    asked = [0]

    def authorizer(*args: Any) -> int:
        asked[0] += 1
        return apsw.SQLITE_OK

    conn.authorizer = authorizer  # setting it expires every prepared statement: they compile once more
    try:
        call()
        asked[0] = 0
        call()
    finally:
        conn.authorizer = None
    return asked[0]


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_repeated_read_compiles_nothing(busy: eventckpt.Store, name: str) -> None:
    """Statements come from the cache as prepared: binding new values never makes SQLite prepare one
    again (which it does, without the planner stability guarantee, for a WHERE it matched against a
    partial index)."""
    assert compiled(busy.core.backend.journal.conn, lambda: read_all(CALLS[name](busy))) == 0


def read_all(result: Any) -> Any:
    """Whatever a call returns, with the values a diff reads lazily read too."""
    if isinstance(result, eventckpt.diffing.Diff):
        [c.new for c in result]
    return result


def test_a_repeated_langgraph_read_compiles_nothing(tmp_path: Path) -> None:
    """get_state of the newest and of an older checkpoint, and a listing, compile nothing when repeated."""
    from langgraph.graph import END, START, StateGraph  # the langgraph extra is part of the test extras

    from eventckpt.langgraph import EventCkptSaver

    class State(TypedDict):
        log: Annotated[list, operator.add]
        step: int

    graph = StateGraph(State)
    graph.add_node("node", lambda s: {"log": [{"n": s["step"]}], "step": s["step"] + 1})
    graph.add_edge(START, "node")
    graph.add_conditional_edges("node", lambda s: END if s["step"] >= 30 else "node")
    with EventCkptSaver(tmp_path / "lg.db") as saver:
        app = graph.compile(checkpointer=saver)
        config = {"configurable": {"thread_id": "t"}}
        app.invoke({"log": [], "step": 0}, config)
        older = [h.config for h in app.get_state_history(config)][15]
        conn = saver.store.core.backend.journal.conn

        def reads() -> None:
            app.get_state(config)
            app.get_state(older)
            list(saver.list(config, limit=5))

        assert compiled(conn, reads) == 0


def test_history_until_seeks_both_version_bounds(busy: eventckpt.Store) -> None:
    """history(until=...) far below the head searches the path index with both version bounds, instead of
    stepping through every newer event of the path."""
    for sql, plan in plans(busy, lambda: busy.stream("w").history("step", until=50, limit=5)):
        if "e.path = ?" in sql:
            assert any("version>? AND version<?" in step for step in plan), plan


def test_views_use_the_path_index(busy: eventckpt.Store) -> None:
    """The path_history view with a stream and a path is a path-index search, not a scan."""
    conn = busy.core.backend.journal.conn
    for sql in ("SELECT version, op, value FROM path_history WHERE stream = 'w' AND path = '$.step'",
                "SELECT version FROM path_history WHERE stream = 'w' AND path >= '$.scratch.' AND path < '$.scratch/'",
                "SELECT version, name FROM checkpoints WHERE stream = 'w-fork' ORDER BY version DESC LIMIT 5"):
        plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
        assert not [step for step in plan if FULL_SCAN.match(step)], (sql, plan)


class Recording:
    """A psycopg connection that remembers the statements run through it (and runs them)."""

    def __init__(self, conn: Any) -> None:
        self.conn, self.seen = conn, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)

    def execute(self, sql: str, args: Any = (), **kwargs: Any) -> Any:
        self.seen.append((sql, args))
        return self.conn.execute(sql, args, **kwargs)


def rows_read(plan: dict[str, Any], tables: set[str]) -> int:
    """Rows the plan's nodes read from `tables` (actual rows times loops), subplans included."""
    own = plan["Actual Rows"] * plan["Actual Loops"] if plan.get("Relation Name") in tables else 0
    return own + sum(rows_read(child, tables) for child in plan.get("Plans", ()))


def test_postgres_newest_langgraph_checkpoint_is_one_probe(pg_target: str) -> None:
    """On PostgreSQL, the LangGraph saver's lookup of a thread's newest checkpoint (get_state) reads one
    checkpoint row and its version, not every checkpoint of the thread to sort them."""
    import psycopg
    from typing_extensions import TypedDict

    from eventckpt.langgraph import EventCkptSaver

    from .langgraph_graphs import looping

    class State(TypedDict):
        n: int

    with EventCkptSaver(pg_target) as saver:
        config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
        looping(State, lambda s: {"n": s["n"] + 1}, lambda s: s["n"] >= 40).compile(checkpointer=saver).invoke(
            {"n": 0}, config)
        with saver.store.core.session() as journal:
            journal.conn = recording = Recording(journal.conn)
            try:
                rows = journal.langgraph_checkpoints(thread_id="t", checkpoint_ns="", limit=1)
            finally:
                journal.conn = recording.conn
    assert len(rows) == 1 and rows[0].version == 42  # the input checkpoint, then 41 steps
    [(sql, args)] = recording.seen
    with psycopg.connect(pg_target, autocommit=True) as conn:
        [plan] = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, args).fetchone()[0]
    assert rows_read(plan["Plan"], {"checkpoint_ids", "versions"}) <= 3, plan  # newest, its version, its parent
