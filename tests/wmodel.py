"""Workload W as a deterministic plan over streams, and the plain-Python model of what every version holds.

The crash tests kill writers at arbitrary moments, so what a version holds must not depend on what a
killed writer remembered: everything is a function of (stream name, version). Roots are named w0, w1,
...; a fork of S at version v is named f"{S}~{v}". Version 1 of a root is the initial state; every
later version of a stream is made by the op `op_at(stream, v)`:
  tx        one W step recorded as a transaction (append the message, set step and 2 scratch keys, usage),
            as an automatic checkpoint (auto=True: what prune(auto_only=True) may remove)
  save      the same step saved as the whole state with save() (and a checkpoint id), a manual checkpoint
  rollback  rollback(to) to a recent version (token usage is kept, as rollback does), a manual checkpoint
A step's content is bench/workload.py's W step number v, generated with a seed per stream.
"""

from __future__ import annotations

import random
import sys
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from workload import Step, initial_scratch, steps  # noqa: E402

ROOT_LEN = 120  # versions of a root stream before the writer starts the next root
FORK_LEN = 10  # versions a fork gets beyond its fork point
FORK_CHANCE = 0.05  # chance that a stream forks after a given version
MAX_DEPTH = 2  # forks of forks, but no deeper


@dataclass(frozen=True)
class Version:
    """What one version holds."""

    state: dict[str, Any]
    usage: dict[str, int]
    metadata: dict[str, Any]
    checkpoint_id: str | None
    auto: bool = False


def parent_of(stream: str) -> tuple[str, int] | None:
    """(parent, fork version) of a fork, None for a root."""
    if "~" not in stream:
        return None
    parent, _, at = stream.rpartition("~")
    return parent, int(at)


def depth(stream: str) -> int:
    return stream.count("~")


def target_len(stream: str) -> int:
    """The head version at which the writer is done with a stream."""
    origin = parent_of(stream)
    return ROOT_LEN if origin is None else origin[1] + FORK_LEN


def root_name(n: int) -> str:
    return f"w{n}"


def _rng(*parts: Any) -> random.Random:
    return random.Random(zlib.crc32(":".join(map(str, parts)).encode()))


def op_at(stream: str, version: int) -> str:
    """The op that creates `version` of `stream` (only for versions the stream itself owns)."""
    if version == 1:
        return "init"
    roll = _rng("op", stream, version).random()
    if roll < 0.07 and version > 3:
        return "rollback"
    return "save" if roll < 0.45 else "tx"


def is_auto(stream: str, version: int) -> bool:
    """Whether the version is an automatic checkpoint (the tx steps)."""
    return op_at(stream, version) == "tx"


def rollback_target(stream: str, version: int) -> int:
    return _rng("to", stream, version).randint(max(1, version - 6), version - 2)


def forks_after(stream: str, version: int) -> bool:
    """Whether the writer forks `stream` at `version` (before writing version + 1)."""
    if depth(stream) >= MAX_DEPTH or version < 2 or version >= target_len(stream) - 1:
        return False
    return _rng("fork", stream, version).random() < FORK_CHANCE


@lru_cache(maxsize=64)
def _steps(stream: str) -> tuple[Step, ...]:
    return tuple(steps(ROOT_LEN + FORK_LEN * (MAX_DEPTH + 1), seed=zlib.crc32(stream.encode())))


def w_step(stream: str, version: int) -> Step:
    return _steps(stream)[version - 2]


def initial() -> Version:
    state = {"messages": [], "step": 0, "scratch": initial_scratch()}
    return Version(state, {"input_tokens": 0, "output_tokens": 0}, {"op": "init", "v": 1}, None)


def advance(stream: str, version: int, prev: Version, recent: dict[int, Version]) -> Version:
    """The version `version` of `stream`, given its previous version and recent ones (for rollback)."""
    op = op_at(stream, version)
    if op == "init":
        return initial()
    if op == "rollback":
        to = rollback_target(stream, version)
        meta = {"op": "rollback", "v": version, "rollback_to": to}
        return Version(recent[to].state, prev.usage, meta, None)
    s = w_step(stream, version)
    state = {
        "messages": prev.state["messages"] + [s.message],
        "step": version,
        "scratch": {**prev.state["scratch"], **s.scratch},
    }
    usage = {"input_tokens": prev.usage["input_tokens"] + 120, "output_tokens": prev.usage["output_tokens"] + 40}
    return Version(state, usage, {"op": op, "v": version}, f"{stream}@{version}" if op == "save" else None,
                   is_auto(stream, version))


def lineage(stream: str) -> list[tuple[str, int, int]]:
    """(owner, first, last) version ranges of the stream's lineage, root first (last is open: -1)."""
    out: list[tuple[str, int, int]] = []
    current, limit = stream, -1
    while True:
        origin = parent_of(current)
        first = origin[1] + 1 if origin else 1
        out.append((current, first, limit))
        if origin is None:
            break
        current, limit = origin
    out.reverse()
    return out


def versions(stream: str, upto: int) -> Iterator[tuple[int, Version]]:
    """Every version 1..upto of the stream's lineage with what it holds (shares parents' versions)."""
    recent: dict[int, Version] = {}
    window: deque[int] = deque()
    prev: Version | None = None
    for owner, first, last in lineage(stream):
        stop = upto if last == -1 else min(last, upto)
        for v in range(first, stop + 1):
            current = advance(owner, v, prev, recent) if prev is not None else initial()
            recent[v] = current
            window.append(v)
            if len(window) > 8:
                recent.pop(window.popleft(), None)
            prev = current
            yield v, current


def version_of(stream: str, version: int) -> Version:
    out = None
    for _, out in versions(stream, version):
        pass
    assert out is not None
    return out
