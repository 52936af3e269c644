"""A checkpoint around a risky block: saved first, restored in place if the block raises.

    with stream.rollback_on_error(agent):      # saved first if it changed; restored if the block raises
        risky_operation(agent)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from . import ops
from .errors import RollbackError
from .mixin import Migrations, check_restorable, restore
from .states import state_dict
from .tracked import TrackedState

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .stream import CheckpointStore


@contextmanager
def rollback_on_error(stream: CheckpointStore, obj: Any, *, name: str | None = None,
                      metadata: Mapping[str, Any] | None = None,
                      migrations: Migrations | None = None) -> Iterator[Checkpoint]:
    """Save `obj` (unless it equals the head), run the block, and restore `obj` in place from that
    version if the block raises; the exception is re-raised, never suppressed. If restoring fails too,
    RollbackError (carrying the block's exception as `original`) is raised instead.

    A tracked state of this stream (`stream.checkout()`) that the block did not save is restored by
    dropping the edits it recorded (`refresh()`): the next save writes only what comes after."""
    tracked = isinstance(obj, TrackedState) and obj.belongs_to(stream)
    if not tracked:  # before anything is saved: a block that fails must find obj restorable
        check_restorable(obj)
    state = obj.plain() if tracked else state_dict(obj)
    version = stream.version
    if version == 0 or ops.diff(stream.state(version), state):
        version = stream.save(obj, metadata=metadata, name=name).version
    try:
        yield stream.get(version)
    except BaseException as exc:
        try:
            if tracked and obj.version == version == stream.version:
                obj.refresh()  # the block's edits were never saved: drop them, and nothing is written
            else:
                # exact: the object was saved as the block began, so what the save lacks the block made
                restore(obj, stream.state(version), migrations, exact=True)
        except Exception as failure:
            raise RollbackError(stream.task_id, version, exc, failure) from failure
        raise


