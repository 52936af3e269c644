"""The states at many versions of one stream in one pass: one restore, one range of events.

Listing a thread's history must not restore every checkpoint from scratch: a conversation's state at
version v holds v messages, so N restores cost O(N^2). Instead the lowest requested version is restored
once and the events up to the highest are folded forward. Each version gets its own state, built by
copying only the containers its events touch (copy on write): a message appended copies the outer list
(pointers only), and every other value is shared with the previous version. The states returned are
independent of the store and of its caches, but share unchanged values with each other: treat them as
read-only, or copy before mutating.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import CorruptStoreError, SerializationError, StreamNotFoundError, VersionNotFoundError
from ..gcpause import quiet_gc
from ..ops import APPEND, EXTEND, SET, TRUNCATE, apply
from ..paths import from_text

if TYPE_CHECKING:
    from ..materialize import LaterList
    from ..store import Store


def states_at(store: Store, stream: str, versions: Iterable[int], *, proven: int | None = None,
              lists: Mapping[str, LaterList] | None = None) -> dict[int, dict[str, Any]]:
    """{version: state} for `versions` of the stream named `stream` (each must exist). `proven` is the
    stream's id when the caller read it with these versions in a read transaction it opened itself and
    still holds: the stream and versions are then known to be there, and when this process has the
    stream's lineage cached (it has after its first read of the stream) the stream is not looked up
    again. `lists`: top-level lists as a later version of the stream holds them (see
    Core.state_and_later); the states share nothing with them."""
    wanted = sorted(set(versions))
    if not wanted:
        return {}
    core = store.core
    with core.session() as journal:
        # in the caller's transaction, the stream and versions it read are still there
        row = core.known_row(proven) if proven is not None and journal.in_transaction else None
        with journal.read():
            if row is None or row.name != stream:
                found = journal.stream_and_head(stream)
                if found is None:
                    raise StreamNotFoundError(stream)
                row, head = found
                if wanted[0] < 1 or wanted[-1] > head:
                    raise VersionNotFoundError(stream, wanted[0] if wanted[0] < 1 else wanted[-1], head)
            state, rows = core.state_and_later(journal, row, wanted[0], wanted[-1], lists)
    out = {wanted[0]: state}
    try:
        with quiet_gc():
            values = store.codec.decode_many([r[4] if r[4] is not None else "null" for r in rows])
    except (SerializationError, CorruptStoreError) as exc:
        raise CorruptStoreError(f"an event value is damaged: {exc}") from None
    i, n = 0, len(rows)
    for target in wanted[1:]:  # a version without events has the state of the one before
        while i < n and rows[i][0] <= target:
            version = rows[i][0]
            state = dict(state)
            fresh = {id(state)}  # containers already copied for this version
            while i < n and rows[i][0] == version:
                _apply_copied(state, fresh, rows[i], values[i])
                i += 1
        out[target] = state
    return out


def _apply_copied(state: dict[Any, Any], fresh: set[int], row: Any, value: Any) -> None:
    """Fold one event onto `state`, first copying every container on its path that this version has not
    copied yet (and, for list operations, the list itself)."""
    version, _, op, text, _ = row
    path = from_text(text)
    try:
        if len(path) == 1 and op == SET:  # the common case: a channel replaced
            state[path[0]] = value
            return
        parent: Any = state
        for key in path[:-1]:
            parent = _own(parent, key, fresh)
        if op in (APPEND, EXTEND, TRUNCATE) and _has(parent, path[-1]):
            _own(parent, path[-1], fresh)
        apply(parent, op, path[-1:], value)
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise CorruptStoreError(f"event {op} {text} at version {version} does not fit the state: {exc!r}") from None


def _has(parent: Any, key: Any) -> bool:
    return key in parent if type(parent) is dict else 0 <= key < len(parent)


def _own(parent: Any, key: Any, fresh: set[int]) -> Any:
    """parent[key], replaced by a shallow copy unless this version already made it."""
    child = parent[key]
    if id(child) not in fresh and type(child) in (dict, list):
        child = child.copy()
        parent[key] = child
        fresh.add(id(child))
    return child
