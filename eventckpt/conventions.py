"""Metadata conventions for named, automatic and owned checkpoints.

A version's name and auto/manual flag are columns of `versions` (`save(name=..., auto=...)`). Who owns a
checkpoint, which graph node made it and at which step live in its metadata JSON under fixed keys, so
every layer (the sync and async APIs, the decorator, log and search) reads and filters the same thing,
and so does SQL: `json_extract(metadata, '$.user_id')`, `'$.node'`, `'$.step'`.
"""

from __future__ import annotations

from typing import Any

from .errors import InvalidArgumentError

USER_ID = "user_id"  # the owner: the user (or tenant) a checkpoint belongs to
NODE = "node"        # the graph node / agent component that made the checkpoint
STEP = "step"        # the agent loop's step counter


def meta(*, user_id: str | int | None = None, node: str | None = None, step: int | None = None,
         **extra: Any) -> dict[str, Any]:
    """Checkpoint metadata following the conventions: `save(state, metadata=meta(node="agent", step=3))`."""
    out = dict(extra)
    if user_id is not None:
        if type(user_id) not in (str, int):
            raise InvalidArgumentError("user_id", user_id, "must be a str or an int")
        out[USER_ID] = user_id
    if node is not None:
        if type(node) is not str or not node:
            raise InvalidArgumentError("node", node, "must be a non-empty str")
        out[NODE] = node
    if step is not None:
        if type(step) is not int or step < 0:
            raise InvalidArgumentError("step", step, "must be a non-negative int")
        out[STEP] = step
    return out
