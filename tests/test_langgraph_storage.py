"""How EventCkptSaver stores LangGraph checkpoints: events per step, readable JSON, one-query listing."""

from __future__ import annotations

import gc
import json
import operator
import re
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from eventckpt.langgraph import EventCkptSaver
from eventckpt.langgraph.puts import Channel
from tests.langgraph_graphs import looping


class Agent(TypedDict):
    messages: Annotated[list, add_messages]
    log: Annotated[list, operator.add]
    settings: dict
    step: int


def agent_graph(steps: int) -> StateGraph:
    def agent(state: Agent) -> dict[str, Any]:
        n = state["step"] + 1
        return {"messages": [AIMessage(f"answer {n}", id=f"m{n}")], "log": [{"n": n, "text": "x" * 40}], "step": n}

    return looping(Agent, agent, lambda s: s["step"] >= steps)


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[EventCkptSaver]:
    with EventCkptSaver(tmp_path / "agent.db") as s:
        yield s


def run(saver: EventCkptSaver, steps: int, thread: str = "t") -> dict[str, Any]:
    app = agent_graph(steps).compile(checkpointer=saver)
    start = {"messages": [HumanMessage("go", id="h")], "log": [], "settings": {"model": "m", "big": "y" * 5000},
             "step": 0}
    return app.invoke(start, {"configurable": {"thread_id": thread}, "recursion_limit": steps + 10})


def sql(path: Path, query: str, *args: Any) -> list[tuple[Any, ...]]:
    """Read the file with the stdlib sqlite3 module, as any tool could."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(query, args).fetchall()
    finally:
        conn.close()


def test_growing_lists_cost_one_append_per_step(saver: EventCkptSaver) -> None:
    """Each step appends one event to `messages` (LangChain objects, via the serde) and one to `log`."""
    run(saver, 40)
    per_version = sql(saver.store.path, "SELECT version, path, op FROM events WHERE path IN ('$.messages', '$.log')"
                                        " AND version > 2 ORDER BY version, path")
    assert len(per_version) == 2 * 40
    assert {op for _, _, op in per_version} == {"append"}
    assert sorted({v for v, _, _ in per_version}) == list(range(3, 43))


def test_an_unchanged_channel_costs_nothing(saver: EventCkptSaver) -> None:
    """A channel written once (a 5 kB settings dict) has one event in the whole run, and no snapshot copy."""
    run(saver, 60)
    assert sql(saver.store.path, "SELECT count(*) FROM events WHERE path LIKE '$.settings%'") == [(1,)]
    bytes_per_step = sql(saver.store.path, "SELECT avg(event_bytes) FROM versions WHERE version > 2")[0][0]
    assert bytes_per_step < 600  # the message (~250 B of JSON), the log line, the step: not the state


def test_values_are_readable_json_in_the_file(saver: EventCkptSaver) -> None:
    """Messages stored through the serde are JSON a stock SQLite can query; so is LangGraph's bookkeeping."""
    run(saver, 3)
    contents = [r[0] for r in sql(
        saver.store.path,
        "SELECT json_extract(value, '$.\"$tuple\"[1][2].content') FROM events WHERE path = '$.messages'"
        " AND op = 'append' ORDER BY version")]
    assert contents == ["answer 1", "answer 2", "answer 3"]
    encoding = sql(saver.store.path, "SELECT value FROM events WHERE path = '$.\"__serde__:messages\"'")
    assert [json.loads(v) for (v,) in encoding] == [["msgpack", "tree"]]
    steps = sql(saver.store.path, "SELECT json_extract(metadata, '$.metadata.step'),"
                                  " json_extract(metadata, '$.checkpoint.channel_versions.step') FROM versions")
    assert [s for s, _ in steps] == [-1, 0, 1, 2, 3] and all(v is None or type(v) is int for _, v in steps)


