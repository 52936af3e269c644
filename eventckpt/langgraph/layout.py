"""How LangGraph checkpoints are laid out in an eventckpt store (stream names and reserved state keys).

- Each (thread_id, checkpoint_ns) is one stream tree, recorded in the `langgraph_threads` table (the
  saver finds trees there, never by name). Its root stream is named `langgraph:<thread_id>`, plus
  `/<checkpoint_ns>` when the namespace is not empty, so a person can type it in a shell and in the
  CLI's STREAM@VERSION syntax: letters, digits and `-_.:` stand for themselves, and any other character
  is percent-encoded as its UTF-8 bytes (`%20` for a space, `%7C` for the `|` of nested namespaces,
  `%25` for `%` itself), so two threads never share a name. `+N` is added when a stream already holds
  the name. Files written before this scheme keep their `langgraph:["<thread_id>","<checkpoint_ns>"]`
  names and keep working.
- A checkpoint is one version. Its state holds one top-level key per channel, `__serde__:<channel>`
  for the encoding of a value that is not plain JSON (see values.py), and `__channels__` for the
  channels whose names cannot be keys: {channel: [encoding, value]}. The version's metadata is the
  record described in records.py. Bookkeeping that changes every step is thus one small JSON object per
  version, read without any replay, and the state holds only what the graph holds.
"""

from __future__ import annotations

from urllib.parse import quote

from ..errors import InvalidArgumentError
from ..journal import Journal
from ..paths import addressable

OVERFLOW = "__channels__"
SERDE = "__serde__:"
PREFIX = "langgraph:"
MAX_NAME = 1000  # stream names are at most 1024 characters; room for the "+N" suffix
_SAFE = "-_.:"  # with letters and digits: what a shell and STREAM@VERSION take as they are


def channel_key(channel: str) -> str | None:
    """The top-level state key holding a channel, or None when it lives in `__channels__`."""
    if channel == OVERFLOW or channel.startswith(SERDE) or not channel or not addressable(channel):
        return None
    return channel


def escape(text: str) -> str:
    """`text` with every character but letters, digits and `-_.:` percent-encoded (UTF-8)."""
    return quote(text, safe=_SAFE).replace("~", "%7E")  # quote keeps "~" as it is: here it marks forks


def stream_name(thread_id: str, checkpoint_ns: str) -> str:
    """The name a thread's namespace gets for its root stream (before any `+N`)."""
    try:
        name = PREFIX + escape(thread_id) + ("/" + escape(checkpoint_ns) if checkpoint_ns else "")
    except UnicodeEncodeError:
        raise InvalidArgumentError("config", (thread_id, checkpoint_ns), "thread_id and checkpoint_ns must be valid "
                                   "UTF-8 (no lone surrogates)") from None
    if len(name) > MAX_NAME:
        raise InvalidArgumentError("config", (thread_id, checkpoint_ns), "thread_id and checkpoint_ns are too long")
    return name


def tree_name(journal: Journal, thread_id: str, checkpoint_ns: str) -> str:
    """A free name for a new root stream of a thread's namespace."""
    return free_name(journal, stream_name(thread_id, checkpoint_ns))


def free_name(journal: Journal, name: str) -> str:
    """`name`, or `name+2`, `name+3`, ...: the first one no stream has."""
    candidate, n = name, 1
    while journal.stream(candidate) is not None:
        n += 1
        candidate = f"{name}+{n}"
    return candidate
