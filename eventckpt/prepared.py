"""Prepared saves of a tracked state: the edits taken now, committed later (on another thread, in order).

    first = stream.prepare_save(state)    # takes the edits recorded so far
    state["log"].append(2)                # recorded for the next save
    second = stream.prepare_save(state)   # takes only that edit, and builds on the version `first` makes
    first(); second()                     # both commit (eventckpt.aio runs them in order on its worker)

A tracked state's recording hands out its recorded operations in order: `ops[:handed]` belong to prepared
saves that have not committed, the newest of which (`last`) the next one builds on. A save commits only
once the one before it did, on the head that one made, so another writer in between still gives
ConflictError. When a save fails, or a later one runs while an earlier one has not (it never will then),
every edit handed out goes back to the recording for the next save, and the saves prepared before that
are refused with ConflictError: none of them can commit on the head it was meant for. `epoch` counts those
give-backs, so a refused save of an older epoch does not give back what newer saves took.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .checks import check_options
from .commit import Recorded, UsageOf, commit, redoable
from .errors import ConflictError

if TYPE_CHECKING:
    from .checkpoint import Checkpoint
    from .core import Core
    from .tracked import Recording, TrackedState

PREPARED, RUNNING, COMMITTED, FAILED = range(4)


class PreparedSave:
    """One prepared save of a tracked state: the edits it took, and the prepared save it builds on."""

    __slots__ = ("recording", "before", "base", "events", "taken", "renewed", "epoch", "status", "made")

    def __init__(self, recording: Recording, before: PreparedSave | None, base: tuple[int, int | None],
                 events: list[Recorded], taken: int, renewed: list[tuple[list[Any], bytes, int]]) -> None:
        self.recording, self.before, self.base = recording, before, base  # base: the head when none is before
        self.events, self.taken, self.renewed = events, taken, renewed  # taken: how many of ops are in events
        self.epoch = recording.epoch
        self.status = PREPARED
        self.made: tuple[int, int | None] | None = None  # the head it committed

    def finish(self, status: int, made: tuple[int, int | None] | None = None) -> None:
        """(The recording's lock held.) A save waiting for this one on another thread wakes up."""
        self.status, self.made, self.before = status, made, None  # no chain of finished saves is kept alive
        self.recording.lock.notify_all()

    def claim(self, task_id: str) -> tuple[int, int | None]:
        """Start this save: the head it must build on (the one the save prepared before it made).
        ConflictError when that save failed or has not run (then it never will: the edits of both go back
        to the next save); waits when it is running on another thread."""
        recording = self.recording
        with recording.lock:
            while True:
                if self.status != PREPARED:
                    raise _refused(task_id, recording, "this prepared save already ran, or was refused when a save"
                                   " prepared after it ran first")
                before = self.before
                started = before  # the newest save before this one that started (None: all committed)
                while started is not None and started.status == PREPARED:
                    started = started.before
                if started is None or started.status != RUNNING:
                    if before is None or before.status == COMMITTED:
                        self.status, self.before = RUNNING, None
                        return self.base if before is None else before.made  # type: ignore[return-value]
                    while before is not None and before.status == PREPARED:  # not run yet: now never will
                        earlier = before.before
                        before.finish(FAILED)
                        before = earlier
                    self.give_back()
                    raise _refused(task_id, recording, "an earlier save of this tracked state, which these edits"
                                   " build on, did not commit; its edits and these stay recorded for the next save")
                recording.lock.wait()  # running on another thread: its outcome decides ours

    def committed(self, version: int, stream_id: int) -> None:
        """This save is the new head `version`: its edits, the first of the recording's ops, leave the
        list; any recorded since (while the commit ran on another thread) stay for the next save."""
        recording = self.recording
        with recording.lock:
            recording.version, recording.stream_id = version, stream_id
            del recording.ops[:self.taken]  # in place: an edit recorded meanwhile is appended to this same list
            recording.handed -= self.taken
            if recording.last is self:
                recording.last = None
            for entry, raw, closes in self.renewed:
                if entry[4] <= closes:  # else a whole-value set recorded since holds a newer encoding
                    entry[3] = raw
            self.finish(COMMITTED, (version, stream_id))

    def give_back(self) -> None:
        """This save will not commit (the recording's lock held): every edit handed out goes back to the
        next save, and the saves prepared so far (building on one that did not commit) are refused."""
        self.finish(FAILED)
        recording = self.recording
        if self.epoch == recording.epoch:  # else an earlier failure gave them back already
            recording.handed, recording.last, recording.spent = 0, None, True  # a failed commit may have folded them
            recording.epoch += 1


def _refused(task_id: str, recording: Recording, reason: str) -> ConflictError:
    return ConflictError(task_id, recording.version, recording.version, reason=reason)


def save_tracked(core: Core, task_id: str, state: TrackedState, usage_of: UsageOf, tool_rows: Any,
                 **options: Any) -> Callable[[], Checkpoint]:
    """What commits the edits `state` recorded so far as the next version of `task_id` (CheckpointStore.save
    of a tracked state): through the transaction path, refused unless the head is still the one they apply
    to. The edits are taken now; ones recorded later stay recorded for the next save. While this one has
    not committed, the next save of `state` builds on the version it will make (not on the version the
    state has now), so two prepared saves run in order both commit; ConflictError for the second if the
    first fails or is never run."""
    check_options(**options)
    prepared = state.prepare()

    def run() -> Checkpoint:
        base = prepared.claim(task_id)
        try:
            return commit(core, task_id, redoable(core, prepared.events), True, usage_of, checked=True,
                          tool_rows=tool_rows, expected_head=base, committed=prepared.committed, **options)
        except BaseException:
            if prepared.status == RUNNING:  # not committed (else committed() finished it)
                with prepared.recording.lock:
                    prepared.give_back()
            raise

    return run