def test_plain_json_never_reaches_the_serde(tmp_path: Path) -> None:
    """Plain JSON channels are stored as themselves; only values holding other objects reach the serde."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    seen: list[Any] = []

    class Spy(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            seen.append(obj)
            return super().dumps_typed(obj)

    with EventCkptSaver(tmp_path / "spy.db", serde=Spy()) as saver:
        run(saver, 5)
        assert seen and not any(saver.store.codec.is_plain(v) for v in seen)
        assert len(seen) < 3 * 5 + 6  # the message channel and its writes, not every channel every step


def test_checkpoint_ids_are_the_stores_checkpoint_ids(saver: EventCkptSaver) -> None:
    """A LangGraph checkpoint id finds its version through eventckpt's own API."""
    run(saver, 4)
    newest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    name = sql(saver.store.path, "SELECT name FROM streams")[0][0]
    found = saver.store.stream(name).find(newest.checkpoint["id"])
    assert found is not None and found.values["step"] == 4
    assert found.metadata["metadata"]["step"] == newest.metadata["step"]


def test_list_costs_the_same_queries_for_10_or_200_checkpoints(tmp_path: Path) -> None:
    """list() runs one query for the checkpoints with their writes, whatever their number (no N+1)."""
    counts = {}
    for steps in (8, 198):
        with EventCkptSaver(tmp_path / f"n{steps}.db") as saver:
            run(saver, steps)
            statements: list[str] = []

            def trace(cursor: Any, query: str, bindings: Any, seen: list[str] = statements) -> bool:
                seen.append(query)
                return True

            conn = saver.store.core.backend.journal.conn
            conn.exec_trace = trace
            listed = list(saver.list({"configurable": {"thread_id": "t"}}))
            conn.exec_trace = None
        assert len(listed) == steps + 2 and all(t.pending_writes for t in listed[1:])
        assert sum("langgraph_writes" in q for q in statements) == 1
        counts[steps] = len(statements)
    assert counts[8] == counts[198]


def test_metadata_filters_are_bound_parameters(saver: EventCkptSaver) -> None:
    """Filter values travel as parameters (SQL in them is data and matches nothing), and a key that is
    not a metadata path is refused before any SQL runs."""
    config = {"configurable": {"thread_id": "t"}}
    run(saver, 3)
    assert len(list(saver.list(config, filter={"source": "loop"}))) == 4  # steps 0..3
    assert list(saver.list(config, filter={"source": "loop' OR '1'='1"})) == []
    with pytest.raises(ValueError, match="Invalid filter key"):  # a key is a path: SqliteSaver's rule
        list(saver.list(config, filter={"source') OR 1=1 --": "loop"}))
    assert [t.metadata["step"] for t in saver.list(config, filter={"step": 2})] == [2]
    assert len(list(saver.list(None, filter={"parents": {}}))) == 5


def test_stream_names_can_be_typed_in_a_shell_and_the_cli(tmp_path: Path) -> None:
    """A thread's stream is `langgraph:<thread>` (`/<namespace>` when there is one): letters, digits and
    -_.: as they are, anything else percent-encoded, so every name is unique and needs no quoting."""
    from eventckpt.langgraph.layout import stream_name

    assert stream_name("t1", "") == "langgraph:t1"
    assert stream_name("t1", "child:1f0|inner:2a") == "langgraph:t1/child:1f0%7Cinner:2a"
    odd = ["a b", "x@y", "t~1", "100%", "é", "a/b", '"q"', "[1]", "$(rm)", "a%20b", ""]
    names = [stream_name(t, "") for t in odd] + [stream_name("a", "b"), stream_name("a", "b/c")]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"langgraph:[A-Za-z0-9_.:/%-]*", n) for n in names), names
    with EventCkptSaver(tmp_path / "names.db") as saver:
        run(saver, 2, thread="t1")
        run(saver, 1, thread="user 42@home")
        streams = saver.store.streams()
    assert streams == ["langgraph:t1", "langgraph:user%2042%40home"]
    for ref in ("langgraph:t1@3", "langgraph:user%2042%40home"):
        shown = subprocess.run([sys.executable, "-m", "eventckpt", "show", str(tmp_path / "names.db"), ref, "--json"],
                               capture_output=True, text=True, timeout=120)
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["values"]["step"] >= 1


