"""verify: check that a file's journal is intact and its snapshots agree with its events.

- The checksum chain: every version's checksum is recomputed from its row, its events (in seq order)
  and the stored checksum of the version before it in its lineage (the fork point's, for a fork's first
  own version), so an altered, missing or reordered event or version row shows at that version, and a
  rewritten checksum at the version after it. Retention (prune, expire, remove) leaves holes in the
  version numbers and rechains the versions it keeps, so a hole is not a fault, but a version deleted
  any other way breaks the chain at the next one. Seqs must be 0..n-1, and the stored event count and
  bytes must match.
- Snapshots: each stream tree is replayed once from its events (a fork continues from a copy of its
  parent's state at the fork point), and every snapshot is compared when the replay reaches it: keys
  written in full must equal the replayed values (as canonical JSON, types included), and every shared
  key's manifest entry must be structurally sound: its base snapshot holds the key, or its base event
  created it, and since then only appends/extends at exactly that key touched it. Values are replayed
  as their stored JSON (eventckpt.stored_fold), so classes this process does not know cannot cause false
  alarms.
- PRAGMA integrity_check and foreign_key_check, and metadata_index against versions.metadata.

A snapshot that no later manifest refers to can be deleted without a trace and without harm: restores
fall back to an earlier snapshot. Everything else that changes what a restore returns is reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from .errors import StorageError
from .integrity import ROOT, version_checksum
from .journal import Journal, Segment, StreamRow, segments_for
from .ops import APPEND, EXTEND, SET
from .paths import from_text
from .stored_fold import StoredFolder

if TYPE_CHECKING:
    from .core import Core

_BATCH = 2000  # versions read per query
_CANON = orjson.OPT_SORT_KEYS


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing verify found wrong: `kind` is checksum, version, events, snapshot, replay, fork or file."""

    kind: str
    task_id: str | None
    version: int | None
    detail: str

    def __str__(self) -> str:
        if self.task_id is None and self.version is None:  # the whole file: `file: ...`, not `file: file: ...`
            return f"{self.kind}: {self.detail}"
        where = f"{self.task_id}@{self.version}" if self.version is not None else self.task_id
        return f"{self.kind}: {where}: {self.detail}"


