"""What one put stores: the channels that changed, and a grown reducer channel as appends.

LangGraph tells a saver what changed: `new_versions` names the channels a step wrote, and the step's
tasks hand their writes to `put_writes` (on the parent checkpoint) before the put. A put therefore
stores only the channels in `new_versions`; the others are kept as the parent stored them.

A list channel with a reducer (`add_messages`, `operator.add`) grows every step by what the tasks
wrote. Comparing the whole list with the stored one would cost O(conversation) per step, so the saver
uses the writes instead, as LangGraph's DeltaChannel does: when the new list is the old one followed by
exactly the items the parent's tasks wrote (the same objects, in writes order, and as many items as
were written), those items are appended and nothing else is compared. The writes vouch for the tail
only: the list's first `length` items must also be the old list's objects, checked by identity at the
first, the middle and the last of them (O(1); a reducer that puts new items first, or reorders, fails
it even when its tail equals the written items). For that the saver keeps its own copy of the old list
(`Channel.given`: the items of the list the previous put was given, or of the list get_tuple handed out
for the thread's newest checkpoint, which a run continuing it builds on), grown in place by each append
(O(change)); a copy, because a node may assign to a slot of the list it was given (`todo[0] = ...`)
and return a new list built on it. When the old objects are unknown or the check fails, the list is
compared as below. So a reducer is stored as appends when it returns a new list (or
the old one) whose first items are the old list's very objects, in order, followed by the written ones;
anything else is compared with the stored list, exactly. LangGraph hands a task's writes
to the saver on a background thread that may run after the step's put: the put first waits (briefly)
for writes it can tell are still missing (saver.py). When the writes do not tell, a list that starts
with the very items of that copy (checked at C speed: identical objects compare without calling
__eq__) is stored as appends too; anything else is compared with the stored list.

This rests on one assumption, the one DeltaChannel's replay rests on too: a reducer (or a node) does
not change the items already in the list in place, nor the slots of the list it was given (a list
whose tail the writes explain is checked at three old items only). It may append, replace or remove
(in a new list: `add_messages` replacing a message by id or removing one changes the list's length
or which object sits where, and is then stored by comparing the whole list: a replacement by an equal
item is a change, since only the same objects are taken as unchanged, or, in a plain JSON channel, items
equal with exact types).

Nothing is assumed, and every channel LangGraph says changed is compared with the stored value exactly
(a dict too, which a running graph otherwise stores as the keys whose values are other objects, see
`_merge`), in two cases:
- outside a running graph (update_state, an input, a fork: metadata source other than "loop"), since
  whoever passes a value may have edited in place what invoke, get_state or their own earlier call
  handed over;
- for a channel without a reducer, whose task wrote the very new value: a node may have edited its old
  items in place before returning them in a new list (or dict), and its writes cost the whole value
  already.

Only checkpoints whose parent is the checkpoint this saver put last take these paths; the equality tests
against SqliteSaver check the result on real graphs.

A write whose items the put appends is then stored once: its value in the writes row becomes a
reference to the child's append (writes.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from operator import is_
from typing import Any

import ormsgpack
from langgraph.checkpoint.base import ChannelVersions, Checkpoint

from ..ops import DELETE, Event, edited_order, same
from ..ops import SET as SET_OP
from ..paths import addressable
from .heads import Blob, Entry, blob_of, grown
from .layout import OVERFLOW, SERDE, channel_key
from .values import TREE_ENCODING, Encoded, Values
from .writes import TaskWrites, Write, reference

KEEP, EXTEND, SET, MERGE = "keep", "extend", "set", "merge"
_MISSING: Any = object()


@dataclass(slots=True)
class Channel:
    """How a stored checkpoint holds one channel: its encoding, its length when it is a list, and a copy
    of the list (its first `length` items: a later put may have grown the copy in place) or of the plain
    dict the put that stored it was given, or of the list get_tuple handed out for it (None when not
    known). A Channel is never changed: replaced whole, so a put reading it on another thread sees its
    fields agree."""

    encoding: list[str] | None
    length: int | None
    given: list[Any] | dict[str, Any] | None = None


@dataclass(slots=True)
class Thread:
    """The newest checkpoint of a thread's namespace as this saver knows it: where it is, how its
    channels are stored, and the writes stored for it since (by task id; None when writes may exist
    that this saver did not make in this process)."""

    checkpoint_id: str
    stream: str
    stream_id: int
    version: int
    channels: dict[str, Channel]
    overflow: frozenset[str]
    writes: dict[str, TaskWrites] | None = field(default_factory=dict)


@dataclass(slots=True)
class Plan:
    """The state changes of one put (see CheckpointStore.update) and what to remember after it."""

    changes: dict[str, Any] = field(default_factory=dict)
    appends: dict[str, tuple[int, list[Any]]] = field(default_factory=dict)
    edits: list[Event] = field(default_factory=list)
    keep: set[str] = field(default_factory=set)
    unchecked: set[str] = field(default_factory=set)
    channels: dict[str, Channel] = field(default_factory=dict)
    overflow: frozenset[str] = frozenset()
    # channel -> (KEEP,) | (EXTEND, bytes, n, plain items or None, msgpack item sizes or None) | (SET, Encoded)
    #   | (MERGE, {key: value or _MISSING})
    blobs: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    references: list[tuple[str, int, list[Any]]] = field(default_factory=list)  # (task id, idx, reference)

    def entry(self, version: int, previous: Entry | None) -> Entry | None:
        """The head cache entry of the version this plan committed (None when it would need channels
        of a previous entry that is not cached, or a value cannot be packed)."""
        channels: dict[str, Blob] = {}
        for name, action in self.blobs.items():
            if action[0] == SET:
                encoded: Encoded = action[1]
                try:
                    channels[name] = blob_of(encoded.stored, encoded.encoding, encoded.data)
                except (ormsgpack.MsgpackEncodeError, TypeError):
                    return None
                continue
            old = previous.channels.get(name) if previous is not None else None
            if old is None:
                return None
            if action[0] == MERGE:  # the stored dict and the edits stored: never a value the file lacks
                merged = old.value(None)
                for k, v in action[1].items():
                    if v is _MISSING:
                        del merged[k]
                    else:
                        merged[k] = v
                try:
                    channels[name] = blob_of(merged, None)
                except (ormsgpack.MsgpackEncodeError, TypeError):
                    return None
                continue
            try:
                channels[name] = old if action[0] == KEEP else old.extended(*action[1:])
            except (ormsgpack.MsgpackEncodeError, TypeError):  # flat items holding a number msgpack cannot hold
                return None
        return Entry(version, channels)


class Put:
    """Plans one put; the plan can be made again (as a fork, or strictly) without encoding twice."""

    def __init__(self, values: Values, checkpoint: Checkpoint, new_versions: ChannelVersions,
                 thread: Thread | None, source: Any) -> None:
        self.values = values
        self.checkpoint_id = checkpoint["id"]
        self.channel_values = checkpoint.get("channel_values", {})
        self.versions = checkpoint.get("channel_versions", {})
        self.new_versions = new_versions
        self.thread = thread
        self.loop = source == "loop"
        self.strict = False  # set when a channel passed as plain JSON turned out not to be
        self._encoded: dict[str, Encoded] = {}

    def plan(self, common: bool) -> Plan:
        """The changes against the head: the thread's newest checkpoint when `common` (the put continues
        it), else any head (everything is compared with it)."""
        plan = Plan()
        thread = self.thread if common else None
        overflow = []
        for name, value in self.channel_values.items():
            key = channel_key(name)
            if key is None:
                overflow.append(name)
                continue
            prev = thread.channels.get(name) if thread is not None else None
            if prev is not None and name not in self.new_versions and name in self.versions:
                plan.keep.add(key)
                if prev.encoding is not None:
                    plan.keep.add(SERDE + key)
                plan.channels[name] = prev
                plan.blobs[name] = (KEEP,)
            elif not (prev is not None and name in self.new_versions and self.loop
                      and not self._written_whole(name, value)
                      and (self._append(plan, key, name, value, prev) or self._merge(plan, key, name, value, prev))):
                self._set(plan, key, name, value)
        plan.overflow = frozenset(overflow)
        if overflow:
            touched = any(n in self.new_versions or n not in self.versions for n in overflow)
            if thread is not None and plan.overflow == thread.overflow and not touched:
                plan.keep.add(OVERFLOW)
                plan.blobs.update((name, (KEEP,)) for name in overflow)
            else:
                plan.changes[OVERFLOW] = {}
                for name in overflow:
                    encoded = self._encoded_value(name, self.channel_values[name])
                    plan.changes[OVERFLOW][name] = [encoded.encoding, encoded.stored]
                    plan.blobs[name] = (SET, encoded)
        return plan

    def _set(self, plan: Plan, key: str, name: str, value: Any) -> None:
        thread = self.thread
        prev = thread.channels.get(name) if thread is not None else None
        if prev is not None and prev.encoding is None and not self.strict:
            # plain JSON last time: pass it as it is and let the store check only what changed
            encoded = Encoded(value, None)
            plan.unchecked.add(key)
        else:
            encoded = self._encoded_value(name, value)
        plan.changes[key] = encoded.stored
        if encoded.encoding is not None:
            plan.changes[SERDE + key] = encoded.encoding
        listed = type(encoded.stored) is list and (encoded.encoding is None or encoded.encoding == TREE_ENCODING)
        if listed:
            given = list(value) if type(value) is list else None
        else:
            # a copy: a node may set a key of the dict LangGraph passed in place (see _merge)
            given = dict(value) if type(value) is dict and encoded.encoding is None else None
        plan.channels[name] = Channel(encoded.encoding, len(encoded.stored) if listed else None, given)
        plan.blobs[name] = (SET, encoded)

    def _encoded_value(self, name: str, value: Any) -> Encoded:
        hit = self._encoded.get(name)
        if hit is None:
            hit = self._encoded[name] = self.values.encode_value(value, name)
        return hit

    def _append(self, plan: Plan, key: str, name: str, value: Any, prev: Channel) -> bool:
        """Store the channel as the items appended to it, when it is exactly that (see above)."""
        length = prev.length
        if length is None or type(value) is not list or len(value) <= length:
            return False
        # the writes explain the tail; the start is checked at three items (O(1)), else compared
        parts = self._written(name, len(value) - length) if self.loop and self._starts_alike(value, prev) else None
        if parts is None and not self._same_start(value, prev):
            return False
        encoded = self.values.encode_items(value[length:], prev.encoding)
        if encoded is None:
            return False
        items, body, sizes = encoded
        if parts is not None:
            references = self._references(parts, value, length, items, prev.encoding)
            if references is None and not self._same_start(value, prev):
                return False
            plan.references.extend(references or ())
        plan.appends[key] = (length, items)
        if prev.encoding is not None:
            plan.keep.add(SERDE + key)
        plan.channels[name] = Channel(prev.encoding, length + len(items), grown(prev.given, length, value[length:]))
        plan.blobs[name] = (EXTEND, body, len(items), items if prev.encoding is None else None, sizes)
        return True

    def _merge(self, plan: Plan, key: str, name: str, value: Any, prev: Channel) -> bool:
        """Store a plain dict as the keys that changed since the dict the previous put was given (a
        shallow copy of it): those whose value is another object now (a reducer merging dicts keeps the
        others' objects). The head cache gets the stored dict with these edits, not `value`: a value a
        node changed in place inside the dict is not stored, so it must not be read back either."""
        given = prev.given
        if self.strict or type(value) is not dict or type(given) is not dict:  # given: the copy a put kept
            return False
        changed = [k for k, v in value.items() if given.get(k, _MISSING) is not v]
        removed = [k for k in given if k not in value]
        if list(value) != edited_order(given, value):
            return False  # keys in another order than edits give (new ones last): a set keeps the order
        if len(changed) + len(removed) > max(8, len(value) // 2):
            return False
        if not all(type(k) is str and k[:1] != "$" and addressable(k) for k in (*changed, *removed)):
            return False
        plan.edits.extend(Event(SET_OP, (key, k), value[k]) for k in changed)
        plan.edits.extend(Event(DELETE, (key, k)) for k in removed)
        plan.keep.add(key)
        plan.unchecked.add(key)  # the store checks that the new values are plain JSON
        # A shallow copy (O(keys)) as `given`: the dict LangGraph passed may be the one a node of the next
        # step sets a key of in place; compared with itself that key would look unchanged and be lost.
        plan.channels[name] = Channel(None, None, dict(value))
        plan.blobs[name] = (MERGE, {**{k: value[k] for k in changed}, **dict.fromkeys(removed, _MISSING)})
        return True

    def _references(self, parts: list[tuple[str, int, Write, list[Any]]], value: list[Any], length: int,
                    items: list[Any], encoding: Any) -> list[tuple[str, int, list[Any]]] | None:
        """References for the writes whose items the tail is (the written objects themselves, or items
        stored alike: a resumed run applies the writes it read back); None when the tail is not theirs."""
        out = []
        offset = 0
        for task_id, idx, write, written in parts:
            count = len(written)
            single = type(write.live) is not list
            mine = items[offset : offset + count]
            alike = write.encoding == encoding and same(write.stored, mine[0] if single else mine)
            if alike:
                out.append((task_id, idx, reference(self.checkpoint_id, length, offset, count, single, encoding)))
            elif any(value[length + offset + i] is not item for i, item in enumerate(written)):
                return None
            offset += count
        return out

    @staticmethod
    def _starts_alike(value: list[Any], prev: Channel) -> bool:
        """Whether the list's first `length` items are the old list's objects at its first, middle and
        last item: what tells a reducer that appends from one that puts new items first or reorders,
        at O(1) (the writes check the tail; a full pass would cost O(conversation) per step)."""
        given, length = prev.given, prev.length
        if type(given) is not list or length is None or len(given) < length:
            return False  # the old objects are unknown: compare
        if length == 0:
            return True
        middle, last = length // 2, length - 1
        return value[0] is given[0] and value[middle] is given[middle] and value[last] is given[last]

    def _same_start(self, value: list[Any], prev: Channel) -> bool:
        """Whether the list starts with the items of the old list (the saver's copy): the same objects
        (compared at C speed), or, in a channel stored as plain JSON, items equal to them with exact
        types. An equal object that is not the same one is otherwise a change: `==` cannot tell a
        replacement by an equal item (1 -> 1.0, a field its __eq__ leaves out) from none."""
        given, length = prev.given, prev.length
        if type(given) is not list or length is None or len(given) < length:
            return False
        prefix = value[:length]
        old = given if len(given) == length else given[:length]
        return all(map(is_, prefix, old)) or (prev.encoding is None and same(prefix, old))

    def _written_whole(self, name: str, value: Any) -> bool:
        """Whether a task of the parent wrote this very value to the channel: a channel without a reducer,
        whose node may have edited the old items in place before returning them in a new list (or dict).
        Its writes already cost the whole value, so it is compared with the stored one, exactly."""
        writes = self.thread.writes if self.thread is not None else None
        return bool(writes) and any(write.live is value for task in writes.values()
                                    for write in task.writes.values() if write.channel == name)

    def _written(self, name: str, grown: int) -> list[tuple[str, int, Write, list[Any]]] | None:
        """(task id, idx, write, its items) of the parent's writes to the channel in writes order, when
        they hold exactly `grown` items; else None."""
        writes = self.thread.writes if self.thread is not None else None
        if not writes:
            return None
        parts, total = [], 0
        for task_id, task in sorted(writes.items(), key=lambda kv: (kv[1].path, kv[0])):
            for idx in sorted(task.writes):
                write = task.writes[idx]
                if write.channel != name:
                    continue
                if not write.is_live:
                    return None
                items = write.live if type(write.live) is list else [write.live]
                parts.append((task_id, idx, write, items))
                total += len(items)
        return parts if total == grown else None

