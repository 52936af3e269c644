"""What a saver remembers of each namespace's newest checkpoint, shared by the threads calling it.

LangGraph calls `put_writes` and `put` from background threads, and a task's writes may reach the saver
after the put of the step they belong to has started. A put that continues the thread's newest
checkpoint and finds a list channel grown by more items than the writes it knows of waits (at most
WAIT seconds, releasing everything) for writes still on their way; writes that arrive before their
checkpoint's own put returned are kept aside and handed to it (`early`).

Lock order: `cond` before the store's lock, never the other way round (put_writes records what it
wrote after releasing the store).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from langgraph.checkpoint.base import ChannelVersions

from .puts import Channel, Thread
from .writes import TaskWrites

WAIT = 0.05  # seconds a put waits for writes it can tell are missing
_REMEMBERED = 256  # namespaces remembered (each holds the list and dict objects of its last put alive)
_EARLY = 64  # checkpoints whose writes arrived before their put returned


class Memory:
    def __init__(self) -> None:
        self.cond = threading.Condition()
        self._threads: dict[tuple[str, str], Thread] = {}
        self._early: dict[tuple[str, str, str], dict[str, TaskWrites]] = {}

    def thread(self, key: tuple[str, str]) -> Thread | None:
        return self._threads.get(key)

    def remember(self, key: tuple[str, str], thread: Thread) -> None:
        """The namespace's newest checkpoint is now `thread` (writes that came early are handed over)."""
        early = self._early.pop((*key, thread.checkpoint_id), None)
        if early and thread.writes is not None:
            thread.writes.update(early)
        if len(self._threads) >= _REMEMBERED and key not in self._threads:
            self._threads.clear()
        self._threads[key] = thread

    def handed_out(self, key: tuple[str, str], checkpoint_id: str, stream_id: int, values: Mapping[str, Any]) -> None:
        """get_tuple handed out `values` for the namespace's newest checkpoint: a run continuing it
        builds its lists on these objects, so copies of these lists become the lists' `given` (puts.py).
        Without the lock, so that reads never wait for puts: the Channels are replaced in a new dict set
        in one step, so a put on another thread sees either dict, each Channel whole."""
        thread = self._threads.get(key)
        if thread is None or thread.checkpoint_id != checkpoint_id or thread.stream_id != stream_id:
            return
        channels = dict(thread.channels)
        for name, channel in channels.items():
            value = values.get(name)
            if channel.length is not None and type(value) is list and len(value) == channel.length:
                channels[name] = Channel(channel.encoding, channel.length, list(value))
        thread.channels = channels

    def forget(self) -> None:
        with self.cond:
            self._threads.clear()
            self._early.clear()

    def wrote(self, key: tuple[str, str], checkpoint_id: str, task_id: str, task: TaskWrites) -> None:
        """A task's writes (as now stored) on a checkpoint."""
        with self.cond:
            thread = self._threads.get(key)
            if thread is not None and thread.checkpoint_id == checkpoint_id:
                if thread.writes is not None:
                    thread.writes[task_id] = task
            else:
                self._early.setdefault((*key, checkpoint_id), {})[task_id] = task
                while len(self._early) > _EARLY:
                    del self._early[next(iter(self._early))]
            self.cond.notify_all()

    def wait_for_writes(self, key: tuple[str, str], parent: str | None, channel_values: Mapping[str, Any],
                        new_versions: ChannelVersions, source: Any) -> None:
        """Called holding `cond`: wait until the writes known for `parent` account for every list channel's
        growth, or WAIT seconds passed. Writes do not always account for it (a replacement by id grows a
        list by less than was written, another process may have written): the put then compares."""
        deadline = time.monotonic() + WAIT
        while True:
            thread = self._threads.get(key)
            if thread is None or thread.checkpoint_id != parent or thread.writes is None or source != "loop":
                return
            if not _missing(thread, channel_values, new_versions):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.cond.wait(left)


def _missing(thread: Thread, channel_values: Mapping[str, Any], new_versions: ChannelVersions) -> bool:
    """Whether a grown list channel grew by more items than the known writes to it hold."""
    for name in new_versions:
        known = thread.channels.get(name)
        value = channel_values.get(name)
        if known is None or known.length is None or type(value) is not list or len(value) <= known.length:
            continue
        written = 0
        for task in (thread.writes or {}).values():
            for write in task.writes.values():
                if write.channel == name:
                    written += len(write.live) if type(write.live) is list else 1
        if written < len(value) - known.length:
            return True
    return False
