"""When to write a snapshot, and what it writes.

A snapshot is written, in the same transaction as the version that triggers it, when the replay tail
since the last snapshot costs at least `max(min_tail_bytes, tail_ratio * L)`, where L is the bytes the
snapshot would write and an event costs its value's bytes plus `event_overhead` (so many tiny events
count as what they cost to replay). Each snapshot is paid for by at least `tail_ratio` times its size in
events, so snapshot bytes stay within a constant factor of event bytes however the state grows; and a
restore decodes one snapshot plus a tail bounded by the same rule.

What makes that affordable for a state that grows every step (a conversation) is sharing by key: a
snapshot writes in full only the top-level keys that changed since they were last written (and keys
smaller than `share_min_bytes`); every other key is a reference in the snapshot's manifest to where it
was last written, or to the event that created it when it was only ever appended to. A restore rebuilds
a referenced key from that base plus the key's own events (one index range, decoded in bulk), so a list
that only grows is never copied into snapshots at all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Union

import orjson

from .errors import CorruptStoreError, InvalidArgumentError
from .ops import APPEND, DELETE, EXTEND, SET
from .paths import Path

Base = Union[int, tuple[int, int], None]  # snapshot version | (version, seq) of the creating event | must write


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """The snapshot rule. The defaults suit agent state; `never()` and `every_version()` are for tests
    and special cases."""

    tail_ratio: float = 1.0
    min_tail_bytes: int = 64 * 1024
    event_overhead: int = 128
    share_min_bytes: int | None = 1024  # None: write every key in full each snapshot
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("tail_ratio", "min_tail_bytes", "event_overhead"):
            value = getattr(self, name)
            if type(value) not in (int, float) or not 0 <= value < math.inf:  # NaN fails too
                raise InvalidArgumentError(name, value, "must be a finite non-negative number")
        if type(self.enabled) is not bool:
            raise InvalidArgumentError("enabled", self.enabled, "must be a bool")
        if self.share_min_bytes is not None and (type(self.share_min_bytes) is not int or self.share_min_bytes < 0):
            raise InvalidArgumentError("share_min_bytes", self.share_min_bytes, "must be None or a non-negative int")

    @classmethod
    def never(cls) -> SnapshotPolicy:
        """No snapshots: every restore replays the lineage from its first event."""
        return cls(enabled=False)

    @classmethod
    def every_version(cls, *, share_min_bytes: int | None = 1024) -> SnapshotPolicy:
        """A snapshot with every version."""
        return cls(tail_ratio=0.0, min_tail_bytes=0, share_min_bytes=share_min_bytes)

    @property
    def sharing(self) -> bool:
        return self.share_min_bytes is not None


@dataclass(slots=True)
class KeyInfo:
    base: Base
    size: int


@dataclass(slots=True)
class Tracker:
    """What the next snapshot of one stream's head would have to write, and how much tail it saves."""

    policy: SnapshotPolicy
    snap_version: int = 0
    tail_cost: int = 0
    keys: dict[str, KeyInfo] = field(default_factory=dict)
    # the policy's figures observe() reads per event, copied once (the policy is frozen)
    _overhead: int | float = field(init=False, repr=False, compare=False)
    _share: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._overhead, self._share = self.policy.event_overhead, self.policy.sharing

    def observe(self, version: int, seq: int, op: str, path: Path, nbytes: int, value: Any) -> None:
        """Account one event (after it was applied)."""
        key = path[0]
        info = self.keys.get(key)
        cost = nbytes + self._overhead
        share = self._share
        if len(path) == 1:
            if op == DELETE:
                self.keys.pop(key, None)
            elif op == SET:
                self.keys[key] = KeyInfo((version, seq) if share and type(value) is list else None, nbytes)
            elif op == APPEND or op == EXTEND:
                if info is None:
                    self.keys[key] = KeyInfo((version, seq) if share else None, nbytes)
                else:
                    info.size += nbytes
                    if info.base is not None:
                        cost = 0  # rebuilt in bulk with its key, not replayed from the tail
            elif info is None:
                self.keys[key] = KeyInfo(None, nbytes)
            else:
                info.base = None
        elif info is not None:
            info.base = None
            info.size += nbytes
        self.tail_cost += cost

    def _shared(self, info: KeyInfo) -> bool:
        limit = self.policy.share_min_bytes
        return limit is not None and info.base is not None and info.size >= limit

    def due(self) -> bool:
        policy = self.policy
        if not policy.enabled or self.tail_cost < policy.min_tail_bytes:
            return False
        literal = sum(info.size for info in self.keys.values() if not self._shared(info))
        return self.tail_cost >= policy.tail_ratio * literal

    def plan(self) -> list[str]:
        """The keys the next snapshot writes in full."""
        return [key for key, info in self.keys.items() if not self._shared(info)]

    def written(self, version: int, sizes: dict[str, int]) -> str:
        """Record a snapshot at `version` that wrote `sizes` keys in full; returns its manifest JSON."""
        for key, size in sizes.items():
            info = self.keys[key]
            info.base, info.size = version, size
        self.snap_version, self.tail_cost = version, 0
        return manifest_json(self.keys)

    @classmethod
    def from_manifest(cls, policy: SnapshotPolicy, version: int, manifest: dict[str, Any]) -> Tracker:
        keys = {key: KeyInfo(base, size) for key, (base, size) in manifest.items()}
        return cls(policy, version, 0, keys)


def manifest_json(keys: dict[str, KeyInfo]) -> str:
    return orjson.dumps({key: [list(i.base) if type(i.base) is tuple else i.base, i.size] for key, i in keys.items()}).decode()


def parse_manifest(text: str) -> dict[str, tuple[Base, int]]:
    try:
        data = orjson.loads(text)
        return {key: (_base_from_json(base), int(size)) for key, (base, size) in data.items()}
    except (orjson.JSONDecodeError, TypeError, ValueError, AttributeError) as exc:
        raise CorruptStoreError(f"a snapshot manifest is damaged: {exc}", code="corrupt") from None


def _base_from_json(base: Any) -> Base:
    if type(base) is list:
        return (int(base[0]), int(base[1]))
    return base if base is None else int(base)
