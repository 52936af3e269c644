"""Streams at a glance: each stream's head, fork origin, last commit and token usage, a page at a time,
and the streams of one stream tree (a root and every fork below it), for listings such as the viewer's.

Both are indexed queries (journal.stream_page / stream_tree) that cost O(streams listed).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from .checkpoint import ForkOrigin, parse_time
from .errors import StreamNotFoundError
from .checks import check_task_id
from .journal import Journal, SummaryRow
from .query import check_limit

if TYPE_CHECKING:
    from .core import Core


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """One stream: `head` is its head version (a fork's fork version while it has none of its own),
    `tree` names the root of its stream tree, `updated_at` is when its newest own version was committed
    (None while it has none), `token_usage` the cumulative usage at the head."""

    task_id: str
    head: int
    parent: ForkOrigin | None
    tree: str
    created_at: dt.datetime
    updated_at: dt.datetime | None
    token_usage: dict[str, Any]


def summaries(core: Core, limit: int, before: str | None) -> list[StreamSummary]:
    """See Store.summaries."""
    check_limit("limit", limit, 0)
    if before is not None:
        check_task_id(before)
    with core.session() as journal, journal.read():
        before_id = None
        if before is not None:
            row = journal.stream(before)
            if row is None:
                raise StreamNotFoundError(before)
            before_id = row.id
        return [_summary(core, journal, r) for r in journal.stream_page(before_id, limit)]


def tree(core: Core, task_id: str, limit: int | None) -> list[StreamSummary]:
    """See Store.tree."""
    check_task_id(task_id)
    check_limit("limit", limit, 1)
    with core.session() as journal, journal.read():
        row = journal.stream(task_id)
        if row is None:
            raise StreamNotFoundError(task_id)
        return [_summary(core, journal, r) for r in journal.stream_tree(row.tree_id, limit)]


def _summary(core: Core, journal: Journal, r: SummaryRow) -> StreamSummary:
    stream = r.stream
    head, usage = r.head, r.head_usage
    if head is None:  # no version of its own: the head is the fork point, stored in an ancestor
        head = stream.fork_version or 0
        if head:
            owner = core.owner(journal, stream, head)
            vrow = journal.version_row(owner, head) if owner else None
            usage = vrow.usage if vrow is not None else None
    parent = ForkOrigin(r.parent_name, stream.fork_version or 0) if r.parent_name is not None else None
    return StreamSummary(stream.name, head, parent, r.root_name, parse_time(stream.created_at),
                         parse_time(r.head_created_at) if r.head_created_at else None,
                         orjson.loads(usage) if usage else {})

