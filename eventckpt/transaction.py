"""Transaction: record explicit operations and commit them as one new version.

Recording encodes each value at once (a bad value fails at the call that passed it, and mutating the
object afterwards changes nothing). On a clean exit the operations are checked against the head state
and committed as one version; on an exception nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .checks import added, check_added, check_number
from .commit import Recorded, commit, redoable
from .errors import InvalidArgumentError, SerializationError
from .ops import APPEND, DELETE, EXTEND, INCR, SET, TRUNCATE
from .paths import Path, encodable, normalize
from .tools import ToolCall, ToolRow, encode_calls

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .core import Core


def _in_state(op: str, path: Path, inside: Path, value: Any) -> Path:
    """Where a bad part of an operation's value (at `inside` in it) would be in the state. An appended
    item is named by its place from the end of the list (-1 for an append; an extend's item i of n at i - n),
    which is exact however long the list is: the transaction reads the head only when it commits."""
    if op == APPEND:
        return path + (-1,) + inside
    if op == EXTEND and inside:
        return path + (inside[0] - len(value),) + inside[1:]
    return path + inside


class Transaction:
    """Operations recorded for one new version; use as `with stream.transaction() as tx:`."""

    def __init__(self, core: Core, task_id: str, options: dict[str, Any]) -> None:
        self._core = core
        self._task_id = task_id
        self._options = options
        self._ops: list[Recorded] = []
        self._usage: dict[str, int | float] = {}
        self._tools: list[ToolRow] = []
        self._done = False
        self.checkpoint: Checkpoint | None = None  # the committed version, after a clean exit

    def _record(self, op: str, path: object, value: Any = None, *, encode: bool = True) -> Transaction:
        if self._done:
            raise InvalidArgumentError("transaction", self._task_id, "this transaction has already ended")
        parts = normalize(path)
        if encode:
            try:
                raw, copy = self._core.codec.encode_copy(value)
            except SerializationError as exc:
                raise SerializationError(_in_state(op, parts, exc.path, value), exc.reason, exc.type_name) from None
            self._ops.append((op, parts, copy, raw))
        else:
            self._ops.append((op, parts, value, None))
        return self

    def set(self, path: object, value: Any) -> Transaction:
        """Set a key (or list item) to `value`."""
        return self._record(SET, path, value)

    def delete(self, path: object) -> Transaction:
        """Remove a key, or a list item (later items shift down)."""
        return self._record(DELETE, path, encode=False)

    def append(self, path: object, item: Any) -> Transaction:
        """Append `item` to the list at `path` (a missing key becomes a new list)."""
        return self._record(APPEND, path, item)

    def extend(self, path: object, items: Iterable[Any]) -> Transaction:
        """Append every item of `items` to the list at `path`."""
        if isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
            raise InvalidArgumentError("items", items, "extend needs an iterable of items (a list, tuple, ...)")
        return self._record(EXTEND, path, list(items))

    def incr(self, path: object, n: int | float = 1) -> Transaction:
        """Add `n` to the number at `path` (a missing key starts at 0)."""
        check_number("n", n)
        return self._record(INCR, path, n, encode=False)

    def truncate(self, path: object, length: int) -> Transaction:
        """Keep the first `length` items of the list at `path`."""
        if type(length) is not int or not 0 <= length < 2**63:
            raise InvalidArgumentError("length", length, "must be a non-negative int within 64 bits")
        return self._record(TRUNCATE, path, length, encode=False)

    def add_usage(self, **counters: int | float) -> Transaction:
        """Add to the token-usage counters: this version's counters are the previous version's plus these
        (what `save(add_usage=...)` does; `save(token_usage=...)` sets the totals instead)."""
        for key, n in check_added(counters).items():
            self._usage[key] = self._usage.get(key, 0) + n
        return self

    def tool_call(self, call: ToolCall) -> Transaction:
        """Record a tool invocation in this version (see eventckpt.tools)."""
        if self._done:
            raise InvalidArgumentError("transaction", self._task_id, "this transaction has already ended")
        (row,) = encode_calls(self._core.codec, [call])
        if any(r[0] == row[0] for r in self._tools):
            raise InvalidArgumentError("tool_calls", row[0], "a call_id is unique among the calls of one version")
        self._tools.append(row)
        return self

    def __enter__(self) -> Transaction:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done = True
        if kind is None:
            usage = self._usage
            self.checkpoint = commit(self._core, self._task_id, redoable(self._core, self._ops), True,
                                     lambda previous: added(previous, usage), checked=True, tool_rows=self._tools,
                                     **self._options)
