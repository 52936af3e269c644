"""A fault-injecting SQLite VFS for the reliability tests (an apsw.VFS over SQLite's default one).

`FaultVFS` opens the real files and can, per instance:
- power_loss: keep every write to the database, its WAL and its rollback journal in memory until that
  file is synced (the idea of SQLite's crash-test VFS). The real file then holds exactly what a disk
  would hold after a power cut: synced data, nothing else. `power_cut(rng)` writes a random part of
  what is unsynced (disks reorder and tear writes) and leaves the rest unwritten; killing the process
  drops all of it.
- space: fail writes with SQLITE_FULL once this many bytes have been written (a full disk).
- readonly="file": open the database file read-only, as the OS does for a file without write
  permission in a writable directory; readonly="mount": open every file read-only and create none, as
  on a read-only mount. (chmod does not stop root, so the tests simulate permissions here.)
- hook: called as hook(event, kind, count, nbytes) before every write ("write") and sync ("sync"),
  where kind is "db", "wal", "journal" or "other", count the number of such events so far and nbytes
  the size of a write; a hook may kill the process to stop it at an exact moment.

Within a process, every connection to a file sees its buffered writes (they share one `PageCache`, as
connections share the OS's page cache); other processes do not (a real page cache would show them), so a
power-loss test lets one writer process work on the file at a time.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import apsw

Hook = Callable[[str, str, int, int], None]

_DB, _WAL, _JOURNAL = apsw.SQLITE_OPEN_MAIN_DB, apsw.SQLITE_OPEN_WAL, apsw.SQLITE_OPEN_MAIN_JOURNAL
SECTOR = 512


def _kind(flags: int) -> str:
    if flags & _DB:
        return "db"
    if flags & _WAL:
        return "wal"
    if flags & _JOURNAL:
        return "journal"
    return "other"


class FaultVFS(apsw.VFS):
    """A VFS named `name` that injects the faults it was built with (see the module docstring)."""

    def __init__(
        self,
        name: str,
        *,
        power_loss: bool = False,
        space: int | None = None,
        readonly: str | None = None,
        hook: Hook | None = None,
    ) -> None:
        self.name = name
        self.power_loss = power_loss
        self.space = space
        self.readonly = readonly
        self.hook = hook
        self.written = 0
        self.counts: Counter[tuple[str, str]] = Counter()  # (event, kind) -> how many so far
        self.files: list[FaultFile] = []  # the open ones
        self.caches: dict[str, PageCache] = {}  # file name -> what the process has of it, unsynced writes included
        super().__init__(name, "")

    def xOpen(self, name: Any, flags: list[int]) -> apsw.VFSFile:
        kind = _kind(flags[0])
        if flags[0] & apsw.SQLITE_OPEN_READWRITE and (
            (self.readonly == "file" and kind == "db") or (self.readonly == "mount" and kind != "other")
        ):
            # what exists opens read-only (SQLite's unix VFS falls back to that on EACCES and says so
            # in the output flags); on a read-only mount nothing new can be created
            flags[0] = (flags[0] & ~(apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)) | apsw.SQLITE_OPEN_READONLY
        file = FaultFile(self, name, flags)
        self.files.append(file)
        return file

    def xDelete(self, name: str, syncdir: bool) -> None:
        self.caches.pop(name, None)  # a file made again under the name starts empty
        super().xDelete(name, syncdir)

    def event(self, event: str, kind: str, nbytes: int = 0) -> None:
        self.counts[(event, kind)] += 1
        if self.hook is not None:
            self.hook(event, kind, self.counts[(event, kind)], nbytes)

    def power_cut(self, rng: random.Random, *, keep: float = 0.5) -> None:
        """Write a random part of every file's unsynced writes (each whole, torn at a sector, or not at
        all, in their order) and forget the rest. The caller then ends the process."""
        cut: set[int] = set()
        for file in self.files:
            if file.buffered and id(file.cache) not in cut:  # each file's writes once, whatever its handles
                cut.add(id(file.cache))
                file.power_cut(rng, keep)


class PageCache:
    """A file's bytes as the process sees them, and the writes and truncates not yet synced."""

    def __init__(self, data: bytearray) -> None:
        self.data = data
        self.pending: list[tuple[int, bytes] | int] = []
        self.handles = 0


