"""Pausing the cyclic garbage collector around work that builds many objects and no cycles."""

from __future__ import annotations

import gc
from contextlib import AbstractContextManager


def quiet_gc() -> AbstractContextManager[None]:
    """Pause the cyclic GC while decoding big payloads: JSON data has no cycles, and the collector
    would otherwise rescan the growing heap many times during one large decode."""
    return _QuietGc()


class _QuietGc:
    """What quiet_gc() returns (a class: reads enter several, and a generator-based one costs more)."""

    __slots__ = ("_paused",)

    def __enter__(self) -> None:
        self._paused = gc.isenabled()
        if self._paused:
            gc.disable()

    def __exit__(self, *exc: object) -> None:
        if self._paused:
            gc.enable()
