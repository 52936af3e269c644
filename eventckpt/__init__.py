"""eventckpt: an embedded, single-file, event-sourced checkpoint store for long-running work.

    import eventckpt
    with eventckpt.open("agent.db") as store:
        task = store.stream("task-1")
        task.save({"messages": [...], "step": 1}, {"input_tokens": 120})
        task.state(1)            # time travel
        task.fork(at=1)          # branch instead of destroying history
"""

from .checkpoint import Checkpoint, ForkOrigin
from .codec import Unregistered
from .diffing import Change, Diff
from .errors import (
    CheckpointError,
    ConflictError,
    CorruptStoreError,
    DuplicateCheckpointIdError,
    EventCkptError,
    ForeignFileError,
    InvalidArgumentError,
    MigrationError,
    NewerSchemaError,
    OlderSchemaError,
    PathError,
    ReadOnlyStoreError,
    SchemaError,
    SerializationError,
    StorageError,
    StorageFullError,
    StoreUnavailableError,
    StoreBusyError,
    StoreClosedError,
    StoreNotFoundError,
    StreamExistsError,
    StreamInUseError,
    StreamNotFoundError,
    VersionNotFoundError,
)
from .query import HistoryEntry
from .snapshot import SnapshotPolicy
from .store import Store, copy, open
from .stream import CheckpointStore
from .tracked import TrackedDict, TrackedList, TrackedState
from .transaction import Transaction
from .verify import VerifyReport

# Agent integrations: objects, decorators, conventions, tools, retention, context, async
from .mixin import Checkpointable, Migrations, default_migrations, register_migration  # noqa: E402
from .autosave import checkpoint  # noqa: E402  (the decorator; the module is eventckpt.checkpoint)
from .conventions import meta  # noqa: E402
from .context import Context, ContextState  # noqa: E402
from .errors import RollbackError, UndoNotRecordedError, VersionInUseError  # noqa: E402
from .retention import Pruned  # noqa: E402
from .tools import ToolCall, ToolRegistry, UndoReport  # noqa: E402
from . import aio  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "Change",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "ConflictError",
    "CorruptStoreError",
    "Diff",
    "DuplicateCheckpointIdError",
    "EventCkptError",
    "ForeignFileError",
    "ForkOrigin",
    "HistoryEntry",
    "InvalidArgumentError",
    "MigrationError",
    "NewerSchemaError",
    "OlderSchemaError",
    "PathError",
    "ReadOnlyStoreError",
    "SchemaError",
    "SerializationError",
    "SnapshotPolicy",
    "StorageError",
    "StorageFullError",
    "StoreUnavailableError",
    "Store",
    "copy",
    "StoreBusyError",
    "StoreClosedError",
    "StoreNotFoundError",
    "StreamExistsError",
    "StreamInUseError",
    "StreamNotFoundError",
    "TrackedDict",
    "TrackedList",
    "TrackedState",
    "Transaction",
    "Unregistered",
    "VerifyReport",
    "VersionNotFoundError",
    "open",
]

__all__ += [  # agent integrations
    "Checkpointable",
    "Context",
    "ContextState",
    "Migrations",
    "Pruned",
    "RollbackError",
    "ToolCall",
    "ToolRegistry",
    "UndoNotRecordedError",
    "UndoReport",
    "VersionInUseError",
    "aio",
    "checkpoint",
    "default_migrations",
    "meta",
    "register_migration",
]
