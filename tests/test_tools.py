"""Tool invocations: recorded with the version that made them; undone newest first, keeping the record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

import eventckpt
from eventckpt import ToolCall, ToolRegistry

from .conftest import RawSQL, journal_rows


def files_registry(root: Path, log: list[str]) -> ToolRegistry:
    """write_file creates a real file; its reverse deletes it (and logs the order of reverses)."""
    tools = ToolRegistry()

    def write_file(path: str, text: str) -> int:
        (root / path).write_text(text)
        return len(text)

    def delete_file(args: dict[str, Any], result: Any) -> None:
        log.append(args["path"])
        (root / args["path"]).unlink()

    tools.register("write_file", write_file, reverse=delete_file)
    return tools


def test_calls_recorded_in_the_version(store: eventckpt.Store, tmp_path: Path) -> None:
    """save(tool_calls=...) stores name, arguments, result and error with that version."""
    tools = files_registry(tmp_path, [])
    stream = store.stream("agent")
    ok = tools.call("write_file", path="a.txt", text="hello")
    bad = tools.call("write_file", path="missing/dir/b.txt", text="x")
    assert ok.ok and ok.result == 5
    assert not bad.ok and bad.error.startswith("FileNotFoundError") and isinstance(bad.exception, FileNotFoundError)
    stream.save({"step": 1})
    cp = stream.save({"step": 2}, tool_calls=[ok, bad])
    calls = stream.tool_calls(version=cp.version)
    assert [(c.name, c.arguments, c.result, c.error is None) for c in calls] == [
        ("write_file", {"path": "a.txt", "text": "hello"}, 5, True),
        ("write_file", {"path": "missing/dir/b.txt", "text": "x"}, None, False),
    ]
    assert calls[0].call_id == ok.call_id and calls[0].version == 2 and calls[0].task_id == "agent"
    assert stream.tool_calls(version=1) == [] and len(stream.tool_calls(upto=1)) == 0
    assert len(stream.tool_calls()) == 2


def test_transaction_records_calls(store: eventckpt.Store) -> None:
    """A transaction records tool calls alongside its operations, in one version."""
    stream = store.stream("agent")
    call = ToolCall("search", {"q": "weather"}, {"hits": 3}, call_id="call_abc")
    with stream.transaction() as tx:
        tx.append("messages", {"role": "tool", "content": "3 hits"})
        tx.tool_call(call)
    (got,) = stream.tool_calls()
    assert got.call_id == "call_abc" and got.result == {"hits": 3} and got.version == 1


def test_bad_calls_write_nothing(store: eventckpt.Store, store_target: str) -> None:
    """An invalid or unstorable tool call raises a typed error and writes no version."""
    stream = store.stream("agent")
    stream.save({"x": 1})
    before = journal_rows(store_target)
    for calls in ([ToolCall("", {})], [ToolCall("t", {"f": object()})], ["not a call"], ToolCall("t"),
                  [ToolCall("t", call_id="same"), ToolCall("t", call_id="same")]):
        with pytest.raises(eventckpt.CheckpointError):
            stream.save({"x": 2}, tool_calls=calls)  # type: ignore[arg-type]
    with pytest.raises(eventckpt.CheckpointError):
        with stream.transaction() as tx:
            tx.tool_call(ToolCall("t", {"bad": {1, object()}}))
    assert journal_rows(store_target) == before


def test_undo_runs_reverses_newest_first(store: eventckpt.Store, tmp_path: Path) -> None:
    """undo_tools(since) reverses the calls after `since`, newest first, and records each reverse."""
    log: list[str] = []
    tools = files_registry(tmp_path, log)
    stream = store.stream("agent")
    stream.save({"step": 0}, tool_calls=[tools.call("write_file", path="keep.txt", text="k")])
    for i in range(1, 4):
        stream.save({"step": i}, tool_calls=[tools.call("write_file", path=f"f{i}.txt", text="x")])
    report = stream.undo_tools(1, tools)
    assert log == ["f3.txt", "f2.txt", "f1.txt"]
    assert report.ok and [c.arguments["path"] for c in report.undone] == ["f3.txt", "f2.txt", "f1.txt"]
    assert sorted(p.name for p in tmp_path.glob("*.txt")) == ["keep.txt"]
    assert report.checkpoint is not None and report.checkpoint.version == 5
    assert stream.state() == {"step": 3}  # undoing side effects does not roll the state back
    records = stream.tool_calls(version=5)
    assert [r.undoes for r in records] == [c.call_id for c in report.undone]
    assert len(stream.tool_calls()) == 7  # the original calls are all still recorded


def test_undo_reports_failures_and_keeps_them(store: eventckpt.Store, tmp_path: Path) -> None:
    """A failing reverse is reported and recorded with its error; a retry runs it again."""
    tools = ToolRegistry()
    attempts: list[str] = []

    def flaky_reverse(args: dict[str, Any], result: Any) -> str:
        attempts.append(args["id"])
        if len(attempts) == 1:
            raise ConnectionError("remote down")
        return "deleted"

    tools.register("create", lambda id: id, reverse=flaky_reverse)
    tools.register("notify", lambda to: "sent")  # no reverse: irreversible
    stream = store.stream("agent")
    stream.save({"s": 1}, tool_calls=[tools.call("create", id="r1"), tools.call("notify", to="bob")])
    first = stream.undo_tools(0, tools)
    assert not first.ok
    assert [(c.arguments, err) for c, err in first.failed] == [({"id": "r1"}, "ConnectionError: remote down")]
    assert [c.name for c in first.irreversible] == ["notify"]
    (record,) = stream.tool_calls(version=first.checkpoint.version)
    assert record.error == "ConnectionError: remote down" and record.undoes == first.failed[0][0].call_id
    assert first.checkpoint.metadata["undo_tools"]["irreversible"] == [first.irreversible[0].call_id]
    second = stream.undo_tools(0, tools)
    assert [c.arguments for c in second.undone] == [{"id": "r1"}] and attempts == ["r1", "r1"]
    third = stream.undo_tools(0, tools)
    assert third.undone == [] and third.checkpoint is None  # already undone: skipped, nothing new written
    assert [c.name for c in third.skipped] == ["create"]


def test_failed_calls_are_skipped(store: eventckpt.Store) -> None:
    """A call that had failed has nothing to reverse: it is reported as skipped."""
    tools = ToolRegistry()
    tools.register("boom", lambda: 1 / 0, reverse=lambda a, r: pytest.fail("must not run"))
    stream = store.stream("agent")
    stream.save({"s": 1}, tool_calls=[tools.call("boom")])
    report = stream.undo_tools(0, tools)
    assert [c.error for c in report.skipped] == ["ZeroDivisionError: division by zero"] and report.checkpoint is None


def test_forks_share_undo_state(store: eventckpt.Store, tmp_path: Path) -> None:
    """A fork sees its parent's calls; a call undone in one stream of the tree is not undone again."""
    log: list[str] = []
    tools = files_registry(tmp_path, log)
    main = store.stream("main")
    main.save({"s": 0})
    main.save({"s": 1}, tool_calls=[tools.call("write_file", path="shared.txt", text="x")])
    fork = main.fork(at=2, task_id="branch")
    assert [c.arguments["path"] for c in fork.tool_calls()] == ["shared.txt"]
    assert fork.undo_tools(1, tools).undone and log == ["shared.txt"]
    again = main.undo_tools(1, tools)
    assert again.undone == [] and log == ["shared.txt"]


