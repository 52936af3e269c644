"""Killed writers: a writer process saves workload W and is SIGKILLed at chosen or random moments; after
every kill the file is checked against the model in tests/wmodel.py.

    python -m tests.killkit writer --db F --report R [options]    (the child; see Writer)

A writer reports a version (one tab-separated line, written with os.write so it survives the kill) only
after the call that made it returned. A kill is either a timer in the parent or a trigger inside the
child that SIGKILLs its own process at an exact moment, after writing a "K" line that says what was in
progress and whether it must be absent afterwards:
  stmt:<phase>:<sql prefix>:<n>   before the n-th statement with that prefix while in <phase>
                                  (e.g. between a version's events and its snapshot, or inside a fork)
  io:<event>:<kind>:<n>           before the n-th write/sync of the db/wal file (through tests/faultvfs),
                                  e.g. in the middle of a commit's WAL frames or of a checkpoint
With power_loss, an io trigger first writes a random part of what is unsynced (tests/faultvfs).

Operations are small functions in OPERATIONS (one version or one maintenance action each). The
maintenance actions in MAINTENANCE run now and then between versions: prune (retention, keep_last 8..40,
sometimes auto_only so that holes fall between W's manual versions; the writer checks that it removed
exactly what prune_plan works out from the plan) and import (the stream is exported at its head and
imported as a copy named "copy:<n>:<source>", which the writer never continues). Each writes an intent
line first ("p": the versions the prune will remove; "i": the versions the copy will hold), so the
Verifier knows which holes are legitimate and checks that a killed prune removed all its versions or
none, and that a killed import left nothing or the whole copy; every version left restores to the model.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
import orjson

import eventckpt
from eventckpt.integrity import ROOT, version_checksum

from . import wmodel
from .faultvfs import FaultVFS

REPO = Path(__file__).resolve().parent.parent
WAL_HEADER = 32  # bytes; every other WAL write is a frame header or a page
POLICIES = {
    "default": eventckpt.SnapshotPolicy(),
    "small": eventckpt.SnapshotPolicy(min_tail_bytes=2048),
    "every": eventckpt.SnapshotPolicy.every_version(),
    "never": eventckpt.SnapshotPolicy.never(),
}


# -- the writer (child process) ---------------------------------------------------------------------


class Writer:
    """Works through the plan of tests/wmodel.py on one file until it is killed."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.report_fd = os.open(args.report, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.rng = random.Random(args.seed)
        self.phase = "open"
        self.in_progress: tuple[str, int] = ("", 0)
        self.ops = args.ops.split(",")
        self.vfs: FaultVFS | None = None
        kind, *spec = args.trigger.split(":")
        self.trigger = (kind, *spec[:-1], int(spec[-1])) if kind != "none" else ("none",)
        self.hits = 0
        self.acked = 0  # operations acknowledged so far in this life
        self.dirty = 0  # the last operation that wrote WAL frames
        self.synced = 0  # the last operation whose WAL frames a sync has made durable
        if args.vfs != "none" or kind == "io":
            self.vfs = FaultVFS(f"killkit-{os.getpid()}", power_loss=args.vfs == "powerloss", hook=self._io_hook)
        self.store = eventckpt.open(
            args.db,
            durability=args.durability,
            snapshots=POLICIES[args.policy],
            cache_size=args.cache_size,
            vfs=self.vfs.name if self.vfs else None,
        )
        conn = self.store.core.backend.journal.conn  # test-only reach into the engine: checkpoint size and the tracer
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(args.autocheckpoint)}")
        if kind == "stmt":
            conn.exec_trace = self._stmt_hook
        self.report("S", 0)

    # -- triggers ---------------------------------------------------------------------------------

    def _stmt_hook(self, cursor: Any, sql: str, bindings: Any) -> bool:
        _, phase, prefix, n = self.trigger
        if (phase == "any" or phase == self.phase) and sql.startswith(prefix):
            self.hits += 1
            if self.hits == n:
                self.die(f"stmt {self.phase} {prefix!r} #{n}", "absent")
        return True

    def _io_hook(self, event: str, kind: str, count: int, nbytes: int) -> None:
        if kind == "wal":
            if event == "write" and nbytes != WAL_HEADER:
                self.dirty = self.acked + 1  # a frame of the operation in progress
            elif event == "sync":
                self.synced = self.dirty  # (a sync of the new header at a WAL restart comes before frames)
        if self.trigger[0] == "io" and (event, kind) == tuple(self.trigger[1:3]) and count == self.trigger[3]:
            if self.vfs is not None and self.vfs.power_loss:
                self.vfs.power_cut(self.rng)
            # a checkpoint (db writes) runs after its commit is in the WAL; WAL writes are a commit's own
            self.die(f"io {event} {kind} #{count}", "any" if kind == "db" or self.vfs.power_loss else "absent")

    def die(self, what: str, expect: str) -> None:
        stream, version = self.in_progress
        self.report("K", what, self.phase, stream, version, expect)
        os.kill(os.getpid(), signal.SIGKILL)

    def report(self, *fields: Any) -> None:
        os.write(self.report_fd, ("\t".join(map(str, fields)) + "\n").encode())

    def acknowledge(self, *fields: Any) -> None:
        """Report an operation whose call returned, with the last operation known to be synced."""
        self.acked += 1
        self.report(*fields, self.synced if self.vfs else -1)

    # -- the plan ---------------------------------------------------------------------------------

    def run(self) -> None:
        names = [n for n in self.store.streams() if not is_copy(n)]  # copies are checked, never continued
        todo = [n for n in names if self.store.stream(n).version < wmodel.target_len(n)]
        roots = sum(1 for n in names if "~" not in n)
        models: dict[str, tuple[wmodel.Version, dict[int, wmodel.Version]]] = {}
        while True:
            if not todo:
                todo.append(wmodel.root_name(roots))
                roots += 1
            name = todo[-1]
            task = self.store.stream(name)
            head = task.version
            if name not in models:
                models[name] = self._resume(task, head)
            child = f"{name}~{head}"
            if head and wmodel.forks_after(name, head) and child not in names:
                self.phase, self.in_progress = "fork", (child, 0)
                OPERATIONS["fork"](self, task, head, child)
                names.append(child)
                todo.append(child)
                continue
            prev, recent = models[name]
            version = head + 1
            op = wmodel.op_at(name, version)
            model = wmodel.advance(name, version, prev, recent) if head else wmodel.initial()
            self.phase, self.in_progress = op, (name, version)
            OPERATIONS[op](self, task, version, model)
            self.acknowledge("V", name, version)
            recent[version] = model
            recent.pop(version - 8, None)
            models[name] = (model, recent)
            for extra in self.ops:
                if extra in MAINTENANCE and self.rng.random() < 0.02:
                    self.phase, self.in_progress = extra, ("", 0)
                    MAINTENANCE[extra](self, task)
            if version >= wmodel.target_len(name):
                todo.pop()
                models.pop(name)

    def _resume(self, task: eventckpt.CheckpointStore, head: int) -> tuple[wmodel.Version, dict[int, wmodel.Version]]:
        """The model at the stream's head (checked against the file: recovery must give it back)."""
        recent: dict[int, wmodel.Version] = {}
        last = None
        for v, last in wmodel.versions(task.task_id, head):
            recent[v] = last
            recent.pop(v - 8, None)
        if last is None:
            return wmodel.initial(), recent
        if task.state() != last.state:
            raise AssertionError(f"{task.task_id} at {head} does not restore to the model after recovery")
        return last, recent