@dataclass(frozen=True)
class VerifyReport:
    """What verify checked, and every problem it found (`ok` when there is none)."""

    streams: int
    versions: int
    events: int
    snapshots: int
    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify(core: Core, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """See Store.verify."""
    with core.session() as journal, journal.read():
        checker = _Checker(core, journal, progress)
        for step in (checker.run, checker.file):
            try:
                step()
            except StorageError as exc:  # a damaged page: report it and go on to SQLite's own checks
                checker.problems.append(Problem("file", None, None, str(exc)))
        return VerifyReport(len(checker.rows), checker.versions, checker.events, checker.snapshots,
                            tuple(checker.problems))


@dataclass
class _Lineage:
    """The replay of one lineage up to some version: the state as plain JSON, and per top-level key what
    the snapshot manifests may claim about it."""

    state: dict[str, Any] = field(default_factory=dict)
    origin: dict[str, tuple[int, int]] = field(default_factory=dict)  # key -> event since which only appends
    changed: dict[str, int] = field(default_factory=dict)  # key -> last version that did more than append
    checksum: bytes | None = ROOT
    sound: bool = True  # False once an event did not fit the replayed state

    def copy(self) -> _Lineage:
        return _Lineage(orjson.loads(orjson.dumps(self.state)), dict(self.origin), dict(self.changed), self.checksum, self.sound)

    def fold(self, folder: StoredFolder, version: int, seq: int, op: str, path: tuple[Any, ...], value: Any) -> None:
        key = path[0]
        if len(path) == 1 and op in (APPEND, EXTEND):
            if key not in self.state:
                self.origin[key] = (version, seq)
        else:
            self.changed[key] = version
            if len(path) == 1 and op == SET:
                self.origin[key] = (version, seq)
            else:
                self.origin.pop(key, None)
        folder.fold(self.state, op, path, value)


class _Checker:
    def __init__(self, core: Core, journal: Journal, progress: Callable[[int, int], None] | None) -> None:
        self.core, self.journal, self.progress = core, journal, progress
        self.folder = StoredFolder()
        self.rows: list[StreamRow] = []
        self.problems: list[Problem] = []
        self.versions = self.events = self.snapshots = self.done = 0
        self.literal: dict[tuple[int, int], frozenset[str]] = {}  # (stream, version) of a snapshot -> its keys
        self.forks: dict[tuple[int, int], list[StreamRow]] = {}  # (owner, version) -> forks branching there

    def problem(self, kind: str, row: StreamRow, version: int | None, detail: str) -> None:
        self.problems.append(Problem(kind, row.name, version, detail))

    def file(self) -> None:
        self.problems += [Problem("file", None, None, text) for text in self.journal.integrity_problems()]

    def run(self) -> None:
        journal = self.journal
        self.rows = journal.streams_all()
        self.extents = {row.id: journal.extent(row) for row in self.rows}
        self.total = sum(max(0, self.extents[row.id][1] - (row.fork_version or 0)) for row in self.rows)
        by_id = {row.id: row for row in self.rows}
        starts = []
        for row in self.rows:
            if row.parent_id is None or not row.fork_version:
                starts.append(row)
                continue
            parent = by_id.get(row.parent_id)
            chain = self.core.lineage(journal, parent) if parent is not None else []
            owner = next((s.stream_id for s in segments_for(chain, row.fork_version) if s.hi == row.fork_version), None)
            if owner is None or self.extents[owner][1] < row.fork_version:
                self.problem("fork", row, None, f"its fork point {row.fork_version} is not a version of its parent")
            else:
                self.forks.setdefault((owner, row.fork_version), []).append(row)
        for row in starts:
            try:
                self.tree(row)
            except StorageError as exc:  # a damaged page in this tree: report it, check the others
                self.problem("file", row, None, str(exc))
        if self.progress:
            self.progress(self.done, self.total)

    def tree(self, root: StreamRow) -> None:
        """Replay a stream tree depth first: a fork is replayed when its parent's replay reaches its fork
        point, from a copy of the state there (a stack of generators, not recursion: forks of forks nest
        without limit, and only one copy per level is alive)."""
        stack = [self.stream(root, _Lineage())]
        while stack:
            fork = next(stack[-1], None)
            if fork is None:
                stack.pop()
            else:
                stack.append(self.stream(*fork))

    def stream(self, row: StreamRow, lineage: _Lineage) -> Iterator[tuple[StreamRow, _Lineage]]:
        """Check one stream's own versions, yielding (fork, copy of the state) at each fork point."""
        journal = self.journal
        first = (row.fork_version or 0) + 1
        low, high = self.extents[row.id]
        if low and low < first:
            self.problem("version", row, low, f"a fork's own versions start at {first}")
        snaps = set(journal.snapshot_versions(row))
        self.snapshots += len(snaps)
        for lo in range(first, high + 1, _BATCH):
            hi = min(high, lo + _BATCH - 1)
            try:
                vrows, events = self.read(row, lo, hi)
                unread: dict[int, str] = {}
            except StorageError:  # a row that cannot be read (a damaged string): find its version, go on
                vrows, events, unread = self.read_each(row, lo, hi)
            for version in range(lo, hi + 1):
                if version in unread:
                    self.problem("file", row, version, f"its rows cannot be read ({unread[version]})")
                    lineage.checksum, lineage.sound = None, False  # neither the chain nor the replay can go on
                    self.done += 1
                    yield from ((fork, lineage.copy()) for fork in self.forks.get((row.id, version), ()))
                    continue
                rows = events.get(version, [])
                self.check_version(row, version, vrows.get(version), rows, lineage)
                self.replay(row, version, rows, lineage)
                if version in snaps:
                    self.check_snapshot(row, version, lineage)
                for fork in self.forks.get((row.id, version), ()):
                    if version not in vrows:  # a hole: the fork branches from a version that is gone
                        self.problem("fork", fork, None, f"its fork point {version} is not a version of its "
                                                         f"parent (it was removed)")
                    yield fork, lineage.copy()
                self.done += 1
                if self.progress and self.done % 512 == 0:
                    self.progress(self.done, self.total)

    def read(self, row: StreamRow, lo: int, hi: int) -> tuple[dict[int, Any], dict[int, list[Any]]]:
        """The version rows and the events (by version) of versions lo..hi of a stream."""
        seg = [Segment(row.tree_id, row.id, lo, hi)]
        vrows = {r.version: r for r in self.journal.version_rows(seg)}
        events = {v: list(rows) for v, rows in itertools.groupby(self.journal.tail(seg, lo - 1), key=lambda r: r[0])}
        return vrows, events

    def read_each(self, row: StreamRow, lo: int, hi: int) -> tuple[dict[int, Any], dict[int, list[Any]], dict[int, str]]:
        """read() one version at a time, after reading the batch failed: also what could not be read, by version."""
        vrows: dict[int, Any] = {}
        events: dict[int, list[Any]] = {}
        unread: dict[int, str] = {}
        for version in range(lo, hi + 1):
            try:
                one, their = self.read(row, version, version)
            except StorageError as exc:
                unread[version] = str(exc)
                continue
            vrows.update(one)
            events.update(their)
        return vrows, events, unread

    def check_version(self, row: StreamRow, version: int, vrow: Any, rows: list[Any], lineage: _Lineage) -> None:
        self.events += len(rows)
        if vrow is None:
            if rows:
                self.problem("version", row, version, f"the version row is missing ({len(rows)} events remain)")
                lineage.checksum = None  # the chain cannot be followed across a damaged gap
            # A number with neither row nor events is a hole retention left (prune/expire/remove): it
            # rechained the kept versions, each from the one kept before it, so a version deleted by
            # other means still shows, as a checksum mismatch at the version after it.
            return
        self.versions += 1
        if [r[1] for r in rows] != list(range(len(rows))):
            self.problem("events", row, version, f"event seqs are {[r[1] for r in rows]}, not 0..{len(rows) - 1}")
        nbytes = sum(len(r[4].encode()) for r in rows if r[4] is not None)
        if (len(rows), nbytes) != (vrow.event_count, vrow.event_bytes):
            self.problem("events", row, version, f"{len(rows)} events of {nbytes} bytes, the version row says "
                                                 f"{vrow.event_count} of {vrow.event_bytes}")
        if lineage.checksum is not None:
            expected = version_checksum(lineage.checksum, version, vrow.created_at, vrow.name, vrow.auto, vrow.metadata,
                                        vrow.usage, [(r[2], r[3], r[4]) for r in rows])
            if expected != vrow.checksum:
                self.problem("checksum", row, version, "the checksum does not match the version's row, events and "
                                                       "the checksum before it (altered, missing or reordered)")
        lineage.checksum = vrow.checksum

    def replay(self, row: StreamRow, version: int, rows: list[Any], lineage: _Lineage) -> None:
        if not rows or not lineage.sound:
            return
        try:
            values = orjson.loads("[" + ",".join(r[4] if r[4] is not None else "null" for r in rows) + "]")
            for (_, seq, op, text, _), value in zip(rows, values):
                lineage.fold(self.folder, version, seq, op, from_text(text), value)
        except Exception as exc:  # noqa: BLE001 - any failure to fold means the events are damaged
            lineage.sound = False
            self.problem("replay", row, version, f"its events do not fold onto the state before it ({exc!r}); "
                                                 "snapshots after it are not compared")

    def check_snapshot(self, row: StreamRow, version: int, lineage: _Lineage) -> None:
        try:
            state_text, manifest_text = self.journal.snapshot_row(row, version)
        except StorageError as exc:  # a damaged string in the snapshot's row
            self.problem("snapshot", row, version, f"the snapshot cannot be read ({exc})")
            return
        try:
            stored = orjson.loads(state_text)
            manifest = {key: (base, size) for key, (base, size) in orjson.loads(manifest_text).items()}
            assert type(stored) is dict
        except Exception as exc:  # noqa: BLE001
            self.problem("snapshot", row, version, f"the snapshot cannot be read ({exc!r})")
            return
        literal = frozenset(key for key, (base, _) in manifest.items() if base == version)
        self.literal[(row.id, version)] = literal
        for message in self.snapshot_faults(row, version, lineage, stored, manifest, literal):
            self.problem("snapshot", row, version, message)

    def snapshot_faults(self, row: StreamRow, version: int, lineage: _Lineage, stored: dict[str, Any],
                        manifest: dict[str, Any], literal: frozenset[str]) -> Iterator[str]:
        if set(stored) != literal:
            yield f"it writes keys {sorted(set(stored) ^ literal)!r} its manifest does not say it writes"
        if not lineage.sound:
            return
        state = lineage.state
        if set(manifest) != set(state):
            yield f"its manifest names keys {sorted(set(manifest) ^ set(state))!r} that differ from the replayed state's"
        elif list(manifest) != list(state):  # a restore through it would give the keys in the manifest's order
            yield f"its manifest orders the keys {list(manifest)!r}, the replayed state {list(state)!r}"
        for key in literal & set(stored) & set(state):
            if orjson.dumps(stored[key], option=_CANON) != orjson.dumps(state[key], option=_CANON):
                yield f"key {key!r} differs from the replay of the events"
        chain = self.core.lineage(self.journal, row)
        for key, (base, _) in manifest.items():
            if base == version or key not in state:
                continue
            if type(base) is int and 0 < base < version:
                owner = next((s.stream_id for s in segments_for(chain, base) if s.lo <= base <= s.hi), None)
                if key not in self.literal.get((owner, base), ()):
                    yield f"key {key!r} refers to a snapshot at version {base} that does not hold it"
                elif lineage.changed.get(key, 0) > base:
                    yield f"key {key!r} refers to version {base}, but it changed at version {lineage.changed[key]}"
            elif type(base) is list and len(base) == 2 and tuple(base) == lineage.origin.get(key):
                continue
            elif type(base) is list:
                yield f"key {key!r} refers to event {base!r}, which is not where its appends began"
            else:
                yield f"key {key!r} has an invalid base {base!r}"