def test_records_readable_with_sql(store: eventckpt.Store, store_target: str) -> None:
    """The tool_calls table is plain SQL with JSON arguments and results."""
    store.stream("agent").save({"s": 1}, tool_calls=[ToolCall("search", {"q": "x"}, ["r"])])
    with RawSQL(store_target) as raw:
        q = "json_extract(arguments, '$.q')" if raw.kind == "sqlite" else "arguments::json ->> 'q'"
        row = raw.execute(f"SELECT version, name, {q}, result FROM tool_calls")
    assert row == [(1, "search", "x", '["r"]')]


def test_registry_errors() -> None:
    """Unknown tools and bad registrations raise InvalidArgumentError."""
    tools = ToolRegistry()
    with pytest.raises(eventckpt.InvalidArgumentError):
        tools.call("nope")
    with pytest.raises(eventckpt.InvalidArgumentError):
        tools.register("", print)
    with pytest.raises(eventckpt.InvalidArgumentError):
        tools.register("x", print, reverse="not callable")  # type: ignore[arg-type]

    @tools.tool(reverse=lambda a, r: None)
    def ping(host: str) -> str:
        return "pong " + host

    assert "ping" in tools and tools.call("ping", host="h").result == "pong h"


def test_deleting_a_stream_deletes_its_calls(store: eventckpt.Store, store_target: str) -> None:
    """Tool calls belong to their versions: deleting the stream (and its forks) removes them too."""
    store.stream("t").save({"a": 1}, tool_calls=[ToolCall("x", {"a": 1}, 2)])
    store.stream("t").fork(task_id="f").save({"a": 2}, tool_calls=[ToolCall("y")])
    assert store.delete_stream("t", forks=True)
    assert journal_rows(store_target)["tool_calls"] == []