def test_files_with_the_old_stream_names_keep_working(tmp_path: Path) -> None:
    """Threads stored under the earlier `langgraph:["<thread>","<ns>"]` names are found, read and continued:
    the saver finds a thread through langgraph_threads, never by its stream's name."""
    path = tmp_path / "old.db"
    with EventCkptSaver(path) as saver:
        run(saver, 3, thread="t1")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("""UPDATE streams SET name = 'langgraph:["t1",""]' WHERE name = 'langgraph:t1'""")
    conn.close()
    with EventCkptSaver(path) as saver:
        before = saver.get_tuple({"configurable": {"thread_id": "t1"}})
        assert before.checkpoint["channel_values"]["step"] == 3 and len(list(saver.list(None))) == 5
        app = agent_graph(6).compile(checkpointer=saver)
        assert app.invoke({"log": []}, {"configurable": {"thread_id": "t1"}, "recursion_limit": 20})["step"] == 6
        assert saver.store.streams() == ['langgraph:["t1",""]']
        assert saver.store.stream('langgraph:["t1",""]').state()["step"] == 6


def test_the_serde_sees_each_message_once(tmp_path: Path) -> None:
    """A put encodes only the messages a step appended (and its task's writes), never the whole
    conversation again: the longest list the serde is handed stays at one step's worth."""
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    lengths: list[int] = []

    class Spy(JsonPlusSerializer):
        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            lengths.append(len(obj) if type(obj) is list else 1)
            return super().dumps_typed(obj)

    with EventCkptSaver(tmp_path / "spy.db", serde=Spy()) as saver:
        final = run(saver, 40)
        assert len(final["messages"]) == 41
        assert len(lengths) > 40 and max(lengths) <= 2


def kept_by_saver(items: list[Any]) -> bool:
    """Whether the saver's memory of a thread (a puts.Channel) holds these very objects, in its copy of the
    list they are in."""
    copies = [r for r in gc.get_referrers(items[0]) if type(r) is list and r is not items]
    return any(isinstance(c, Channel) and all(map(operator.is_, items, r))
               for r in copies for c in gc.get_referrers(r))


def test_only_a_runs_read_keeps_the_lists_it_hands_out(tmp_path: Path) -> None:
    """get_state's read of the newest checkpoint keeps none of the objects it hands out (they die with the
    caller's snapshot, and the saver holds no state in memory for it), first read or cached; the read a
    graph's run makes, with LangGraph's own config, keeps its lists' items: their identity tells the run's
    puts that a list only grew."""
    path = tmp_path / "agent.db"
    with EventCkptSaver(path) as saver:
        run(saver, 3)
    with EventCkptSaver(path) as saver:
        config = {"configurable": {"thread_id": "t"}}
        app = agent_graph(4).compile(checkpointer=saver)
        for _ in range(2):  # the first read fills the cache, the second copies from it
            messages = app.get_state(config).values["messages"]
            assert len(messages) == 4 and not kept_by_saver(messages)
        seen: list[Any] = []
        read = saver.get_tuple
        saver.get_tuple = lambda c: seen.append(c) or read(c)  # type: ignore[method-assign]
        app.invoke(None, config)
        del saver.get_tuple
        run_config = seen[0]  # what LangGraph's loop passed
        assert run_config["configurable"] != config["configurable"]
        for _ in range(2):
            messages = saver.get_tuple(run_config).checkpoint["channel_values"]["messages"]
            assert kept_by_saver(messages)


def test_get_state_of_a_subgraph_keeps_nothing(saver: EventCkptSaver) -> None:
    """get_state(subgraphs=True) reads the subgraph's newest checkpoint with LangGraph's checkpointer key in
    its config, and is still a plain read: the subgraph's lists it hands out are not kept."""
    class Items(TypedDict, total=False):
        items: Annotated[list, operator.add]

    def ask(state: Items) -> dict[str, Any]:
        interrupt("wait")
        return {"items": [{"n": 2}]}

    inner = StateGraph(Items)
    inner.add_node("ask", ask)
    inner.add_edge(START, "ask")
    inner.add_edge("ask", END)
    outer = StateGraph(Items)
    outer.add_node("sub", inner.compile())
    outer.add_edge(START, "sub")
    outer.add_edge("sub", END)
    app = outer.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "s"}}
    app.invoke({"items": [{"n": 1}]}, config)
    for _ in range(2):  # the first read fills the cache, the second copies from it
        sub = app.get_state(config, subgraphs=True).tasks[0].state
        assert sub.values["items"] == [{"n": 1}] and not kept_by_saver(sub.values["items"])


