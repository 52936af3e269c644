"""Checkpoint: one version of a stream, as an immutable record."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .checks import whole_number
from .errors import InvalidArgumentError

_UNSET: Any = object()


@dataclass(frozen=True, slots=True)
class ForkOrigin:
    """Where a fork branched off: its parent stream and the parent's version it shares up to."""

    task_id: str
    version: int


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def format_time(moment: dt.datetime) -> str:
    """The stored form of a timestamp: ISO-8601 UTC with microseconds and a Z."""
    return moment.astimezone(dt.timezone.utc).isoformat(timespec="microseconds")[:-6] + "Z"


_second: list[Any] = [-1, ""]


def now() -> str:
    """The current UTC time in its stored form (the formatted second is reused: this runs per save)."""
    micros = time.time_ns() // 1000
    seconds, micro = divmod(micros, 1_000_000)
    if seconds != _second[0]:
        _second[0], _second[1] = seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return "%s.%06dZ" % (_second[1], micro)


def parse_time(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.timezone.utc)
    return moment


class Checkpoint:
    """An immutable snapshot of a stream's state at one version.

    `values` is loaded on first access when the checkpoint came from a store (a save or a listing costs
    nothing for the state it does not read); each checkpoint owns its values, so mutating them never
    changes the store.
    """

    __slots__ = ("task_id", "version", "_values", "_loader", "token_usage", "metadata", "_created",
                 "name", "auto", "parent", "checkpoint_id")

    task_id: str
    version: int
    token_usage: dict[str, int | float]
    metadata: dict[str, Any]
    name: str | None
    auto: bool
    parent: ForkOrigin | None
    checkpoint_id: str | None

    def __init__(
        self,
        task_id: str,
        version: int,
        values: Any = _UNSET,
        token_usage: Mapping[str, int | float] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: dt.datetime | str | None = None,
        *,
        name: str | None = None,
        auto: bool = False,
        parent: ForkOrigin | None = None,
        checkpoint_id: str | None = None,
        loader: Callable[[], Any] | None = None,
    ) -> None:
        if values is _UNSET and loader is None:
            raise InvalidArgumentError("values", None, "a Checkpoint needs values")
        if created_at is None:
            created_at = utc_now()
        elif type(created_at) is not str and getattr(created_at, "tzinfo", None) is None:
            raise InvalidArgumentError("created_at", created_at, "must be a timezone-aware datetime")
        setter = object.__setattr__
        setter(self, "task_id", task_id)
        setter(self, "version", version)
        setter(self, "_values", values)
        setter(self, "_loader", loader if values is _UNSET else None)
        setter(self, "token_usage", dict(token_usage or {}))
        setter(self, "metadata", dict(metadata or {}))
        setter(self, "_created", created_at)  # the stored ISO text until someone reads it
        setter(self, "name", name)
        setter(self, "auto", bool(auto))
        setter(self, "parent", parent)
        setter(self, "checkpoint_id", checkpoint_id)

    @property
    def created_at(self) -> dt.datetime:
        """When this version was committed (timezone-aware UTC)."""
        if type(self._created) is str:
            object.__setattr__(self, "_created", parse_time(self._created))
        return self._created  # type: ignore[return-value]

    @property
    def values(self) -> Any:
        """The state at this version (a dict, or the `as_type` instance it was read as)."""
        if self._values is _UNSET:
            object.__setattr__(self, "_values", self._loader())  # type: ignore[misc]
            object.__setattr__(self, "_loader", None)
        return self._values

    @property
    def id(self) -> str:
        """A stable string naming this checkpoint within its stream: the caller's checkpoint_id, else the
        version number (versions are never renumbered; retention leaves holes instead). An id made only of
        ASCII digits always reads as a version number (eventckpt.aio), so a caller's checkpoint_id of that
        form (the sync save takes it) is not the id: the version number is, and "3" never names two."""
        if self.checkpoint_id is not None and not whole_number(self.checkpoint_id):
            return self.checkpoint_id
        return str(self.version)

    @property
    def user_id(self) -> Any:
        """The owner recorded in metadata (conventions.USER_ID), or None."""
        return self.metadata.get("user_id")

    @property
    def node(self) -> Any:
        """The node that made this checkpoint, from metadata (conventions.NODE), or None."""
        return self.metadata.get("node")

    @property
    def step(self) -> Any:
        """The agent step recorded in metadata (conventions.STEP), or None."""
        return self.metadata.get("step")

    @classmethod
    def trusted(cls, task_id: str, version: int, token_usage: dict[str, int | float], metadata: dict[str, Any],
                created_at: str, name: str | None, auto: bool, parent: ForkOrigin | None,
                checkpoint_id: str | None, loader: Callable[[], Any]) -> Checkpoint:
        """A checkpoint read from a store (trusted, already-decoded fields; values loaded on first access):
        a log of thousands of versions builds one per row at well under half the cost of __init__, by
        filling a twin with the same slots (plain attribute stores) and then giving it this class."""
        cp = _Unfrozen(task_id, version, loader, token_usage, metadata, created_at, name, auto, parent, checkpoint_id)
        object.__setattr__(cp, "__class__", cls)
        return cp  # type: ignore[return-value]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Checkpoint is frozen; cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Checkpoint is frozen; cannot delete {name!r}")

    def _key(self) -> tuple[Any, ...]:
        return (self.task_id, self.version, self.values, self.token_usage, self.metadata, self.created_at,
                self.name, self.auto, self.parent, self.checkpoint_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Checkpoint):
            return NotImplemented
        if (self.task_id, self.version, self.created_at) != (other.task_id, other.version, other.created_at):
            return False
        return self._key() == other._key()

    __hash__ = None  # type: ignore[assignment]  # values are mutable

    def __repr__(self) -> str:
        extra = f", name={self.name!r}" if self.name is not None else ""
        return (f"Checkpoint(task_id={self.task_id!r}, version={self.version}, "
                f"created_at={self.created_at.isoformat()!r}{extra}, auto={self.auto})")

    def summary(self) -> str:
        """One line: version, name, auto/manual, when, owner/node/step, fork origin, token usage and the
        other scalar metadata, e.g. `t v3 'before tool' | manual | 2026-... | user=7 node='agent' step=3`."""
        label = f"{self.name!r}" if self.name is not None else "(unnamed)"  # the name "" is a name: ''
        kind = "auto" if self.auto else "manual"
        usage = ", ".join(f"{k}={v}" for k, v in sorted(self.token_usage.items()))
        conventions = {"user_id": "user", "node": "node", "step": "step"}
        who = " ".join(f"{short}={self.metadata[key]!r}" for key, short in conventions.items() if key in self.metadata)
        meta = ", ".join(f"{k}={v!r}" for k, v in sorted(self.metadata.items())
                         if k not in conventions and not isinstance(v, (dict, list)))
        parts = [f"{self.task_id} v{self.version} {label}", kind, format_time(self.created_at)]
        if who:
            parts.append(who)
        if self.parent:
            parts.append(f"fork of {self.parent.task_id}@{self.parent.version}")
        if usage:
            parts.append(f"tokens: {usage}")
        if meta:
            parts.append(meta)
        return " | ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        """A plain dict: task_id, version, values, token_usage, metadata, created_at (ISO string), and the
        extras (name, auto, parent, checkpoint_id)."""
        return {
            "task_id": self.task_id,
            "version": self.version,
            "values": self.values,
            "token_usage": dict(self.token_usage),
            "metadata": dict(self.metadata),
            "created_at": self.created_at.isoformat(),
            "name": self.name,
            "auto": self.auto,
            "parent": {"task_id": self.parent.task_id, "version": self.parent.version} if self.parent else None,
            "checkpoint_id": self.checkpoint_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Checkpoint:
        """The inverse of `to_dict` (accepts ISO-8601 strings or datetimes for created_at)."""
        if not isinstance(data, Mapping):
            raise InvalidArgumentError("data", data, "Checkpoint.from_dict needs a mapping")
        try:
            created = data.get("created_at")
            if isinstance(created, str):
                created = parse_time(created)
            parent = data.get("parent")
            return cls(
                data["task_id"],
                data["version"],
                data["values"],
                data.get("token_usage") or {},
                data.get("metadata") or {},
                created,
                name=data.get("name"),
                auto=bool(data.get("auto", False)),
                parent=ForkOrigin(parent["task_id"], parent["version"]) if parent else None,
                checkpoint_id=data.get("checkpoint_id"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError("data", data, f"not a checkpoint dict ({exc!r})") from None


class _Unfrozen:
    """Checkpoint's slot layout without its frozen __setattr__: Checkpoint._stored fills one with plain
    attribute stores, then switches its __class__ (allowed between classes of identical slots)."""

    __slots__ = Checkpoint.__slots__

    def __init__(self, task_id: str, version: int, loader: Callable[[], Any], token_usage: dict[str, int | float],
                 metadata: dict[str, Any], created_at: str, name: str | None, auto: bool, parent: ForkOrigin | None,
                 checkpoint_id: str | None) -> None:
        self.task_id = task_id
        self.version = version
        self._values = _UNSET
        self._loader = loader
        self.token_usage = token_usage
        self.metadata = metadata
        self._created = created_at
        self.name = name
        self.auto = auto
        self.parent = parent
        self.checkpoint_id = checkpoint_id

