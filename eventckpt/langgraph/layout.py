"""How LangGraph checkpoints are laid out in an eventckpt store (names and reserved state keys).

- Each (thread_id, checkpoint_ns) is one stream tree whose root is named
  `langgraph:["<thread_id>","<checkpoint_ns>"]` (JSON, so any string is unambiguous; `#N` is added
  when an older tree still holds the name) and recorded in the `langgraph_threads` table.
- A checkpoint is one version. Its state holds one top-level key per channel, `__serde__:<channel>`
  for the encoding of a value that is not plain JSON (see values.py), and `__channels__` for the
  channels whose names cannot be keys: {channel: [encoding, value]}. The version's metadata is
  {"metadata": LangGraph's metadata, "checkpoint": the rest of LangGraph's checkpoint (v, ts,
  channel_versions, versions_seen, updated_channels, ...)}, plus "serde": encoding when that rest is
  not plain JSON. Bookkeeping that changes every step is thus one small JSON object per version, read
  without any replay, and the state holds only what the graph holds.
"""

from __future__ import annotations

import orjson

from ..errors import InvalidArgumentError
from ..journal import Journal
from ..paths import addressable

OVERFLOW = "__channels__"
SERDE = "__serde__:"
PREFIX = "langgraph:"
MAX_NAME = 1000  # stream names are at most 1024 characters; room for the "#N" suffix


def channel_key(channel: str) -> str | None:
    """The top-level state key holding a channel, or None when it lives in `__channels__`."""
    if channel == OVERFLOW or channel.startswith(SERDE) or not channel or not addressable(channel):
        return None
    return channel


def tree_name(journal: Journal, thread_id: str, checkpoint_ns: str) -> str:
    """A free name for a new root stream of a thread's namespace."""
    name = PREFIX + orjson.dumps([thread_id, checkpoint_ns]).decode()
    if len(name) > MAX_NAME:
        raise InvalidArgumentError("config", (thread_id, checkpoint_ns), "thread_id and checkpoint_ns are too long")
    return free_name(journal, name)


def free_name(journal: Journal, name: str) -> str:
    """`name`, or `name#2`, `name#3`, ...: the first one no stream has."""
    candidate, n = name, 1
    while journal.stream(candidate) is not None:
        n += 1
        candidate = f"{name}#{n}"
    return candidate