def traced(saver: EventCkptSaver) -> list[str]:
    """The SQL statements the saver's connection runs from now on (until `untraced`)."""
    statements: list[str] = []
    saver.store.core.backend.journal.conn.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
    return statements


def untraced(saver: EventCkptSaver) -> None:
    saver.store.core.backend.journal.conn.exec_trace = None


def test_the_newest_checkpoint_is_read_from_memory_as_fresh_objects(saver: EventCkptSaver) -> None:
    """Reading a thread's newest checkpoint runs one query and no restore (none at all when nothing changed
    since the last read), and hands out new objects each time: changing what one read returned changes
    neither the store nor the next read."""
    run(saver, 12)
    config = {"configurable": {"thread_id": "t"}}
    statements = traced(saver)
    first = saver.get_tuple(config)
    second = saver.get_tuple(config)
    untraced(saver)
    assert statements[0] == "PRAGMA data_version" and "langgraph_writes" in statements[1]
    assert statements[2:] == ["PRAGMA data_version"]  # the second read: nothing changed, no lookup
    values = first.checkpoint["channel_values"]
    assert values == second.checkpoint["channel_values"] and values["messages"] is not second.checkpoint[
        "channel_values"]["messages"]
    values["messages"][1].content = "changed"
    values["messages"].append(AIMessage("extra", id="x"))
    values["settings"]["model"] = "other"
    values["log"][0]["n"] = 99  # a list of flat dicts: handed out as copies of the cached items
    values["log"][0]["extra"] = True
    values["log"].append({"n": 100})
    third = saver.get_tuple(config).checkpoint["channel_values"]
    with EventCkptSaver(saver.store.path) as fresh:
        assert third == fresh.get_tuple(config).checkpoint["channel_values"] == second.checkpoint["channel_values"]
    assert third["messages"][1].content == "answer 1" and len(third["messages"]) == 13
    assert third["log"][0] == {"n": 1, "text": "x" * 40} and len(third["log"]) == 12


def test_a_cached_list_reads_back_exactly_whatever_its_items_become(saver: EventCkptSaver) -> None:
    """The newest checkpoint's list reads back equal to what was put, with exact types, after every step:
    while its items are flat dicts of every scalar type, after an item
    holding a container joins them, and after updates outside a run. Each read equals a fresh saver's
    read of the file, and changing what a read returned, or the list the caller put, changes no later read."""
    class State(TypedDict, total=False):
        log: Annotated[list, operator.add]
        n: int

    batches = [
        [{"s": "a", "i": 1, "f": 1.0, "b": True, "z": None, "neg": -0.0, "u64": 2**64 - 1, "i64": -(2**63)}],
        [{"n": 2}, {"n": 2.0}],
        [{"nested": {"k": [1, 2]}}],  # no longer flat: packed
        [{"n": 4}],
    ]
    graph = StateGraph(State)
    graph.add_node("step", lambda state: {"log": batches[state["n"]]})
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    app = graph.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "flat"}}
    expected: list[Any] = []

    def check(config: dict[str, Any], expected: list[Any]) -> None:
        for _ in range(2):  # the second read after the first one's values were changed
            log = saver.get_tuple(config).checkpoint["channel_values"]["log"]
            assert log == expected
            assert [[type(v) for v in d.values()] for d in log] == [[type(v) for v in d.values()] for d in expected]
            assert [str(d.get("neg")) for d in log[:1]] == [str(d.get("neg")) for d in expected[:1]]  # -0.0 too
            log[0]["s"] = "changed"  # what a read hands out is the caller's, however deep
            log[-1]["added"] = True
            for item in log:
                if "nested" in item:
                    item["nested"]["k"].append(3)
            log.append({"extra": 1})
        with EventCkptSaver(saver.store.path) as fresh:
            assert fresh.get_tuple(config).checkpoint["channel_values"]["log"] == expected

    for n, batch in enumerate(batches):
        app.invoke({"n": n}, config)
        expected += [{**item, "nested": {"k": [1, 2]}} if "nested" in item else dict(item) for item in batch]
        check(config, expected)
    app.update_state(config, {"log": [{"only": "one"}]})  # outside a run: compared with the stored list
    check(config, [*expected, {"only": "one"}])
    other = {"configurable": {"thread_id": "mine"}}  # a list still flat, put by the caller, then edited by it
    app.invoke({"n": 1}, other)
    mine = [{"only": "one"}]
    app.update_state(other, {"log": mine})
    mine[0]["only"] = "changed by the caller"
    check(other, [{"n": 2}, {"n": 2.0}, {"only": "one"}])

