"""Checkpoints taken for you every N calls (`@checkpoint`; around a risky block see eventckpt.rollback).

    @eventckpt.checkpoint(stream, every=5)      # saves the first argument after every 5th call (auto=True)
    def process(agent, msg): ...
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from .checks import check_task_id
from .errors import InvalidArgumentError
from .store import Store
from .stream import CheckpointStore

F = TypeVar("F", bound=Callable[..., Any])


def checkpoint(target: CheckpointStore | Store, key: str | None = None, every: int = 5, *,
               name: str | None = None, metadata: Mapping[str, Any] | None = None) -> Callable[[F], F]:
    """Decorator: after every `every`-th call that returns, save the call's first argument (a
    Checkpointable, a mapping, a dataclass) as an automatic checkpoint.

    `target` is a stream, or a Store with `key` naming the stream (default: the function's module and
    qualified name). Works on sync and async functions; a call that raises is not counted and saves nothing. On an
    async function the save runs on the event loop thread, so the saved state is the object as the call
    left it (a short SQLite commit, not a thread hop during which other coroutines could change it).
    """
    if type(every) is not int or every < 1:
        raise InvalidArgumentError("every", every, "must be an int >= 1")
    if isinstance(target, CheckpointStore):
        if key is not None and key != target.task_id:
            raise InvalidArgumentError("key", key, f"the decorator was given stream {target.task_id!r}; pass a Store to choose a key")
    elif not isinstance(target, Store):
        raise InvalidArgumentError("target", target, "must be a CheckpointStore (stream) or a Store")
    elif key is not None:
        check_task_id(key)
    extra = dict(metadata or {})

    def decorate(fn: F) -> F:
        stream = target if isinstance(target, CheckpointStore) else target.stream(key or f"{fn.__module__}.{fn.__qualname__}")
        lock = threading.Lock()
        calls = [0]

        def after_call(args: tuple[Any, ...]) -> None:
            with lock:
                calls[0] += 1
                n = calls[0]
            if n % every == 0:
                stream.save(args[0], metadata={**extra, "function": fn.__qualname__, "call": n}, name=name, auto=True)

        def first_argument(args: tuple[Any, ...]) -> None:
            if not args:
                raise InvalidArgumentError("args", args, f"@checkpoint saves the first positional argument of {fn.__qualname__}; it got none")

        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                first_argument(args)
                result = await fn(*args, **kwargs)
                after_call(args)
                return result

            wrapper: Any = async_wrapper
        else:
            @functools.wraps(fn)
            def sync_wrapper(*args: Any, **kwargs: Any) -> Any:
                first_argument(args)
                result = fn(*args, **kwargs)
                after_call(args)
                return result

            wrapper = sync_wrapper
        wrapper.stream = stream
        return wrapper  # type: ignore[no-any-return]

    return decorate
