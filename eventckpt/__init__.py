"""eventckpt: an embedded, single-file, event-sourced checkpoint store for long-running work.

    import eventckpt
    with eventckpt.open("agent.db") as store:
        task = store.stream("task-1")
        task.save({"messages": [...], "step": 1}, {"input_tokens": 120})
        task.state(1)            # time travel
        task.fork(at=1)          # branch instead of destroying history
"""

from .checkpoint import Checkpoint, ForkOrigin
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
    PathError,
    ReadOnlyStoreError,
    SchemaError,
    SerializationError,
    StorageError,
    StorageFullError,
    StoreBusyError,
    StoreClosedError,
    StreamExistsError,
    StreamInUseError,
    StreamNotFoundError,
    VersionNotFoundError,
)
from .query import HistoryEntry
from .snapshot import SnapshotPolicy
from .store import Store, open
from .stream import CheckpointStore
from .transaction import Transaction
from .verify import VerifyReport

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
    "PathError",
    "ReadOnlyStoreError",
    "SchemaError",
    "SerializationError",
    "SnapshotPolicy",
    "StorageError",
    "StorageFullError",
    "Store",
    "StoreBusyError",
    "StoreClosedError",
    "StreamExistsError",
    "StreamInUseError",
    "StreamNotFoundError",
    "Transaction",
    "VerifyReport",
    "VersionNotFoundError",
    "open",
]