def test_an_older_checkpoint_reads_its_referred_writes_with_its_state(saver: EventCkptSaver) -> None:
    """get_tuple of an older checkpoint takes the values its pending writes refer to from the same restore
    as its state (its child is the next version): no separate query of the child's events, no second
    look-up of the stream its listing query found, and the same checkpoint and writes as list() returns."""
    run(saver, 12)
    assert any('["@",' in row[0] for row in sql(saver.store.path, "SELECT writes FROM langgraph_writes"))
    listed = list(saver.list({"configurable": {"thread_id": "t"}}))
    statements = traced(saver)
    read = [saver.get_tuple(t.config) for t in listed[1:]]
    untraced(saver)
    assert not any("LEFT JOIN events" in q or "FROM streams WHERE name" in q for q in statements)
    for got, want in zip(read, listed[1:], strict=True):
        assert got is not None and got.pending_writes == want.pending_writes
        assert got.checkpoint["channel_values"] == want.checkpoint["channel_values"]
    assert any(got.pending_writes for got in read)


# Continues thread "t" of the file by one invoke of `steps` steps, or (with "writes") puts one pending write
# on its newest checkpoint, from another process.
OTHER_WRITER = """
import sys
from eventckpt.langgraph import EventCkptSaver
from tests.test_langgraph_storage import agent_graph
path, what = sys.argv[1], sys.argv[2]
with EventCkptSaver(path) as saver:
    config = {"configurable": {"thread_id": "t"}}
    if what == "writes":
        saver.put_writes(saver.get_tuple(config).config, [("log", {"n": -1, "text": "late"})], "task-x")
    else:
        app = agent_graph(int(what)).compile(checkpointer=saver)
        app.invoke({"log": []}, {**config, "recursion_limit": 50})
"""


def test_a_newest_read_sees_every_change_since_the_last_one(saver: EventCkptSaver) -> None:
    """The newest checkpoint read again after another process put checkpoints, after another process put a
    pending write on it, and after another saver on the same store (the same connection) wrote, is what a
    fresh saver reads: the skipped lookup (nothing changed) is never taken when anything did."""
    run(saver, 3)
    config = {"configurable": {"thread_id": "t"}}
    path = str(saver.store.path)

    def fresh() -> Any:
        with EventCkptSaver(path) as other:
            return other.get_tuple(config)

    def same(got: Any, want: Any) -> bool:
        return (got.config, got.checkpoint, got.metadata, got.pending_writes) == (
            want.config, want.checkpoint, want.metadata, want.pending_writes)

    before = saver.get_tuple(config)
    assert saver.get_tuple(config).checkpoint["channel_values"]["step"] == 3
    for what in ("6", "writes"):
        done = subprocess.run([sys.executable, "-c", OTHER_WRITER, path, what], capture_output=True, text=True,
                              timeout=120, cwd=Path(__file__).parent.parent)
        assert done.returncode == 0, done.stderr
        got = saver.get_tuple(config)
        assert same(got, fresh()) and not same(got, before)
        before = got
    assert got.pending_writes[-1][1:] == ("log", {"n": -1, "text": "late"})
    sharing = EventCkptSaver(saver.store)  # a second saver on the same store: the same connection
    sharing.put_writes(got.config, [("log", {"n": -2, "text": "mine"})], "task-y")
    assert saver.get_tuple(config).pending_writes[-1][1:] == ("log", {"n": -2, "text": "mine"})
    sharing.delete_thread("t")
    assert saver.get_tuple(config) is None


