"""Retention: prune, expire and remove versions while every kept version still restores exactly.

Removing a version from an event journal is not deleting a row: later versions replay its events, and
snapshot manifests name earlier snapshots and creation events as the bases of shared keys. So:

- A run of removed versions is folded into the next kept version `w` (the head is always kept):
  * merge: w's events become the run's events followed by its own, in order (nothing is lost; event
    bases inside the run move to w with their order intact; an event a later set of its path makes moot
    is dropped, unless dropping it would move the key among its siblings), or
  * rewrite: w's events become a top-level replacement of the previous kept state by w's state (a delete
    for every key that went away or must move, a set for every key, in w's order), which frees the run's
    events. It is chosen when w's state is smaller than the events it replaces (a cut at the start of a
    long history).
  Every kept version restores exactly, the order of its keys included.
  Either way, folding the remaining events still gives every kept state (invariant 1), and the run's
  tool calls move into w, so `undo_tools` still sees every call.
- Snapshots at removed versions are deleted; every remaining snapshot (in this stream and in the forks
  that share its history) whose manifest names something removed or rewritten is repaired: an event base
  is moved to where its event now lives, and a key whose base is gone is rebased on a snapshot that now
  holds it or written in full into the snapshot.
- A version a fork branches at is never removed by prune/expire (it is kept and reported in
  `kept_for_forks`); `remove()` refuses it.
- prune/expire never remove the head. `remove()` of the head deletes it and everything that belongs to
  it, except that a head recording tool calls is refused (VersionInUseError): no later version could
  take them, and `undo_tools` must still see every call and undo record. The head moves back to the
  version before, and the stream records the removed number
  (streams.removed_head) so that the next version is numbered above it: a version number never names
  two different states (a caller may hold it as a checkpoint id).
- The checksum chain is recomputed from the first rewritten version on (each kept version chains from
  the previous kept one), in this stream and in the forks below it.
- Everything happens in one write transaction that also bumps the history generation, so every other
  Store drops cached heads whose snapshot trackers could still name removed rows. Free pages go back to
  the file system with an incremental vacuum.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

import orjson

from .checkpoint import format_time, utc_now
from .codec import StoredCodec
from .diffing import MISSING, value_at
from .errors import InvalidArgumentError, StreamInUseError, VersionInUseError, VersionNotFoundError
from .integrity import ROOT, version_checksum
from .journal import Journal, Segment, StreamRow, VersionRow, segments_for
from .materialize import materialize
from .ops import DELETE, SET
from .paths import Path, from_text, to_text
from .snapshot import Base, KeyInfo, manifest_json, parse_manifest

if TYPE_CHECKING:
    from .core import Core

EventText = tuple[str, str, Union[str, None]]  # op, path, value JSON
_GONE = object()  # a manifest base that no longer exists


@dataclass(frozen=True)
class Pruned:
    """What a retention call did: the versions removed, and those kept only because forks branch there."""

    removed: tuple[int, ...] = ()
    kept_for_forks: tuple[int, ...] = ()


# -- the public verbs -----------------------------------------------------------------------------


def prune(core: Core, task_id: str, keep_last: int, *, auto_only: bool = False) -> Pruned:
    """Keep the newest `keep_last` versions of the lineage; remove this stream's older versions (with
    `auto_only`, only the automatic ones: every manual checkpoint stays)."""
    if type(keep_last) is not int or keep_last < 1:
        raise InvalidArgumentError("keep_last", keep_last, "must be an int >= 1 (the head is always kept)")
    _check_flag(auto_only)

    def choose(own: list[VersionRow], lineage: list[int]) -> set[int]:
        keep = set(lineage[-keep_last:])
        return {r.version for r in own if r.version not in keep and (r.auto or not auto_only)}

    return _remove(core, task_id, choose)


def expire(core: Core, task_id: str, older_than: dt.timedelta | dt.datetime, *, auto_only: bool = False) -> Pruned:
    """Remove this stream's versions created before `older_than` (an age, or an aware datetime); the
    head is always kept (with `auto_only`, only automatic versions are removed)."""
    if isinstance(older_than, dt.datetime):
        if older_than.tzinfo is None:
            raise InvalidArgumentError("older_than", older_than, "a datetime must be timezone-aware")
        cutoff = format_time(older_than)
    elif isinstance(older_than, dt.timedelta) and older_than >= dt.timedelta(0):
        cutoff = format_time(utc_now() - older_than)
    else:
        raise InvalidArgumentError("older_than", older_than, "must be a non-negative timedelta or an aware datetime")
    _check_flag(auto_only)

    def choose(own: list[VersionRow], lineage: list[int]) -> set[int]:
        return {r.version for r in own if r.created_at < cutoff and (r.auto or not auto_only)}

    return _remove(core, task_id, choose)


def remove(core: Core, task_id: str, version: int) -> Pruned:
    """Remove one version of this stream; every other version stays restorable. Removing the head moves
    the head back to the version before it; its number is not reused. A version that forks branch from,
    and a head that records tool calls (no later version could take them), cannot be removed
    (VersionInUseError)."""
    if type(version) is not int:
        raise InvalidArgumentError("version", version, "must be an int")

    def choose(own: list[VersionRow], lineage: list[int]) -> set[int]:
        if version not in {r.version for r in own}:
            if version in lineage:
                raise VersionInUseError(task_id, version, "it belongs to the stream this one was forked from")
            raise VersionNotFoundError(task_id, version, lineage[-1] if lineage else 0)
        return {version}

    return _remove(core, task_id, choose, strict=True)


def _check_flag(auto_only: Any) -> None:
    if type(auto_only) is not bool:
        raise InvalidArgumentError("auto_only", auto_only, "must be a bool")


# -- planning -------------------------------------------------------------------------------------


@dataclass
class _Run:
    """Removed versions folded into the next kept version `w`."""

    versions: list[int]
    w: int
    rewrite: bool = False  # True: w's events replace the previous kept state; False: merged events
    events: list[EventText] | None = None
    tools: list[tuple[Any, ...]] | None = None
    event_bytes: int = 0
    moved: dict[tuple[int, int], tuple[int, int]] | None = None  # merge: old (version, seq) -> (w, seq)
    sets: dict[str, tuple[int, bool]] | None = None             # rewrite: key -> (seq, value is a list)


def _remove(core: Core, task_id: str, choose: Callable[[list[VersionRow], list[int]], set[int]],
            strict: bool = False) -> Pruned:
    with core.session() as journal:
        with journal.write():
            journal.lock_tree(core.existing(journal, task_id)[0].tree_id)  # PostgreSQL: the tree's writers wait
            row, head = core.existing(journal, task_id)  # read again: a commit may have landed before the lock
            thread = journal.langgraph_thread_of(row.tree_id)
            if thread is not None:  # its pending writes refer to checkpoints, which the saver's own verbs keep whole
                raise StreamInUseError(task_id, [], thread, "thin it out with EventCkptSaver.prune or delete_for_runs")
            chain = core.lineage(journal, row)
            lo = (row.fork_version or 0) + 1
            own = journal.version_rows([Segment(row.tree_id, row.id, lo, head)]) if head >= lo else []
            lineage = journal.version_numbers(segments_for(chain, head))
            wanted = choose(own, lineage)
            forks = _forks(core, journal, row)
            anchors = {limit for _, limit in forks if limit >= lo}
            if strict:
                (version,) = wanted
                if version in anchors:
                    names = [d.name for d, limit in forks if limit == version]
                    raise VersionInUseError(task_id, version, f"forks {names!r} branch from it")
            doomed = wanted - anchors - ({head} if not strict else set())
            kept_for_forks = tuple(sorted(wanted & anchors))
            if not doomed:
                return Pruned((), kept_for_forks)
            if doomed == {head} and journal.tool_rows_of(row, head):
                # No later version can take its tool calls, and deleting them would let undo_tools run a
                # recorded reverse again (or never undo a recorded call): refuse, as for a fork's base.
                raise VersionInUseError(task_id, head, "it is the head and records tool calls, which undo_tools"
                                        " needs; save a new version first (the calls then move into it)")
            if doomed == {head}:  # nothing later replays its events: it goes, with what belongs to it
                journal.remove_versions(row, [head])
                journal.set_removed_head(row, head)
            else:
                _Rewrite(core, journal, row, chain, own, doomed, forks).run()
            journal.bump_generation(row.tree_id)
        core.forget_all()
        journal.reclaim()
    return Pruned(tuple(sorted(doomed)), kept_for_forks)


def _forks(core: Core, journal: Journal, row: StreamRow) -> list[tuple[StreamRow, int]]:
    """Every stream forked (directly or not) from `row`, parents first, with the newest version of
    `row` its lineage shares."""
    out = []
    for desc in core.subtree(journal, row)[1:]:
        chain = core.lineage(journal, desc)
        at = next(i for i, r in enumerate(chain) if r.id == row.id)
        out.append((desc, min(r.fork_version or 0 for r in chain[at + 1:])))
    return out


class _Rewrite:
    """One retention rewrite of stream `row`, planned in full before anything is written."""

    def __init__(self, core: Core, journal: Journal, row: StreamRow, chain: list[StreamRow],
                 own: list[VersionRow], doomed: set[int], forks: list[tuple[StreamRow, int]]) -> None:
        self.core, self.journal, self.row, self.chain = core, journal, row, chain
        # states it rebuilds are written back: as stored, whatever classes this process knows
        self.codec = StoredCodec()
        self.rows_by_id = {row.id: row, **{desc.id: desc for desc, _ in forks}}
        self.own = own
        self.own_rows = {r.version: r for r in own}
        self.doomed = doomed
        self.forks = forks
        self.runs = self._runs()
        self.run_of = {v: run for run in self.runs for v in run.versions + [run.w]}

    def _runs(self) -> list[_Run]:
        runs: list[_Run] = []
        pending: list[int] = []
        for vrow in self.own:
            if vrow.version in self.doomed:
                pending.append(vrow.version)
            elif pending:
                runs.append(_Run(pending, vrow.version))
                pending = []
        assert not pending, "the head is always kept"
        return runs

    def run(self) -> None:
        journal, row = self.journal, self.row
        for run in self.runs:
            self._plan_run(run)
        snapshots = self._plan_snapshots()
        checksums = self._plan_checksums()
        for run in self.runs:
            journal.rewrite_version(row, run.w, run.events or [], run.tools or [], run.event_bytes)
        journal.remove_versions(row, sorted(self.doomed))
        for owner, version, state, manifest in snapshots:
            journal.insert_snapshot(owner, version, state, manifest)
        for (stream_id, version), checksum in checksums.items():
            journal.set_checksum(self.rows_by_id[stream_id], version, checksum)

    # -- runs -------------------------------------------------------------------------------------

    def _plan_run(self, run: _Run) -> None:
        journal, row = self.journal, self.row
        rows = self.own_rows
        members = run.versions + [run.w]
        overhead = self.core.policy.event_overhead
        replaced = sum(rows[v].event_bytes + overhead * rows[v].event_count for v in members)
        run.tools = [t for v in members for t in journal.tool_rows_of(row, v)]
        if self._state_smaller_than(run.w, replaced):
            self._plan_rewrite(run)
        else:
            merged = [((v, seq), event) for v in members for seq, event in enumerate(journal.events_of(row, v))]
            run.events, run.moved = [], {}
            for old, event in _without_overwritten(merged, self._existed_before(run)):
                run.moved[old] = (run.w, len(run.events))
                run.events.append(event)
            run.event_bytes = _value_bytes(run.events)

    def _existed_before(self, run: _Run) -> Callable[[Path], bool]:
        """Whether a path exists in the state before the run (the previous kept version's)."""
        previous = self._previous_kept(run.versions[0])
        segments = segments_for(self.chain, previous)
        return lambda path: value_at(self.journal, self.codec, segments, path, previous) is not MISSING

    def _plan_rewrite(self, run: _Run) -> None:
        codec, policy = self.codec, self.core.policy
        previous = self._previous_kept(run.versions[0])
        before = materialize(self.journal, codec, self.chain, previous, policy)[0] if previous else {}
        after = materialize(self.journal, codec, self.chain, run.w, policy)[0]
        events: list[EventText] = [(DELETE, to_text((k,)), None) for k in _out_of_place(before, after)]
        run.sets = {}
        for key, value in after.items():
            run.sets[key] = (len(events), type(value) is list)
            events.append((SET, to_text((key,)), codec.encode_text(value)))
        run.rewrite, run.events = True, events
        run.event_bytes = _value_bytes(events)

    def _previous_kept(self, version: int) -> int:
        """The lineage version before `version` that stays (0 when none)."""
        earlier = [r.version for r in self.own if r.version < version and r.version not in self.doomed]
        return earlier[-1] if earlier else (self.row.fork_version or 0)

    def _state_smaller_than(self, version: int, limit: int) -> bool:
        """Whether the state at `version` holds fewer than about `limit` bytes: its snapshot's sizes
        plus the event bytes since (read only when the snapshot alone is smaller)."""
        segments = segments_for(self.chain, version)
        snap = self.journal.latest_snapshot(segments)
        since, total = 0, 0
        if snap is not None:
            since = snap[0]
            total = sum(size for _, size in parse_manifest(snap[2]).values())
            if total >= limit:
                return False
        tail = [Segment(s.tree_id, s.stream_id, max(s.lo, since + 1), s.hi) for s in segments if s.hi > since]
        return total + sum(r.event_bytes for r in self.journal.version_rows(tail)) < limit

    # -- snapshots --------------------------------------------------------------------------------

    def _plan_snapshots(self) -> list[tuple[StreamRow, int, str, str]]:
        """The repaired (stream, version, state, manifest) of every remaining snapshot that names
        something removed or rewritten, in this stream and in the forks sharing its history."""
        first = min(self.doomed)
        todo: list[tuple[StreamRow, int, tuple[int, str, str]]] = []
        for snap in self.journal.snapshots_in(self.row, first, 1 << 62):
            if snap[0] not in self.doomed:
                todo.append((self.row, snap[0], snap))
        for desc, limit in self.forks:
            if limit >= first:
                for snap in self.journal.snapshots_in(desc, (desc.fork_version or 0) + 1, 1 << 62):
                    todo.append((desc, limit, snap))
        holders: dict[tuple[str, Any], list[tuple[int, int]]] = {}  # (key, old base) -> snapshots holding it
        out = []
        for owner, limit, (version, state_text, manifest_text) in todo:
            fixed = self._fix_snapshot(owner, limit, version, state_text, manifest_text, holders)
            if fixed is not None:
                out.append((owner, version, *fixed))
        return out

    def _fix_snapshot(self, owner: StreamRow, limit: int, version: int, state_text: str, manifest_text: str,
                      holders: dict[tuple[str, Any], list[tuple[int, int]]]) -> tuple[str, str] | None:
        """`limit` is the newest version of this stream (self.row) in the snapshot's lineage."""
        segments = segments_for(self.core.lineage(self.journal, owner), version)

        def owner_of(v: int) -> int | None:
            return next((s.stream_id for s in segments if s.lo <= v <= s.hi), None)

        manifest = parse_manifest(manifest_text)
        keys: dict[str, KeyInfo] = {}
        literal: list[str] = []
        changed = False
        for key, (base, size) in manifest.items():
            keys[key] = KeyInfo(base, size)
            if base == version:
                continue
            new = self._moved_base(key, base, limit, owner_of(_base_version(base)) == self.row.id)
            if new == base:
                continue
            changed = True
            if new is _GONE:
                held = [h for h in holders.get((key, base), ())  # a snapshot of this lineage, already holding it
                        if owner_of(h[1]) == h[0] and h[1] < version and not self._reset_between(key, h[1], limit)]
                if held:
                    new = held[-1][1]
                else:
                    new = version
                    literal.append(key)
                    holders.setdefault((key, base), []).append((owner.id, version))
            keys[key].base = new
        if not changed:
            return None
        if literal:
            core = self.core
            state = materialize(self.journal, self.codec, core.lineage(self.journal, owner), version, core.policy)[0]
            written = {}
            for key in literal:
                raw = self.codec.encode(state[key])
                keys[key].size = len(raw)
                written[key] = orjson.Fragment(raw)
            # in the manifest's order, which is the state's: a restore from literal keys alone takes their
            # order from here (the values already there are stored JSON, written back as they were)
            stored = orjson.loads(state_text)
            state_text = orjson.dumps({key: written[key] if key in written else stored[key]
                                       for key in keys if key in written or key in stored}).decode()
        return state_text, manifest_json(keys)

    def _moved_base(self, key: str, base: Base, limit: int, here: bool) -> Any:
        """Where the base of `key` lives after the rewrite, or _GONE. `here`: the base is in this stream
        (a base in an ancestor stays, but a rewrite here may set the key after it)."""
        if not here:
            new: Any = base
        elif type(base) is int:
            new = _GONE if base in self.doomed else base
        else:
            v, seq = base  # type: ignore[misc]
            run = self.run_of.get(v)
            if run is None:
                new = base
            elif not run.rewrite:
                new = (run.moved or {}).get((v, seq), _GONE)  # an event dropped as overwritten
            else:
                new = self._set_base(run, key)
        if new is _GONE:
            return _GONE
        after = _base_version(new)
        later = [run for run in self.runs if run.rewrite and after < run.w <= limit and key in (run.sets or {})]
        return self._set_base(later[-1], key) if later else new

    @staticmethod
    def _set_base(run: _Run, key: str) -> Any:
        """A rewritten version sets `key` in full: a list restarts there (a creation event base)."""
        seq, is_list = (run.sets or {}).get(key, (0, False))
        return (run.w, seq) if key in (run.sets or {}) and is_list else _GONE

    def _reset_between(self, key: str, after: int, limit: int) -> bool:
        return any(run.rewrite and after < run.w <= limit and key in (run.sets or {}) for run in self.runs)

    # -- checksums --------------------------------------------------------------------------------

    def _plan_checksums(self) -> dict[tuple[int, int], bytes]:
        """New checksums from the first rewritten version on: each kept version chains from the previous
        kept version of its lineage (ROOT for the first), in this stream and its forks."""
        journal = self.journal
        first = self.runs[0].w
        rewritten = {run.w: run.events or [] for run in self.runs}
        kept = [r for r in self.own if r.version not in self.doomed]
        out: dict[tuple[int, int], bytes] = {}
        parent = self._checksum_before(kept, first)
        for vrow in kept:
            if vrow.version < first:
                continue
            events = rewritten.get(vrow.version)
            if events is None:
                events = journal.events_of(self.row, vrow.version)
            parent = _checksum(vrow, events, parent)
            out[(self.row.id, vrow.version)] = parent
        for desc, _ in self.forks:  # parents before children
            at = desc.fork_version or 0
            segments = segments_for(self.core.lineage(journal, desc), at)
            hit = next((s.stream_id for s in segments if s.lo <= at <= s.hi), None)
            if hit is None or (hit, at) not in out:
                continue
            parent = out[(hit, at)]
            for vrow in journal.version_rows([Segment(desc.tree_id, desc.id, at + 1, 1 << 62)]):
                parent = _checksum(vrow, journal.events_of(desc, vrow.version), parent)
                out[(desc.id, vrow.version)] = parent
        return out

    def _checksum_before(self, kept: list[VersionRow], first: int) -> bytes:
        earlier = [r for r in kept if r.version < first]
        if earlier:
            return earlier[-1].checksum
        at = self.row.fork_version or 0
        if not at:
            return ROOT
        segments = segments_for(self.chain[:-1], at)
        holder = next(s for s in segments if s.lo <= at <= s.hi)
        vrow = self.journal.version_row(holder, at)
        return vrow.checksum if vrow else ROOT


def _out_of_place(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The keys a top-level replacement of `before` by `after` deletes before setting every key of `after`:
    those gone, and those that must move. A set keeps an existing key where it is and puts a new one
    last, so the keys that stay must be, in `before`'s order, the start of `after`'s order; every other
    key is deleted and set again (last, in `after`'s order)."""
    order = list(after)
    out, n = [], 0
    for key in before:
        if n < len(order) and key == order[n]:
            n += 1
        else:
            out.append(key)
    return out


def _without_overwritten(events: list[tuple[Any, EventText]],
                         existed: Callable[[Path], bool]) -> list[tuple[Any, EventText]]:
    """Drop the merged events a later `set` at exactly their path makes moot (the path holds no list
    index, and nothing kept between touches the path, its ancestors or its descendants): folding the rest
    gives the same state, and the steps of removed versions stop costing space.

    Only where dropping cannot move the key among its siblings: a delete stays (the key it removes goes
    last when set again), and so does an event at a path that did not exist just before it (a set that
    creates a key places it then, not where the later set would). `existed(path)` answers for the state
    before the events, when they do not tell."""
    paths = [from_text(text) for _, (_, text, _) in events]
    present = _presence([(event[0], path) for (_, event), path in zip(events, paths)])
    asked: dict[Path, bool] = {}
    kept: list[tuple[Any, EventText]] = []
    overwritten: set[tuple[Any, ...]] = set()  # paths a later kept `set` replaces wholesale
    for i in range(len(events) - 1, -1, -1):
        old, event = events[i]
        op, path = event[0], paths[i]
        if path in overwritten and op != DELETE:
            there = present[i]
            if there is None:
                there = asked[path] = asked[path] if path in asked else existed(path)
            if there:
                continue
        overwritten = {p for p in overwritten if p[:len(path)] != path and path[:len(p)] != p}
        if op == SET and all(type(k) is str for k in path):
            overwritten.add(path)
        kept.append((old, event))
    kept.reverse()
    return kept


def _presence(events: list[tuple[str, Path]]) -> list[bool | None]:
    """For each (op, path) whose path is keys only: whether the path exists just before it, as far as the
    events before it tell; None when they do not (it is as in the state before them). A set or delete of
    an ancestor leaves what lies below it unknown or gone: False (so nothing relies on it)."""
    known: dict[Path, tuple[bool, int]] = {}  # path -> (exists, index of the event that said so)
    cut: dict[Path, int] = {}  # path -> index of the newest set or delete of it
    out: list[bool | None] = []
    for i, (op, path) in enumerate(events):
        keys = next((j for j, k in enumerate(path) if type(k) is not str), len(path))
        answer: bool | None = None
        if keys == len(path):
            newest_cut = max((cut.get(path[:j], -1) for j in range(1, len(path))), default=-1)
            entry = known.get(path)
            if entry is not None and entry[1] > newest_cut:
                answer = entry[0]
            elif newest_cut >= 0:
                answer = False
        out.append(answer)
        for j in range(1, min(keys + 1, len(path))):  # an event's ancestors exist, before and after it
            known[path[:j]] = (True, i)
        if keys == len(path):
            known[path] = (op != DELETE, i)
            if op == SET or op == DELETE:
                cut[path] = i
    return out


def _value_bytes(events: Sequence[EventText]) -> int:
    """What a commit records as a version's event bytes: its values' JSON in UTF-8 bytes, not characters
    (verify compares the two)."""
    return sum(len(e[2].encode()) for e in events if e[2] is not None)


def _checksum(vrow: VersionRow, events: Sequence[EventText], parent: bytes) -> bytes:
    return version_checksum(parent, vrow.version, vrow.created_at, vrow.name, vrow.auto, vrow.metadata,
                            vrow.usage, events)


def _base_version(base: Any) -> int:
    return base if type(base) is int else base[0]

