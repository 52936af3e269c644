"""`get_delta_channel_history`: a channel's value at the nearest ancestor holding it, and the writes since.

LangGraph rebuilds a channel that a checkpoint does not hold (a DeltaChannel between its snapshots) from
the ancestors of that checkpoint: the nearest one whose `channel_values` holds the channel gives the
seed, and the pending writes of that ancestor and of every one after it, up to the target's parent,
are replayed onto it (BaseCheckpointSaver.get_delta_channel_history has the contract).

Here the ancestors are the versions of the target's lineage before it. Which ones hold a channel is
read from the events, not from states: the key of a channel is in a version's state from its last
top-level event up to a version that deletes it, so one indexed lookup of that key's newest event
finds the seed (the target's parent, or the version before the delete that ended it). The writes of
the whole range are one query, and every seed is read in one pass (replay.states_at).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.base import DeltaChannelHistory

from ..journal import Segment
from ..ops import DELETE
from ..paths import to_text
from .layout import OVERFLOW, SERDE, channel_key
from .replay import states_at
from .writes import is_reference, resolve

if TYPE_CHECKING:
    from ..store import Store
    from .values import Values


def delta_history(store: Store, values: Values, thread_id: str, ns: str, checkpoint_id: str | None,
                  channels: Sequence[str]) -> dict[str, DeltaChannelHistory]:
    """See the module's docstring; `checkpoint_id` None names the namespace's newest checkpoint."""
    if not channels:
        return {}
    wanted = list(dict.fromkeys(channels))
    with store.core.session() as journal, journal.read():
        rows = journal.langgraph_checkpoints(thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id,
                                             limit=1)
        if not rows or rows[0].version <= 1:
            return {ch: {"writes": []} for ch in wanted}
        target = rows[0]
        stream = journal.stream(target.stream)
        assert stream is not None
        parent = target.version - 1
        segments = store.core.segments(journal, stream, parent)
        seeds: dict[str, int | None] = {}  # channel -> the version holding its seed (None: none)
        for ch in wanted:
            key = channel_key(ch)
            seeds[ch] = _seed_version(journal, segments, key, parent) if key is not None else _OVERFLOW
        first = min((v for v in seeds.values() if v is not None and v is not _OVERFLOW), default=1)
        if any(v is None or v is _OVERFLOW for v in seeds.values()):
            first = 1
        writes = journal.langgraph_lineage_writes(thread_id, ns, _clip(segments, first))
    overflow = [ch for ch, v in seeds.items() if v is _OVERFLOW]
    if overflow:  # channels whose names cannot be keys: look at the states themselves (rare)
        states = states_at(store, target.stream, range(1, target.version))
        for ch in overflow:
            seeds[ch] = max((v for v, s in states.items() if ch in s.get(OVERFLOW, {})), default=None)
    seed_values = _seed_values(store, values, target.stream, seeds)
    collected: dict[str, list[tuple[int, tuple[str, str, Any]]]] = {ch: [] for ch in wanted}
    references = []
    decoded = store.codec.decode_many([text for *_, text in writes])
    for (version, _, task_id, _, _), entries in zip(writes, decoded, strict=True):
        for _, channel, encoding, value in entries:
            if channel in collected and version >= (seeds[channel] or 1):
                collected[channel].append((version, (task_id, channel, (encoding, value))))
                if is_reference(encoding):
                    references.append((thread_id, ns, channel, encoding))
    resolved = resolve(store, values, references) if references else {}
    out: dict[str, DeltaChannelHistory] = {}
    for ch in wanted:
        entry: DeltaChannelHistory = {"writes": [
            (task_id, channel, resolved[id(enc)] if is_reference(enc) else values.decode(value, enc))
            for _, (task_id, channel, (enc, value)) in collected[ch]
        ]}
        if ch in seed_values:
            entry["seed"] = seed_values[ch]
        out[ch] = entry
    return out


_OVERFLOW: Any = object()


def _seed_version(journal: Any, segments: Sequence[Segment], key: str, parent: int) -> int | None:
    """The newest version <= parent whose state holds `key`, from the key's newest top-level event."""
    event = journal.newest_event(segments, to_text((key,)), parent)
    if event is None:
        return None
    version, _, op, _, _ = event
    if op != DELETE:
        return parent
    return version - 1 if version > 1 else None


def _clip(segments: Sequence[Segment], first: int) -> list[Segment]:
    return [Segment(s.tree_id, s.stream_id, max(s.lo, first), s.hi) for s in segments if s.hi >= first]


def _seed_values(store: Any, values: Any, stream: str, seeds: Mapping[str, int | None]) -> dict[str, Any]:
    versions = {v for v in seeds.values() if v is not None}
    if not versions:
        return {}
    states = states_at(store, stream, versions)
    out = {}
    for ch, version in seeds.items():
        if version is None:
            continue
        state = states[version]
        key = channel_key(ch)
        if key is not None and key in state:
            out[ch] = values.decode(state[key], state.get(SERDE + key))
        elif key is None and ch in state.get(OVERFLOW, {}):
            encoding, stored = state[OVERFLOW][ch]
            out[ch] = values.decode(stored, encoding)
    return out