class FaultFile(apsw.VFSFile):
    """One open file of a FaultVFS."""

    def __init__(self, vfs: FaultVFS, name: Any, flags: list[int]) -> None:
        super().__init__("", name, flags)
        self.vfs = vfs
        self.kind = _kind(flags[0])
        self.buffered = vfs.power_loss and self.kind != "other"
        self.readonly = bool(flags[0] & apsw.SQLITE_OPEN_READONLY)
        if self.buffered:
            key = name.filename() if isinstance(name, apsw.URIFilename) else str(name)
            cache = vfs.caches.get(key)
            if cache is None:
                size = super().xFileSize()
                cache = vfs.caches[key] = PageCache(bytearray(super().xRead(size, 0)) if size else bytearray())
            cache.handles += 1
            self.cache, self.key = cache, key

    def xClose(self) -> None:
        self.vfs.files.remove(self)
        if self.buffered:
            self.cache.handles -= 1
            if not self.cache.handles and not self.cache.pending:  # all synced: the real file says it all
                self.vfs.caches.pop(self.key, None)
        super().xClose()

    def xLock(self, level: int) -> None:
        if self.readonly and level > apsw.SQLITE_LOCK_SHARED:
            # on a read-only fd the unix VFS's write lock fails with an I/O error that SQLite ignores
            # when it closes a WAL database; apsw would surface a raised error from close(), so this
            # says busy, which SQLite ignores the same way
            raise apsw.BusyError("write lock on a read-only file (simulated)")
        super().xLock(level)

    # -- reading and writing ----------------------------------------------------------------------

    def xRead(self, amount: int, offset: int) -> bytes:
        if self.buffered:
            return bytes(self.cache.data[offset : offset + amount])  # short reads are zero-filled by apsw
        return super().xRead(amount, offset)

    def xWrite(self, data: bytes, offset: int) -> None:
        vfs = self.vfs
        vfs.event("write", self.kind, len(data))
        if vfs.space is not None and vfs.written + len(data) > vfs.space:
            raise apsw.FullError("database or disk is full (simulated)")
        vfs.written += len(data)
        if not self.buffered:
            super().xWrite(data, offset)
            return
        cache = self.cache
        end = offset + len(data)
        if end > len(cache.data):
            cache.data.extend(bytes(end - len(cache.data)))
        cache.data[offset:end] = data
        cache.pending.append((offset, bytes(data)))

    def xTruncate(self, newsize: int) -> None:
        if not self.buffered:
            super().xTruncate(newsize)
            return
        del self.cache.data[newsize:]
        self.cache.pending.append(newsize)

    def xFileSize(self) -> int:
        return len(self.cache.data) if self.buffered else super().xFileSize()

    def xSync(self, flags: int) -> None:
        self.vfs.event("sync", self.kind)
        if self.buffered:
            self._flush(self.cache.pending)
            self.cache.pending.clear()
        # no real fsync: a killed process loses nothing the OS already has, and these tests model the
        # disk as the real file

    # -- power loss -------------------------------------------------------------------------------

    def _flush(self, ops: list[tuple[int, bytes] | int]) -> None:
        for op in ops:
            if type(op) is int:
                super().xTruncate(op)
            else:
                offset, data = op  # type: ignore[misc]
                super().xWrite(data, offset)

    def power_cut(self, rng: random.Random, keep: float) -> None:
        if not self.buffered:
            return
        reached: list[tuple[int, bytes] | int] = []
        for op in self.cache.pending:
            roll = rng.random()
            if roll < keep:
                reached.append(op)
            elif roll < keep + (1 - keep) / 2 and type(op) is not int:
                offset, data = op  # type: ignore[misc]
                sectors = len(data) // SECTOR
                if sectors > 1:  # torn: the first sectors reached the disk
                    reached.append((offset, data[: SECTOR * rng.randrange(1, sectors)]))
        self._flush(reached)
        self.cache.pending.clear()