# -- operations: each makes one version (or one maintenance action) and nothing else --------------


def op_init(w: Writer, task: eventckpt.CheckpointStore, version: int, model: wmodel.Version) -> None:
    task.save(model.state, model.usage, metadata=model.metadata, expected_version=0)


def op_tx(w: Writer, task: eventckpt.CheckpointStore, version: int, model: wmodel.Version) -> None:
    s = wmodel.w_step(task.task_id, version)
    with task.transaction(metadata=model.metadata, auto=model.auto, expected_version=version - 1) as tx:
        tx.append("messages", s.message)
        tx.set("step", version)
        for key, value in s.scratch.items():
            tx.set(("scratch", key), value)
        tx.add_usage(input_tokens=120, output_tokens=40)


def op_save(w: Writer, task: eventckpt.CheckpointStore, version: int, model: wmodel.Version) -> None:
    task.save(model.state, model.usage, metadata=model.metadata, auto=model.auto, expected_version=version - 1,
              checkpoint_id=model.checkpoint_id)


def op_rollback(w: Writer, task: eventckpt.CheckpointStore, version: int, model: wmodel.Version) -> None:
    task.rollback(model.metadata["rollback_to"], metadata={"op": "rollback", "v": version},
                  expected_version=version - 1)


def op_fork(w: Writer, task: eventckpt.CheckpointStore, at: int, child: str) -> None:
    task.fork(at=at, task_id=child)
    w.acknowledge("F", child)


