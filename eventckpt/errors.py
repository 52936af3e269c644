"""The package's errors: one root, and subclasses that carry the data of what went wrong."""

from __future__ import annotations

from typing import Any


class EventCkptError(Exception):
    """Root of every error eventckpt raises on purpose."""


class CheckpointError(EventCkptError):
    """A checkpoint lifecycle error (the name the orbiter API uses)."""


class StreamNotFoundError(CheckpointError, LookupError):
    """The named stream does not exist."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"stream {task_id!r} does not exist")


class StreamExistsError(CheckpointError):
    """A stream with this name already exists (fork into a fresh name)."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"stream {task_id!r} already exists")


class StreamInUseError(CheckpointError):
    """A stream cannot be deleted while forks depend on its history, nor deleted or thinned out (prune,
    expire, remove) while it holds a LangGraph thread's checkpoints (`thread`: (thread id, namespace); the
    saver's delete_thread, prune and delete_for_runs act on those)."""

    def __init__(self, task_id: str, forks: list[str], thread: tuple[str, str] | None = None,
                 advice: str = "delete it with EventCkptSaver.delete_thread") -> None:
        self.task_id = task_id
        self.forks = forks
        self.thread = thread
        if thread is not None:
            super().__init__(
                f"stream {task_id!r} holds LangGraph thread {thread[0]!r} (namespace {thread[1]!r}); {advice}"
            )
            return
        super().__init__(
            f"stream {task_id!r} has forks {forks!r} that share its history; "
            "delete them first or pass forks=True"
        )


class VersionNotFoundError(CheckpointError, LookupError):
    """The requested version does not exist in the stream (or was pruned)."""

    def __init__(self, task_id: str, version: Any, head: int) -> None:
        self.task_id = task_id
        self.version = version
        self.head = head
        super().__init__(f"stream {task_id!r} has no version {version!r} (head is {head})")


class ConflictError(CheckpointError):
    """The stream's head moved since the caller read it (optimistic concurrency)."""

    def __init__(self, task_id: str, expected: int, actual: int, recreated: bool = False, *,
                 reason: str | None = None) -> None:
        self.task_id = task_id
        self.expected = expected
        self.actual = actual
        self.recreated = recreated  # the stream was deleted and created again: its versions may even match
        if reason is not None:
            shown = f"stream {task_id!r}: {reason}"
        elif recreated:
            shown = (f"stream {task_id!r} was deleted and created again since version {expected}, which the"
                     f" changes apply to (the new stream's head is version {actual})")
        else:
            shown = f"stream {task_id!r}: expected head version {expected}, but it is {actual}"
        super().__init__(shown)


class DuplicateCheckpointIdError(CheckpointError):
    """A checkpoint id is already used in this stream's tree."""

    def __init__(self, task_id: str, checkpoint_id: str) -> None:
        self.task_id = task_id
        self.checkpoint_id = checkpoint_id
        super().__init__(f"checkpoint id {checkpoint_id!r} is already used in the tree of {task_id!r}")


class InvalidArgumentError(CheckpointError, ValueError):
    """An argument has the wrong type or value."""

    def __init__(self, argument: str, value: Any, reason: str) -> None:
        self.argument = argument
        self.value = value
        self.reason = reason
        shown = repr(value)
        if len(shown) > 80:
            shown = shown[:77] + "..."
        super().__init__(f"invalid {argument} {shown}: {reason}")


class PathError(InvalidArgumentError):
    """A path is malformed (`path` is then the text given), or does not fit the state (missing key, wrong
    container, bad index)."""

    def __init__(self, path: tuple[Any, ...] | str, reason: str) -> None:
        super().__init__("path", path, reason)
        self.path = path


class SerializationError(CheckpointError, ValueError):
    """A value cannot be stored (or stored data cannot be read back)."""

    def __init__(self, path: tuple[Any, ...], reason: str, type_name: str | None = None) -> None:
        self.path = path
        self.reason = reason
        self.type_name = type_name
        where = "".join(f"[{p!r}]" for p in path) or "the value"
        super().__init__(f"cannot serialize {where}: {reason}")


class MigrationError(CheckpointError):
    """A stored object's schema version cannot be migrated to the current one."""

    def __init__(self, class_name: str, found: str, wanted: str, reason: str) -> None:
        self.class_name = class_name
        self.found = found
        self.wanted = wanted
        super().__init__(f"cannot migrate {class_name} state from version {found!r} to {wanted!r}: {reason}")