def test_reading_the_newest_checkpoint_while_a_graph_runs_sees_whole_states(saver: EventCkptSaver) -> None:
    """Readers on other threads always get a whole checkpoint from the cache, however the puts of a running
    graph grow it: every read's log holds exactly one line per step of that checkpoint, and a cached
    checkpoint read after later puts grew its bytes in place still holds only its own items."""
    run(saver, 3)
    first = saver.get_tuple({"configurable": {"thread_id": "t"}})
    stream_id = saver.store.core.backend.journal.stream("langgraph:t").id
    cached = saver._heads.get(stream_id, saver.store.stream("langgraph:t").version)
    done = threading.Event()
    problems: list[Any] = []

    def read() -> None:
        config = {"configurable": {"thread_id": "t"}}
        while not done.is_set():
            values = saver.get_tuple(config).checkpoint["channel_values"]
            if [e["n"] for e in values["log"]] != list(range(1, values["step"] + 1)):
                problems.append(values)

    readers = [threading.Thread(target=read) for _ in range(2)]
    for r in readers:
        r.start()
    try:
        app = agent_graph(150).compile(checkpointer=saver)
        assert app.invoke({"log": []}, {"configurable": {"thread_id": "t"}, "recursion_limit": 200})["step"] == 150
    finally:
        done.set()
        for r in readers:
            r.join()
    assert problems == []
    assert cached is not None and cached.values(saver.serde) == first.checkpoint["channel_values"]


class Notes(TypedDict):
    notes: list  # no reducer: each step returns the whole list
    log: Annotated[list, operator.add]
    step: int


def notes_graph(steps: int) -> StateGraph:
    def node(state: Notes) -> dict[str, Any]:
        n = state["step"] + 1
        notes = [*state["notes"], {"n": n, "text": "x" * 30}]
        if n == 25:
            notes[3] = {"n": 3, "text": "edited"}  # an old item changed: not a prefix of what it was
        if n == 40:
            notes = notes[:5]
        return {"notes": notes, "log": [{"n": n}, {"n": -n}], "step": n}

    return looping(Notes, node, lambda s: s["step"] >= steps)


def test_an_older_checkpoint_copies_a_list_that_only_grew_from_the_cached_newest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the newest checkpoint cached, an older checkpoint's plain list that only grew since is copied
    from the cached one instead of being read from the journal; every checkpoint reads exactly as a fresh
    saver reads it (also before an old item was edited and before the list shrank), as fresh objects."""
    from eventckpt import SnapshotPolicy
    from eventckpt.langgraph import heads

    path, config = tmp_path / "agent.db", {"configurable": {"thread_id": "t"}}
    policy = SnapshotPolicy(tail_ratio=0.2, min_tail_bytes=256, event_overhead=16, share_min_bytes=64)
    taken: list[tuple[int, int]] = []  # (items of the cached list, items copied)
    head = heads.Blob.head
    monkeypatch.setattr(heads.Blob, "head", lambda blob, count: taken.append((blob.count, count)) or head(blob, count))
    for steps, since in ((20, 0), (30, 25), (45, 40)):  # `since`: the step since which notes only grew
        with EventCkptSaver(path, snapshots=policy) as writer:
            notes_graph(steps).compile(checkpointer=writer).invoke(
                {"notes": [], "log": [], "step": 0} if steps == 20 else {"log": []}, {**config, "recursion_limit": 100})
        with EventCkptSaver(path) as cached, EventCkptSaver(path) as fresh:
            newest = cached.get_tuple(config)  # caches it
            assert newest is not None
            notes, log = (len(newest.checkpoint["channel_values"][k]) for k in ("notes", "log"))
            copied = {"notes": [], "log": []}
            for older in [t.config for t in fresh.list(config)][1:]:
                del taken[:]
                got, want = cached.get_tuple(older), fresh.get_tuple(older)
                assert got is not None and want is not None
                values = got.checkpoint["channel_values"]
                assert values == want.checkpoint["channel_values"] and got.pending_writes == want.pending_writes
                for cached_items, count in taken:
                    copied["notes" if cached_items == notes else "log"].append(want.metadata["step"])
                    assert count == len(values["notes" if cached_items == notes else "log"])
                for value in values.values():
                    if type(value) is list and value and type(value[0]) is dict:
                        value[0]["n"] = "changed by the caller"
                assert cached.get_tuple(older).checkpoint["channel_values"] == want.checkpoint["channel_values"]
            assert len(copied["log"]) > steps // 2  # most checkpoints (not those before the first snapshot)
            assert copied["notes"] and min(copied["notes"]) >= since
            assert len(copied["notes"]) > (steps - since) // 2