def is_copy(name: str) -> bool:
    return name.startswith("copy:")


def source_of(name: str) -> str:
    """The stream a copy was imported from (the stream itself when it is not a copy)."""
    return name.split(":", 2)[2] if is_copy(name) else name


def numbers(text: str) -> set[int]:
    """The version numbers of a report field ("3,4,9")."""
    return {int(v) for v in text.split(",") if v}


def prune_plan(store: eventckpt.Store, task: eventckpt.CheckpointStore, keep_last: int, auto_only: bool) -> set[int]:
    """What prune must remove, worked out from the plan alone (the writer checks retention against it):
    the stream's own versions outside the newest `keep_last` of its lineage (only W's automatic ones with
    auto_only), except the head and the versions forks branch from (a fork S~a~b branches from S at a)."""
    name, lineage = task.task_id, task.list_versions()
    origin = wmodel.parent_of(name)
    own = [v for v in lineage if v > (origin[1] if origin else 0)]
    anchors = {int(n[len(name) + 1:].split("~")[0]) for n in store.streams() if n.startswith(name + "~")}
    keep = set(lineage[-keep_last:]) | anchors | {lineage[-1]}
    return {v for v in own if v not in keep and (wmodel.is_auto(name, v) or not auto_only)}


def op_prune(w: Writer, task: eventckpt.CheckpointStore) -> None:
    # keep_last >= 8: W's rollbacks go back at most 6 versions, so the versions they need stay
    keep_last, auto_only = w.rng.randint(8, 40), w.rng.random() < 0.4
    planned = prune_plan(w.store, task, keep_last, auto_only)
    w.report("p", task.task_id, task.version, ",".join(map(str, sorted(planned))))
    pruned = task.prune(keep_last=keep_last, auto_only=auto_only)
    if set(pruned.removed) != planned:
        raise AssertionError(f"prune(keep_last={keep_last}, auto_only={auto_only}) of {task.task_id} removed "
                             f"{pruned.removed}, not {sorted(planned)}")
    w.acknowledge("P", task.task_id, task.version, ",".join(map(str, pruned.removed)), int(auto_only))


def copy_lines(store: eventckpt.Store, source: str, copy: str) -> tuple[list[bytes], list[int]]:
    """`source` exported (at its head) with every line renamed to `copy`, and the versions it holds."""
    lines, versions = [], []
    for line in store.export(source):
        record = orjson.loads(line)
        if "stream" in record:
            record["stream"] = copy
        if "version" in record:
            versions.append(record["version"])
        lines.append(orjson.dumps(record))
    return lines, versions


def op_import(w: Writer, task: eventckpt.CheckpointStore) -> None:
    copy = f"copy:{sum(1 for n in w.store.streams() if is_copy(n))}:{task.task_id}"
    head = task.version
    lines, versions = copy_lines(w.store, task.task_id, copy)
    if versions != task.list_versions():
        raise AssertionError(f"the export of {task.task_id} holds {versions}, not {task.list_versions()}")
    w.report("i", copy, task.task_id, head, ",".join(map(str, versions)))
    w.store.import_lines(lines)
    w.acknowledge("I", copy, task.task_id, head)


OPERATIONS: dict[str, Callable[..., None]] = {
    "init": op_init, "tx": op_tx, "save": op_save, "rollback": op_rollback, "fork": op_fork,
}
MAINTENANCE: dict[str, Callable[..., None]] = {"prune": op_prune, "import": op_import}
DEFAULT_OPS = ("tx", "save", "rollback", "fork", "prune", "import")