class SchemaError(EventCkptError):
    """The file is not a usable eventckpt store."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class ForeignFileError(SchemaError):
    """The file is not an eventckpt store (another SQLite database, or not SQLite at all)."""


class StoreNotFoundError(SchemaError, LookupError):
    """There is no store to read at the path: the file is missing or empty (raised by `open` with
    `create=False` or `readonly=True`, and by every CLI command that reads; the file is left as it was)."""


class NewerSchemaError(SchemaError):
    """The file was written by a newer eventckpt whose schema this version does not know."""

    def __init__(self, path: str, found: int, supported: int) -> None:
        self.found = found
        self.supported = supported
        super().__init__(
            path, f"schema version {found} is newer than this eventckpt supports ({supported}); upgrade eventckpt"
        )


class OlderSchemaError(SchemaError):
    """A read-only open of a store written by an earlier eventckpt: reading never upgrades a store, so it
    must be opened once for writing first (`eventckpt upgrade STORE`)."""

    def __init__(self, path: str, found: int, current: int) -> None:
        self.found = found
        self.current = current
        super().__init__(
            path, f"the store holds schema version {found} and this eventckpt reads version {current}; reading never"
            f" upgrades a store: open it once for writing (eventckpt upgrade STORE) to upgrade it"
        )


class StorageError(EventCkptError):
    """The storage engine failed (I/O, locking, corruption); the message names the cause."""

    def __init__(self, message: str, *, code: str | None = None) -> None:
        self.code = code
        super().__init__(message)


class StoreBusyError(StorageError):
    """Another process held the write lock for longer than the busy timeout."""


class ReadOnlyStoreError(StorageError):
    """The store was opened read-only, or its file cannot be written."""


class StorageFullError(StorageError):
    """The disk (or the file size limit) is full; nothing of the failed write was kept."""


class CorruptStoreError(StorageError):
    """The file's contents are damaged or disagree with the journal."""


class StoreUnavailableError(StorageError):
    """The database server could not be reached, or the connection dropped (PostgreSQL). `committed` says
    what became of the write in flight: False when it is known not to have committed (it is safe to
    retry), None when that cannot be known."""

    def __init__(self, message: str, *, code: str | None = None, committed: bool | None = False) -> None:
        self.committed = committed
        super().__init__(message, code=code)


class StoreClosedError(EventCkptError):
    """The store was closed."""

    def __init__(self) -> None:
        super().__init__("the store is closed")


# -- agent integrations: objects, retention ---------------------------------------------------------


class RollbackError(CheckpointError):
    """A block under `rollback_on_error` raised, and restoring the object afterwards failed too: the
    object may still hold the block's partial changes. `original` is the block's exception."""

    def __init__(self, task_id: str, version: int, original: BaseException, failure: BaseException) -> None:
        self.task_id = task_id
        self.version = version
        self.original = original
        super().__init__(
            f"stream {task_id!r}: the block raised {type(original).__name__}: {original}; restoring version "
            f"{version} then failed with {type(failure).__name__}: {failure}"
        )


class UndoNotRecordedError(CheckpointError):
    """undo_tools ran reverses, then could not commit the version recording them (`cause`). Nothing can
    take a reverse back, and an unrecorded one would run again at the next undo: record `records` (the
    undo records, tool calls) yourself once the store can be written, with `metadata` as the version's
    metadata. `report` is the UndoReport of what ran. `committed` is None when the commit may have
    landed after all (a PostgreSQL connection lost during it): look for the records' call ids in
    `tool_calls()` before writing them."""

    def __init__(self, task_id: str, report: Any, records: list[Any], metadata: dict[str, Any],
                 cause: BaseException) -> None:
        self.task_id = task_id
        self.report = report
        self.records = records
        self.metadata = metadata
        self.cause = cause
        self.committed: bool | None = getattr(cause, "committed", False)
        maybe = " (it may have committed: check tool_calls() first)" if self.committed is None else ""
        super().__init__(
            f"stream {task_id!r}: {len(records)} undo record(s) ({len(report.undone)} reverse(s) ran, "
            f"{len(report.failed)} failed) were not written{maybe} ({type(cause).__name__}: {cause}); write "
            "them from this error's `records`, or the next undo_tools runs those reverses again"
        )


class VersionInUseError(CheckpointError):
    """A version cannot be removed: it is the stream's head, or forks branch from it."""

    def __init__(self, task_id: str, version: int, reason: str) -> None:
        self.task_id = task_id
        self.version = version
        super().__init__(f"stream {task_id!r}: version {version} cannot be removed: {reason}")
