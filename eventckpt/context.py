"""Context: a task's working state and token usage that snapshots into a stream (the orbiter pattern).

    ctx = Context("task-1", store)                 # or Context(stream); a private in-memory store if none
    ctx.state.set("progress", "step 1")
    ctx.add_tokens({"input_tokens": 100})
    cp = ctx.snapshot(metadata={"step": 1})        # one version of the stream
    again = Context.restore(cp, store)             # a new, independent Context at that checkpoint

A Context never shares mutable data with a checkpoint: a snapshot stores an encoded copy, and a restore
deep-copies the checkpoint's values.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

from .checkpoint import Checkpoint
from .codec import Codec
from .errors import InvalidArgumentError
from .store import Store
from .store import open as open_store
from .checks import check_usage
from .stream import CheckpointStore


class ContextState(MutableMapping[str, Any]):
    """The context's key-value state: a mapping with `get`/`set`/`delete` verbs."""

    def __init__(self, values: Mapping[str, Any] | None = None, codec: Codec | None = None) -> None:
        self._data: dict[str, Any] = dict(values or {})
        self._codec = codec or Codec()  # the store's: it copies what that store takes (NaN with allow_nan)

    def set(self, key: str, value: Any) -> None:
        if type(key) is not str:
            raise InvalidArgumentError("key", key, "state keys are str")
        self._data[key] = value

    def delete(self, key: str) -> None:
        self._data.pop(key, None)

    def to_dict(self) -> dict[str, Any]:
        """An independent deep copy of the state."""
        return self._codec.copy(self._data)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.set(key, value)

    def __delitem__(self, key: str) -> None:
        del self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"ContextState({self._data!r})"


class Context:
    """A task's state and token usage, with `snapshot()` into its stream and `Context.restore(cp)`."""

    def __init__(self, task: str | CheckpointStore, store: Store | None = None, *,
                 state: Mapping[str, Any] | None = None, token_usage: Mapping[str, int | float] | None = None) -> None:
        if store is not None and not isinstance(store, Store):
            # a path is an easy mistake (every other entry point takes one): say so, not AttributeError
            raise InvalidArgumentError("store", store, "must be a Store (eventckpt.open(path)), not a path")
        if isinstance(task, CheckpointStore):
            if store is not None and store is not task.store:
                raise InvalidArgumentError("store", store, "the stream already belongs to another store")
            self.stream = task
        else:
            self.stream = (store or open_store(":memory:")).stream(task)
        if state is None and token_usage is None and self.stream.version:
            # a stream with history goes on from its head: a first snapshot of an empty Context would
            # silently drop every key and counter the stream holds
            head = self.stream.latest
            state, token_usage = (head.values, head.token_usage) if head is not None else (None, None)
        codec = self.stream.core.codec  # copies exactly as this store saves and restores (its types, allow_nan)
        self.state = ContextState(codec.copy(dict(state or {})), codec)
        self._usage: dict[str, int | float] = dict(check_usage(token_usage) or {})

    @property
    def task_id(self) -> str:
        return self.stream.task_id

    @property
    def token_usage(self) -> dict[str, int | float]:
        """A copy of the cumulative token counters."""
        return dict(self._usage)

    def add_tokens(self, usage: Mapping[str, int | float]) -> None:
        """Add to the token counters (`{"input_tokens": 100}`)."""
        for key, n in (check_usage(usage) or {}).items():
            self._usage[key] = self._usage.get(key, 0) + n

    def snapshot(self, *, metadata: Mapping[str, Any] | None = None, name: str | None = None,
                 auto: bool = False) -> Checkpoint:
        """Save the state and token usage as the next version of the stream."""
        return self.stream.save(self.state._data, self._usage, metadata=metadata, name=name, auto=auto)

    @classmethod
    def restore(cls, checkpoint: Checkpoint, store: Store | None = None) -> Context:
        """A new Context holding a deep copy of the checkpoint's values and token usage. With `store`,
        it snapshots into the checkpoint's stream there; otherwise into a private in-memory store."""
        if not isinstance(checkpoint, Checkpoint):
            raise InvalidArgumentError("checkpoint", checkpoint, "must be a Checkpoint")
        if not isinstance(checkpoint.values, Mapping):
            raise InvalidArgumentError("checkpoint", checkpoint, "its values are not a mapping of state keys")
        return cls(checkpoint.task_id, store, state=checkpoint.values, token_usage=checkpoint.token_usage)

    def __repr__(self) -> str:
        return f"Context(task_id={self.task_id!r}, keys={sorted(self.state)!r}, token_usage={self._usage!r})"