def check_ops(ops: tuple[str, ...]) -> None:
    """Refuse, before anything runs, an operation that does not exist."""
    for name in ops:
        if name not in MAINTENANCE and name not in OPERATIONS:
            raise ValueError(f"unknown operation {name!r}; known: {sorted(OPERATIONS) + sorted(MAINTENANCE)}")


# -- the verifier (parent process) ----------------------------------------------------------------


@dataclass
class Totals:
    kills: Counter[str] = field(default_factory=Counter)
    reported: int = 0  # versions acknowledged by writers (a version re-made after a loss counts again)
    checked: int = 0  # restores compared with the model (new versions after each kill, a sample of older
    # ones, and every version again in the final pass)
    present: int = 0  # versions in the file at the end (each stream's own)
    streams: int = 0
    forks: int = 0
    prunes: int = 0  # prunes acknowledged
    auto_only: int = 0  # of which with auto_only
    pruned: int = 0  # versions they removed
    copies: int = 0  # imports acknowledged
    lost: int = 0  # acknowledged versions missing after a power cut (allowed with durability="normal")
    max_lost: int = 0  # the most lost in one cut
    at_risk: int = 0  # the most acknowledged versions that were not yet synced at a cut
    power: bool = False  # the kills were power cuts

    def line(self) -> str:
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.kills.items()))
        text = (f"kills survived: {sum(self.kills.values())} ({kinds}); versions acknowledged: {self.reported}; "
                f"restores compared with the model: {self.checked}; versions in the file: "
                f"{self.present} in {self.streams} streams ({self.forks} forks, {self.copies} imported copies); "
                f"prunes: {self.prunes} ({self.auto_only} auto_only) removing {self.pruned} versions")
        if self.power:
            text += (f"; acknowledged but lost: {self.lost} (at most {self.max_lost} in one cut, when at most "
                     f"{self.at_risk} acknowledged versions were not yet synced)")
        return text


