"""Tool invocations: recorded inside the version that made them, and undone by registered reverses.

    tools = eventckpt.ToolRegistry()
    tools.register("write_file", write_file, reverse=lambda args, result: os.remove(args["path"]))

    call = tools.call("write_file", path="notes.txt", text="hi")   # runs it; errors become data
    stream.save(state, tool_calls=[call])                          # one version: state + the call

    report = stream.undo_tools(since_version=3, registry=tools)    # reverses, newest first

Undoing never clears anything: each reverse is recorded as a new tool call (`undoes` names the call it
reversed; a failed reverse is recorded with its error) in a new version, so the journal says what
happened, what was reversed and what could not be.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .checks import MAX_NAME, plain_text
from .errors import InvalidArgumentError, SerializationError, UndoNotRecordedError

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .codec import Codec
    from .stream import CheckpointStore

Reverse = Callable[[dict[str, Any], Any], Any]
# What the journal stores per call: call_id, name, arguments JSON, result JSON or None, error or None, undoes
ToolRow = tuple[str, str, str, "str | None", "str | None", "str | None"]


def new_call_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class ToolCall:
    """One tool invocation: its name, arguments, and either its result or its error.

    `call_id` is stable (pass the LLM's tool-call id, or one is generated). `version` and `task_id` are
    set on calls read back from a store. `exception` is the live exception of a failed `ToolRegistry.call`
    (never stored; the journal keeps `error`, its type and message).
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str | None = None
    call_id: str = field(default_factory=new_call_id)
    undoes: str | None = None
    version: int | None = None
    task_id: str | None = None
    exception: BaseException | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        return self.error is None


def describe(exc: BaseException) -> str:
    """'ExceptionType: message', storable on every engine (a NUL or lone surrogate in the message is escaped)."""
    text = f"{type(exc).__name__}: {exc}"
    return text if plain_text(text) else text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()


def encode_calls(codec: Codec, calls: Iterable[ToolCall] | None) -> list[ToolRow]:
    """Validate and encode tool calls for the journal (before anything is written)."""
    if calls is None:
        return []
    if isinstance(calls, (ToolCall, str, bytes, Mapping)) or not isinstance(calls, Iterable):
        raise InvalidArgumentError("tool_calls", calls, "must be a list of ToolCall")
    rows: list[ToolRow] = []
    seen: set[str] = set()
    for i, call in enumerate(calls):
        if not isinstance(call, ToolCall):
            raise InvalidArgumentError("tool_calls", call, "each item must be a ToolCall")
        if type(call.name) is not str or not call.name or len(call.name) > MAX_NAME or not plain_text(call.name):
            raise InvalidArgumentError("tool_calls", call.name, f"a tool name is a non-empty str of at most {MAX_NAME} characters"
                                       " (valid UTF-8, without NUL)")
        if (type(call.call_id) is not str or not call.call_id or len(call.call_id) > MAX_NAME or call.call_id in seen
                or not plain_text(call.call_id)):
            raise InvalidArgumentError("tool_calls", call.call_id, "a call_id is a non-empty str (valid UTF-8, without NUL),"
                                       " unique among the calls of one save")
        seen.add(call.call_id)
        if not isinstance(call.arguments, Mapping) or not all(type(k) is str for k in call.arguments):
            raise InvalidArgumentError("tool_calls", call.arguments, "arguments are a mapping with str keys")
        for label, text in (("error", call.error), ("undoes", call.undoes)):
            if text is not None and (type(text) is not str or not plain_text(text)):
                raise InvalidArgumentError("tool_calls", text, f"{label} must be a str (valid UTF-8, without NUL) or None")
        try:
            arguments = codec.encode_text(dict(call.arguments))
            result = codec.encode_text(call.result) if call.error is None else None
        except SerializationError as exc:
            raise SerializationError(("tool_calls", i) + exc.path, exc.reason, exc.type_name) from None
        rows.append((call.call_id, call.name, arguments, result, call.error, call.undoes))
    return rows


def decode_call(codec: Codec, task_id: str, version: int, row: tuple[Any, ...]) -> ToolCall:
    call_id, name, arguments, result, error, undoes = row
    return ToolCall(name, codec.decode(arguments), codec.decode(result) if result is not None else None,
                    error, call_id, undoes, version, task_id)


class ToolRegistry:
    """Tools by name, each with an optional reverse `reverse(arguments, result)` that undoes its effect."""

    def __init__(self) -> None:
        self._tools: dict[str, tuple[Callable[..., Any] | None, Reverse | None]] = {}

    def register(self, name: str, fn: Callable[..., Any] | None, *, reverse: Reverse | None = None) -> None:
        """Register a tool (`fn` may be None when only its reverse is needed, e.g. to undo old calls)."""
        if type(name) is not str or not name or len(name) > MAX_NAME:
            raise InvalidArgumentError("name", name, f"a tool name is a non-empty str of at most {MAX_NAME} characters")
        for label, f in (("fn", fn), ("reverse", reverse)):
            if f is not None and not callable(f):
                raise InvalidArgumentError(label, f, "must be callable")
        self._tools[name] = (fn, reverse)

    def tool(self, name: str | None = None, *, reverse: Reverse | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator form of `register` (the function's name by default)."""
        def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
            self.register(name or fn.__name__, fn, reverse=reverse)
            return fn
        return decorate

    def reverse_for(self, name: str) -> Reverse | None:
        entry = self._tools.get(name)
        return entry[1] if entry else None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def call(self, name: str, /, *, call_id: str | None = None, **arguments: Any) -> ToolCall:
        """Run the tool and return its record. A tool that raises gives a ToolCall with `error` (and the
        live `exception`); it is a result to record and show the model, not a crash of the agent."""
        entry = self._tools.get(name)
        if entry is None or entry[0] is None:
            raise InvalidArgumentError("name", name, "no such tool is registered")
        cid = call_id if call_id is not None else new_call_id()
        try:
            result = entry[0](**arguments)
        except Exception as exc:
            return ToolCall(name, dict(arguments), None, describe(exc), cid, exception=exc)
        return ToolCall(name, dict(arguments), result, None, cid)


@dataclass
class UndoReport:
    """What `undo_tools` did, newest call first in every list."""

    undone: list[ToolCall] = field(default_factory=list)
    failed: list[tuple[ToolCall, str]] = field(default_factory=list)  # (call, the reverse's error)
    irreversible: list[ToolCall] = field(default_factory=list)        # no reverse is registered
    skipped: list[ToolCall] = field(default_factory=list)             # the call had failed, or was undone before
    unstored: list[ToolCall] = field(default_factory=list)            # undone; the reverse's result was not storable
    checkpoint: Checkpoint | None = None                              # the version recording the undo

    @property
    def ok(self) -> bool:
        return not self.failed and not self.irreversible


def undo_tools(stream: CheckpointStore, since_version: int, registry: ToolRegistry) -> UndoReport:
    """Run the reverses of the tool calls recorded after `since_version`, newest first; record each
    reverse (and each failure) as a tool call in one new version whose state is unchanged.

    A reverse has a side effect nobody can take back, so nothing may stop its record from being written
    (the next undo would run it again): the store is checked writable before any reverse runs, a result
    the codec cannot store is recorded as `unstored_result(...)` (listed in `report.unstored`), and when
    the commit still fails (the store busy past its timeout, the disk full, the server gone, the stream
    deleted) UndoNotRecordedError carries the records to write once it can be."""
    if type(since_version) is not int or since_version < 0:
        raise InvalidArgumentError("since_version", since_version, "must be a non-negative int")
    if not isinstance(registry, ToolRegistry):
        raise InvalidArgumentError("registry", registry, "must be a ToolRegistry")
    calls = [c for c in stream.tool_calls(since=since_version) if c.undoes is None]
    undone_before = _undone(stream, [c.call_id for c in calls])
    report = UndoReport()
    planned: list[tuple[ToolCall, Reverse]] = []
    for call in reversed(calls):
        reverse = registry.reverse_for(call.name)
        if not call.ok or call.call_id in undone_before:
            report.skipped.append(call)
        elif reverse is None:
            report.irreversible.append(call)
        else:
            planned.append((call, reverse))
    if planned:
        _check_writable(stream)
    codec = stream.core.codec
    records: list[ToolCall] = []
    for call, reverse in planned:
        try:
            result = reverse(dict(call.arguments), call.result)
        except Exception as exc:
            report.failed.append((call, describe(exc)))
            records.append(ToolCall(call.name, call.arguments, None, describe(exc), new_call_id(), call.call_id))
            continue
        report.undone.append(call)
        try:
            codec.encode_text(result)
        except SerializationError as exc:
            result = unstored_result(result, exc)
            report.unstored.append(call)
        records.append(ToolCall(call.name, call.arguments, result, None, new_call_id(), call.call_id))
    if records:
        summary = {"since": since_version, "undone": [c.call_id for c in report.undone],
                   "failed": [c.call_id for c, _ in report.failed],
                   "irreversible": [c.call_id for c in report.irreversible]}
        try:
            with stream.transaction(metadata={"undo_tools": summary}) as tx:  # no state change: no events
                for record in records:
                    tx.tool_call(record)
        except Exception as exc:  # the reverses ran: whatever stopped the commit, hand over their records
            raise UndoNotRecordedError(stream.task_id, report, records, {"undo_tools": summary}, exc) from exc
        report.checkpoint = tx.checkpoint
    return report


def unstored_result(result: Any, exc: SerializationError) -> dict[str, str]:
    """What an undo record stores for a reverse's result the codec refused: its type, its repr (cut
    short) and why, so the record (and the fact that the reverse ran) is kept."""
    try:
        text = repr(result)
    except Exception:  # a broken __repr__ must not lose the record either
        text = f"<{type(result).__name__} object>"
    if len(text) > 1000:
        text = text[:1000] + "..."
    if not plain_text(text):
        text = text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
    return {"unstored_result": text, "type": type(result).__name__, "reason": str(exc)}


class _Probe(Exception):
    """Rolls back the write transaction of `_check_writable`."""


def _check_writable(stream: CheckpointStore) -> None:
    """ReadOnlyStoreError (or the engine's error) now, when the stream's store cannot be written: a
    no-op update in a transaction that is rolled back, so a read-only store (or file) is found before
    any reverse has run."""
    with stream.core.session() as journal:
        row = journal.stream(stream.task_id)
        if row is None:
            return  # tool_calls() found calls, so the stream exists; the commit reports it otherwise
        try:
            with journal.write():
                journal.set_removed_head(row, max(1, journal.removed_head(row)))  # rolled back below
                raise _Probe
        except _Probe:
            pass


def _undone(stream: CheckpointStore, call_ids: list[str]) -> set[str]:
    """The calls among `call_ids` that a successful undo anywhere in the stream's tree already reversed
    (forks share the side effects of the history they share)."""
    if not call_ids:
        return set()
    with stream.core.session() as journal:
        row = journal.stream(stream.task_id)
        return journal.undone_call_ids(row.tree_id, call_ids) if row else set()