def test_unstorable_reverse_result_keeps_the_undo_record(store: eventckpt.Store) -> None:
    """A reverse whose result the codec cannot store is still recorded as undone (its repr), so it never runs twice."""

    class Response:
        def __repr__(self) -> str:
            return "<Response [204]>"

    ran: list[int] = []
    tools = ToolRegistry()
    tools.register("charge", lambda order: order, reverse=lambda args, result: (ran.append(args["order"]), Response())[1])
    stream = store.stream("agent")
    stream.save({"step": 0})
    stream.save({"step": 1}, tool_calls=[tools.call("charge", order=1), tools.call("charge", order=2)])
    report = stream.undo_tools(since_version=1, registry=tools)
    assert ran == [2, 1] and report.ok and len(report.undone) == 2 and report.unstored == report.undone
    records = [c for c in stream.tool_calls() if c.undoes]
    assert [r.result["unstored_result"] for r in records] == ["<Response [204]>"] * 2
    assert records[0].result["type"] == "Response" and all(r.error is None for r in records)
    again = stream.undo_tools(since_version=1, registry=tools)
    assert ran == [2, 1] and len(again.skipped) == 2 and again.checkpoint is None


def test_undo_on_a_read_only_store_runs_no_reverse(store_target: str) -> None:
    """undo_tools on a read-only store raises ReadOnlyStoreError before any reverse runs."""
    ran: list[int] = []
    tools = ToolRegistry()
    tools.register("charge", lambda order: order, reverse=lambda args, result: ran.append(args["order"]))
    with eventckpt.open(store_target) as store:
        store.stream("agent").save({"step": 1}, tool_calls=[tools.call("charge", order=3)])
    with eventckpt.open(store_target, readonly=True) as store:
        with pytest.raises(eventckpt.ReadOnlyStoreError):
            store.stream("agent").undo_tools(since_version=0, registry=tools)
    assert ran == []
    with eventckpt.open(store_target) as store:
        assert store.stream("agent").undo_tools(since_version=0, registry=tools).ok and ran == [3]


def test_undo_whose_record_cannot_be_written_hands_the_records_over(store_target: str) -> None:
    """When the commit recording the reverses fails after they ran (here the store was closed meanwhile),
    UndoNotRecordedError carries the report and the undo records, and nothing is written; once those
    records are written from the error, the next undo_tools skips the calls instead of reversing them
    again."""
    ran: list[int] = []
    tools = ToolRegistry()
    with eventckpt.open(store_target) as store:
        def refund(args: dict[str, Any], result: Any) -> str:
            ran.append(args["order"])
            store.close()  # e.g. the application shutting down on another thread
            return f"refunded {args['order']}"

        tools.register("charge", lambda order: order, reverse=refund)
        store.stream("agent").save({"step": 1}, tool_calls=[tools.call("charge", order=3)])
        stream = store.stream("agent")
        with pytest.raises(eventckpt.UndoNotRecordedError) as caught:
            stream.undo_tools(since_version=0, registry=tools)
    error = caught.value
    assert ran == [3] and isinstance(error.cause, eventckpt.StoreClosedError)
    assert [c.name for c in error.report.undone] == ["charge"] and error.report.checkpoint is None
    assert [(r.undoes, r.result) for r in error.records] == [(error.report.undone[0].call_id, "refunded 3")]
    with eventckpt.open(store_target) as store:
        stream = store.stream("agent")
        assert stream.version == 1  # nothing was written
        with stream.transaction(metadata=error.metadata) as tx:
            for record in error.records:
                tx.tool_call(record)
        again = stream.undo_tools(since_version=0, registry=tools)
        assert ran == [3] and [c.name for c in again.skipped] == ["charge"] and again.undone == []