class Verifier:
    """Checks a file after a kill: engine integrity, whole versions only, every acknowledged version
    present and equal to the model."""

    def __init__(self, db: Path, rng: random.Random, *, power_cuts: bool = False) -> None:
        self.db = db
        self.rng = rng
        self.power_cuts = power_cuts  # a cut may also take versions a prune was about to remove
        self.checked: dict[tuple[str, int], bytes] = {}  # versions compared with the model -> checksum
        self.removed: dict[str, set[int]] = {}  # per stream, the versions its prunes removed
        self.pending: list[tuple[str, int, list[int]]] = []  # the last life's prunes: (stream, head, plan)
        self.copies: dict[str, list[int]] = {}  # copies an import may have made -> the versions exported
        self.own: dict[str, list[int]] = {}  # each stream's own versions at the last verify

    def note(self, reports: list[list[str]]) -> None:
        """Take a life's intent lines: what each prune will remove and which copies may exist. A prune
        rechains the checksums of its stream tree, so those versions are compared afresh."""
        for line in reports:
            if line[0] == "p":
                self.pending.append((line[1], int(line[2]), sorted(numbers(line[3]))))
                root = line[1].split("~")[0]
                self.checked = {k: c for k, c in self.checked.items() if k[0].split("~")[0] != root}
            elif line[0] == "i":
                self.copies[line[1]] = sorted(numbers(line[4]))

    def verify(self, reports: list[list[str]], totals: Totals) -> dict[str, int]:
        """Everything in the module docstring; returns each stream's head."""
        # read-only, so that recovering the WAL and checkpointing stay the next writer's job
        conn = apsw.Connection(str(self.db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
            assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
            heads, checksums = self._structure(conn)
        finally:
            conn.close()
        self.pending = []
        for line in reports:
            if line[0] == "V":
                assert heads.get(line[1], 0) >= int(line[2]), f"acknowledged {line[1]}@{line[2]} is missing"
            elif line[0] == "F":
                assert line[1] in heads, f"acknowledged fork {line[1]} is missing"
            elif line[0] == "P":
                assert not numbers(line[3]) & set(self.own.get(line[1], ())), f"versions a finished prune removed are back in {line[1]}"
            elif line[0] == "I":
                assert heads.get(line[1]) == int(line[3]), f"the finished import {line[1]} is missing or incomplete"
        for key, checksum in self.checked.items():  # compared before: must be byte-for-byte the same
            assert checksums.get(key) == checksum, f"{key} changed after it was verified"
        self._content(heads, checksums, totals)
        return heads

    def _structure(self, conn: apsw.Connection) -> tuple[dict[str, int], dict[tuple[str, int], bytes]]:
        """Stream rows as planned, versions dense but for what prunes removed (each prune whole or not at
        all), copies whole, events and version rows agreeing, checksums chained."""
        streams = {sid: (name, parent, at) for sid, name, parent, at in
                   conn.execute("SELECT id, name, parent_id, fork_version FROM streams")}
        names = {sid: row[0] for sid, row in streams.items()}
        bad = conn.execute(
            """SELECT v.stream_id, v.version FROM versions AS v LEFT JOIN events AS e USING (stream_id, version)
               GROUP BY v.stream_id, v.version
               HAVING v.event_count != count(e.seq) OR v.event_bytes != coalesce(sum(length(CAST(e.value AS BLOB))), 0)
                   OR coalesce(max(e.seq) + 1, 0) != count(e.seq)"""
        ).fetchall()
        assert not bad, f"versions whose rows and events disagree (a partial version): {bad}"
        events: dict[tuple[int, int], list[tuple[str, str, str | None]]] = {}
        for sid, v, op, path, value in conn.execute(
            "SELECT stream_id, version, op, path, value FROM events ORDER BY stream_id, version, seq"
        ):
            events.setdefault((sid, v), []).append((op, path, value))
        rows: dict[int, list[tuple[Any, ...]]] = {}
        for row in conn.execute(
            "SELECT stream_id, version, created_at, name, auto, metadata, usage, checksum FROM versions"
            " ORDER BY stream_id, version"
        ):
            rows.setdefault(row[0], []).append(row)
        heads: dict[str, int] = {}
        checksums: dict[tuple[str, int], bytes] = {}
        lineage: dict[str, list[int]] = {}  # the versions each stream sees (its ancestors' up to the fork)
        self.own = {}
        for sid in sorted(streams):  # parents before forks
            name, parent, at = streams[sid]
            origin = None if is_copy(name) else wmodel.parent_of(name)
            if is_copy(name):
                assert parent is None and name in self.copies, f"{name!r} is not a copy an import made"
            assert (origin is None) == (parent is None), f"stream {name!r} is not one the plan makes"
            first = 1
            if origin is not None:
                assert (names[parent], at) == origin, f"fork {name!r} has the wrong parent or fork version"
                first = at + 1
            own = rows.get(sid, [])
            versions = [r[1] for r in own]
            assert all(v >= first for v in versions), f"{name!r} has versions of its parent"
            if is_copy(name):  # the holes its source had when exported, and nothing else
                assert versions == self.copies[name], f"{name!r} is not the whole export (a partial import)"
            else:
                self._settle_prunes(name, set(versions))
                expected = set(range(first, versions[-1] + 1)) - self.removed.get(name, set()) if versions else set()
                assert set(versions) == expected, (f"{name!r} has a gap no prune made or a version a prune removed:"
                                                   f" {sorted(set(versions) ^ expected)}")
            seen = [v for v in lineage[names[parent]] if v <= at] if origin is not None else []
            prev = checksums[(names[parent], at)] if origin is not None and at else ROOT
            for v in seen:  # the fork's view of its parent's versions up to the fork point
                checksums[(name, v)] = checksums[(names[parent], v)]
            for _, v, created, vname, auto, meta, usage, checksum in own:
                expected = version_checksum(prev, v, created, vname, auto, meta, usage, events.get((sid, v), []))
                assert expected == checksum, f"{name}@{v}: checksum chain broken"
                checksums[(name, v)] = prev = checksum
            lineage[name] = seen + versions
            self.own[name] = versions
            heads[name] = versions[-1] if versions else first - 1
        for name in {p[0] for p in self.pending} - set(heads):  # a stream a power cut took whole
            self._settle_prunes(name, set())
        return heads, checksums

    def _settle_prunes(self, name: str, present: set[int]) -> None:
        """Each prune of the last life took effect whole (none of its versions left, and the stream reaches
        its head: a later prune may have removed that head) or not at all (all of them left; after a power
        cut, which may also take versions it was to remove that were made earlier in that life, together
        with everything after them, its oldest ones). What took effect joins the stream's removed versions."""
        for stream, head, planned in self.pending:
            if stream != name or not planned:
                continue
            left = [v for v in planned if v in present]
            if not left and present and max(present) >= head:
                self.removed.setdefault(name, set()).update(planned)
            else:
                assert left == planned or (self.power_cuts and left == planned[:len(left)]), \
                    f"a prune of {name!r} was half done: {left} of {planned} are still there"

    def _content(self, heads: dict[str, int], checksums: dict[tuple[str, int], bytes], totals: Totals) -> None:
        """Restore every version not compared yet (and a sample of older ones) and compare with the model."""
        again = self.rng.sample(sorted(self.checked), min(4, len(self.checked)))
        with eventckpt.open(self.db, readonly=True) as store:
            seen: dict[str, list[int]] = {}
            for n, v in checksums:
                seen.setdefault(n, []).append(v)
            for name, head in heads.items():
                visible = seen.get(name, [])
                todo = {v for v in visible if (name, v) not in self.checked} | {v for n, v in again if n == name}
                if not todo:
                    continue
                task = store.stream(name)
                for v, model in wmodel.versions(source_of(name), max(todo)):
                    if v not in todo:
                        continue
                    cp = task.get(v)
                    assert cp.values == model.state, f"{name}@{v} does not restore to what was saved"
                    assert (cp.token_usage, cp.metadata, cp.auto) == (model.usage, model.metadata, model.auto), \
                        f"{name}@{v} header"
                    if model.checkpoint_id is not None:
                        assert task.find(model.checkpoint_id).version == v
                    totals.checked += 1
                    self.checked[(name, v)] = checksums[(name, v)]


# -- the kill loop (parent process) ---------------------------------------------------------------

def import_trigger(rng: random.Random) -> str:
    """A kill inside an import: before the n-th of its inserts (an import inserts many rows), or before the
    COMMIT of one of the life's first imports. Each import commits once, and one comes about every 50
    versions: the 30th commit took 1,500 versions, longer than a busy machine gives a trigger."""
    statement = rng.choice(["INSERT INTO versions", "INSERT INTO events", "COMMIT"])
    return f"stmt:import:{statement}:{rng.randint(1, 3) if statement == 'COMMIT' else rng.randint(1, 30)}"


# (name, writer options, trigger maker); a trigger of None is a timer kill from the parent
KILL_KINDS: list[tuple[str, dict[str, Any], Callable[[random.Random], str | None]]] = [
    ("timer", {}, lambda r: None),
    ("between events and snapshot", {"policy": "every"}, lambda r: f"stmt:any:INSERT OR REPLACE INTO snapshots:{r.randint(1, 12)}"),
    ("inside a version's events", {}, lambda r: f"stmt:any:INSERT INTO events:{r.randint(1, 40)}"),
    ("before commit", {}, lambda r: f"stmt:any:COMMIT:{r.randint(1, 40)}"),
    ("inside a fork", {}, lambda r: f"stmt:fork:{r.choice(['INSERT INTO streams', 'COMMIT'])}:1"),
    ("inside a prune", {}, lambda r: f"stmt:prune:{r.choice(['DELETE FROM events', 'UPDATE versions SET checksum', 'COMMIT'])}:1"),
    ("inside an import", {}, lambda r: import_trigger(r)),
    ("mid-commit WAL write", {}, lambda r: f"io:write:wal:{r.randint(1, 150)}"),
    ("mid-checkpoint db write", {"autocheckpoint": 8}, lambda r: f"io:write:db:{r.randint(1, 12)}"),
]
# the same with writes kept in memory until synced: a kill or a trigger is a power cut
POWER_CUTS: list[tuple[str, dict[str, Any], Callable[[random.Random], str | None]]] = [
    ("power cut (timer)", {}, lambda r: None),
    ("power cut at a WAL sync", {}, lambda r: f"io:sync:wal:{r.randint(1, 6)}"),
    ("power cut mid WAL write", {}, lambda r: f"io:write:wal:{r.randint(1, 150)}"),
    ("power cut mid checkpoint", {"autocheckpoint": 8}, lambda r: f"io:write:db:{r.randint(1, 12)}"),
    ("power cut at a db sync", {"autocheckpoint": 8}, lambda r: f"io:sync:db:{r.randint(1, 4)}"),
]


@dataclass
class Life:
    """One writer process from start to kill."""

    kind: str
    trigger: str | None
    options: dict[str, Any]
    reports: list[list[str]] = field(default_factory=list)


def writer_command(db: Path, report: Path, seed: int, trigger: str | None, options: dict[str, Any], ops: tuple[str, ...]) -> list[str]:
    opts = {"durability": "normal", "policy": "small", "cache_size": 64, "autocheckpoint": 1000, "vfs": "none", **options}
    return [sys.executable, "-m", "tests.killkit", "writer", "--db", str(db), "--report", str(report),
            "--seed", str(seed), "--trigger", trigger or "none", "--ops", ",".join(ops),
            *[f"--{k.replace('_', '-')}={v}" for k, v in opts.items()]]


def run_life(db: Path, workdir: Path, index: int, life: Life, rng: random.Random, ops: tuple[str, ...]) -> None:
    """Start a writer, let it work, make sure it dies by SIGKILL, and collect its reports."""
    report = workdir / f"life-{index:04d}.tsv"
    proc = subprocess.Popen(writer_command(db, report, rng.randrange(2**31), life.trigger, life.options, ops),
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while proc.poll() is None and (not report.exists() or report.stat().st_size < 4) and time.monotonic() < deadline:
        time.sleep(0.005)  # until the writer has opened the file (so kills land in real work)
    if life.trigger is None:
        time.sleep(rng.uniform(0.0, 0.35))
    else:
        try:
            proc.wait(timeout=60)  # the trigger kills it (within seconds, even on a busy machine)
        except subprocess.TimeoutExpired:
            life.kind = "timer (trigger not reached)"
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    rc = proc.wait()
    err = proc.stderr.read().decode() if proc.stderr else ""
    if rc != -signal.SIGKILL:
        raise AssertionError(f"writer life {index} ({life.kind}) ended with {rc}, not SIGKILL:\n{err}")
    text = report.read_text() if report.exists() else ""
    life.reports = [line.split("\t") for line in text.split("\n")[:-1]]  # a cut-off last line is dropped


def check_kill_marker(life: Life, heads: dict[str, int]) -> None:
    """A trigger kill says what was in progress: a version or fork that must not exist afterwards."""
    for line in life.reports:
        if line[0] == "K" and line[5] == "absent" and line[3]:
            stream, version = line[3], int(line[4])
            if version == 0:
                assert stream not in heads, f"fork {stream} exists after a kill inside it ({line[1]})"
            else:
                assert heads.get(stream, 0) < version, f"{stream}@{version} exists after a kill before its commit ({line[1]})"


def judge_power_cut(life: Life, heads: dict[str, int], totals: Totals, own: dict[str, list[int]], *,
                    durability: str) -> None:
    """What a power cut may take: with "full" nothing acknowledged; with "normal" only versions
    acknowledged after the WAL was last synced (SQLite syncs it at checkpoints), and only a suffix of
    them: whatever survives is a prefix of the commit order."""
    acked = [line for line in life.reports if line[0] in ACKED]
    present = [_durable(line, heads, own) for line in acked]
    first_lost = present.index(False) if False in present else 0
    odd = [(line[:3], p) for line, p in zip(acked[first_lost:], present[first_lost:]) if p][:6]
    assert present == sorted(present, reverse=True), f"a power cut kept a later version but lost an earlier one: {odd}"
    synced_upto = max((int(l[-1]) for l in acked), default=0)  # operations whose WAL frames were synced
    lost = present.count(False)
    if durability == "full":
        assert lost == 0, f"durability='full' lost {lost} acknowledged versions in a power cut"
    else:
        assert all(present[:synced_upto]), "a version acknowledged before the last WAL sync was lost"
    totals.power = True
    totals.lost += lost
    totals.max_lost = max(totals.max_lost, lost)
    totals.at_risk = max(totals.at_risk, len(acked) - synced_upto)


ACKED = "VFPI"  # acknowledged operations: version, fork, prune, import


def _durable(line: list[str], heads: dict[str, int], own: dict[str, list[int]]) -> bool:
    """Whether an acknowledged operation is in the file."""
    kind, name = line[0], line[1]
    if kind == "V":
        return heads.get(name, 0) >= int(line[2])
    if kind == "P":  # the stream is there as it was at the prune, without what the prune removed
        return heads.get(name, 0) >= int(line[2]) and not {int(v) for v in line[3].split(",") if v} & set(own.get(name, ()))
    if kind == "I":
        return heads.get(name) == int(line[3])
    return name in heads


def run_kills(
    db: Path,
    workdir: Path,
    kills: int,
    *,
    seed: int = 0,
    ops: tuple[str, ...] = DEFAULT_OPS,
    options: dict[str, Any] | None = None,
    table: list[tuple[str, dict[str, Any], Callable[[random.Random], str | None]]] = KILL_KINDS,
    kinds: list[str] | None = None,
    after_kill: Callable[[Life, dict[str, int], Totals], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> Totals:
    """Kill `kills` writer lives, cycling through the kill kinds (with random parameters), verifying the
    file after each; then restore every version once more. Returns the totals."""
    check_ops(ops)
    rng = random.Random(seed)
    eventckpt.open(db).close()  # created before the first life: later db writes are checkpoints only
    verifier = Verifier(db, rng, power_cuts=(options or {}).get("vfs") == "powerloss")
    totals = Totals()
    chosen = [k for k in table if kinds is None or k[0] in kinds]
    for i in range(kills):
        name, kind_options, make = chosen[i % len(chosen)]
        life_options = {"policy": rng.choice(list(POLICIES)), "cache_size": rng.choice([64, 1]),
                        "autocheckpoint": rng.choice([1000, 30]), **kind_options, **(options or {})}
        life = Life(name, make(rng), life_options)
        run_life(db, workdir, i, life, rng, ops)
        totals.kills[life.kind] += 1
        totals.reported += sum(1 for line in life.reports if line[0] == "V")
        for line in life.reports:
            if line[0] == "P":
                totals.prunes += 1
                totals.auto_only += int(line[4])
                totals.pruned += len(numbers(line[3]))
        verifier.note(life.reports)
        for suffix in ("-shm",) if life.options.get("vfs") == "powerloss" else ():
            (db.parent / (db.name + suffix)).unlink(missing_ok=True)  # shared memory does not survive power loss
        acknowledged = [line for line in life.reports if line[0] in ACKED]
        if after_kill is not None:  # power-loss runs judge this life's acknowledgements themselves
            heads = verifier.verify([], totals)
            after_kill(life, heads, totals, verifier.own)
        else:
            heads = verifier.verify(acknowledged, totals)
        check_kill_marker(life, heads)
        if log:
            log(f"life {i + 1}/{kills}: {life.kind} {life.trigger or ''} -> {sum(heads.values())} versions in {len(heads)} streams")
    verifier.checked.clear()  # the final pass restores every version again
    heads = verifier.verify([], totals)
    totals.present = sum(map(len, verifier.own.values()))
    totals.streams = len(heads)
    totals.copies = sum(1 for n in heads if is_copy(n))
    totals.forks = sum(1 for n in heads if "~" in n and not is_copy(n))
    return totals


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.killkit")
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("writer", help="run a writer until it is killed (the child of a kill test)")
    w.add_argument("--db", required=True)
    w.add_argument("--report", required=True)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--trigger", default="none")
    w.add_argument("--ops", default=",".join(DEFAULT_OPS))
    w.add_argument("--durability", default="normal")
    w.add_argument("--policy", default="small", choices=sorted(POLICIES))
    w.add_argument("--cache-size", type=int, default=64)
    w.add_argument("--autocheckpoint", type=int, default=1000)
    w.add_argument("--vfs", default="none", choices=["none", "faults", "powerloss"])
    args = parser.parse_args(argv)
    Writer(args).run()


if __name__ == "__main__":
    main()
