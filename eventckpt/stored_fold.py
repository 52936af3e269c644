"""Folding events onto a state kept as its stored JSON (tags and all), without decoding it.

verify replays a journal this way so that classes the verifying process does not know cannot cause
false alarms. Two things make the stored form differ from plain JSON, and both are folded here as the
store's own codec would have written the result:
  - A dict whose keys are not all plain text is stored as `{"$dict": [[key, value], ...]}`: events at a
    path through it find their key among the pairs, and after an event it is stored as pairs or as a plain
    dict, whichever its keys now need.
  - A number beyond 64 bits (or, when allowed, NaN and infinities) is stored as `{"$bigint": text}` /
    `{"$float": text}`: an incr adds the numbers and stores the sum as the codec stores it.
"""

from __future__ import annotations

from typing import Any

import orjson

from .codec import Codec
from .ops import APPEND, DELETE, EXTEND, INCR, SET, TRUNCATE
from .paths import Path

_PAIRS = "$dict"
_MISSING: Any = object()


class StoredFolder:
    """Folds events onto stored-JSON states; holds the codec that stores an incr's sum."""

    def __init__(self) -> None:
        self.numbers = Codec(allow_nan=True)  # only ever given numbers: no class is decoded or remembered

    def fold(self, state: dict[str, Any], op: str, path: Path, value: Any) -> None:
        """Fold one event (its value as stored JSON) onto `state` in place; raises when it does not fit."""
        parent: Any = state
        for key in path[:-1]:
            parent = _child(parent, key)
        key = path[-1]
        pairs = _is_pairs(parent)
        if type(parent) is list or parent is state or not pairs and not (type(key) is str and key[:1] == "$"):
            self._fold_plain(parent, op, key, value)
            return
        items = _items(parent) if pairs else list(parent.items())
        at = _find(items, key)
        current = items[at][1] if at is not None else _MISSING
        if op == DELETE:
            if at is None:
                raise KeyError(key)
            del items[at]
        else:
            new = self._result(op, current, value)
            if at is None:
                items.append((key, new))
            else:
                items[at] = (key, new)
        _store_items(parent, items)

    def _fold_plain(self, parent: Any, op: str, key: Any, value: Any) -> None:
        if op == DELETE:
            del parent[key]
            return
        current = parent.get(key, _MISSING) if type(parent) is dict else parent[key]
        new = self._result(op, current, value)
        if new is not current:
            parent[key] = new

    def _result(self, op: str, current: Any, value: Any) -> Any:
        """The value at the event's path after it (a list the event grows or cuts is changed in place)."""
        if op == SET:
            return value
        if op == APPEND or op == EXTEND:
            items = [value] if op == APPEND else list(value)
            if current is _MISSING:
                return items
            if type(current) is not list:
                raise TypeError(f"{op} needs a list, found {type(current).__name__}")
            current.extend(items)
            return current
        if op == TRUNCATE:
            if type(current) is not list:
                raise TypeError(f"truncate needs a list, found {type(current).__name__}")
            del current[value:]
            return current
        if op == INCR:
            total = (0 if current is _MISSING else self._number(current)) + self._number(value)
            return orjson.loads(self.numbers.encode(total))
        raise ValueError(f"unknown op {op!r}")

    def _number(self, stored: Any) -> int | float:
        number = self.numbers.untag(stored) if type(stored) is dict else stored
        if type(number) not in (int, float):
            raise TypeError(f"incr needs a number, found {type(number).__name__}")
        return number


def _is_pairs(node: Any) -> bool:
    return type(node) is dict and len(node) == 1 and _PAIRS in node


def _items(node: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [(k, v) for k, v in node[_PAIRS]]


def _find(items: list[tuple[Any, Any]], key: Any) -> int | None:
    """Where `key` (of that very type: 1 is not 1.0) is among a pairs-dict's items."""
    return next((i for i, (k, _) in enumerate(items) if type(k) is type(key) and k == key), None)


def _child(node: Any, key: Any) -> Any:
    """The value at `key` in a stored list, dict or pairs-dict (KeyError/IndexError when there is none)."""
    if _is_pairs(node):
        items = _items(node)
        at = _find(items, key)
        if at is None:
            raise KeyError(key)
        return items[at][1]
    return node[key]


def _store_items(node: dict[str, Any], items: list[tuple[Any, Any]]) -> None:
    """Store `items` in `node` in place, as the codec would: a plain dict when every key is text not
    starting with "$", else pairs."""
    node.clear()
    if all(type(k) is str and k[:1] != "$" for k, _ in items):
        node.update(items)
    else:
        node[_PAIRS] = [[k, v] for k, v in items]
