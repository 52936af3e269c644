"""Argument checks shared by the public write and read APIs: each raises InvalidArgumentError naming the
argument and what is wrong with it, before anything is written."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .errors import InvalidArgumentError
from .paths import encodable

MAX_NAME = 1024


def check_task_id(task_id: Any) -> str:
    if type(task_id) is not str or not task_id:
        raise InvalidArgumentError("task_id", task_id, "must be a non-empty string")
    if len(task_id) > MAX_NAME or "\x00" in task_id or not encodable(task_id):
        raise InvalidArgumentError(
            "task_id", task_id, f"must be at most {MAX_NAME} characters without NUL or lone surrogates"
        )
    return task_id


_VERSION_SUFFIX = re.compile(r"@v?[0-9]+\Z")


def check_new_name(task_id: Any) -> str:
    """A name for a stream about to be created: a valid name that does not end in '@' and a version, which
    the command line would read as STREAM@VERSION (user@example.com is fine; x@5 and x@v5 are not)."""
    check_task_id(task_id)
    if _VERSION_SUFFIX.search(task_id):
        raise InvalidArgumentError("task_id", task_id, "a new stream name cannot end in '@' and a number"
                                   " (the command line reads NAME@3 as version 3 of NAME)")
    return task_id


def plain_text(text: str) -> bool:
    """Whether a name can be stored as text on every engine: valid UTF-8 (no lone surrogate) without NUL
    (PostgreSQL's text cannot hold it)."""
    return "\x00" not in text and encodable(text)


def whole_number(text: str) -> bool:
    """Whether `text` is a whole number written in ASCII digits (str.isdigit alone also takes "²" and "٣",
    which int() refuses or reads as another script's digits)."""
    return text.isascii() and text.isdigit()


def check_version(name: str, value: Any) -> int:
    if type(value) is not int:
        raise InvalidArgumentError(name, value, "must be an int")
    return value


def check_number(name: str, value: Any) -> None:
    """A counter or increment: a finite float, or an int that JSON and SQLite hold exactly (64-bit)."""
    if not is_number(value):
        raise InvalidArgumentError(name, value, "must be a finite float or an int within 64 bits")


def is_number(value: Any) -> bool:
    t = type(value)
    return (t is int and -(2**63) <= value < 2**63) or (t is float and math.isfinite(value))


def check_added(counters: Any) -> dict[str, int | float]:
    """Amounts to add to usage counters: str names, numbers that are not negative (a counter counts what
    was spent; to correct a total, save the totals with token_usage=)."""
    if type(counters) is not dict and not isinstance(counters, Mapping):
        raise InvalidArgumentError("add_usage", counters, "must be a mapping of counter name to number")
    for key, n in counters.items():
        if key not in _COUNTER_NAMES:  # names repeat every step: each is checked once
            if type(key) is not str or not plain_text(key):
                raise InvalidArgumentError("add_usage", key, "counter names are str (valid UTF-8, without NUL)")
            if len(_COUNTER_NAMES) < 1024:
                _COUNTER_NAMES.add(key)
        check_number(key, n)
        if n < 0:
            raise InvalidArgumentError(key, n, "usage only adds up: an amount to add is not negative"
                                       " (to lower a total, save the totals with token_usage=)")
    return dict(counters)


_COUNTER_NAMES: set[str] = set()


def added(prev: dict[str, int | float], amounts: dict[str, int | float]) -> dict[str, int | float]:
    """The previous version's counters plus `amounts`."""
    out = dict(prev)
    for key, n in amounts.items():
        out[key] = out.get(key, 0) + n
    return out


def check_usage(token_usage: Any) -> dict[str, int | float] | None:
    """Token counters: a mapping of str names to numbers (None: none given)."""
    if token_usage is None:
        return None
    if not isinstance(token_usage, Mapping):
        raise InvalidArgumentError("token_usage", token_usage, "must be a mapping of counter name to number")
    out = {}
    for key, n in token_usage.items():
        if type(key) is not str or not plain_text(key):
            raise InvalidArgumentError("token_usage", token_usage, f"counter names are str (valid UTF-8, without NUL), not {key!r}")
        check_number(f"token_usage[{key!r}]", n)
        out[key] = n
    return out


def check_options(*, metadata: Any, name: Any, auto: Any, expected_version: Any, checkpoint_id: Any) -> None:
    """The options every commit takes."""
    if metadata is not None and not (isinstance(metadata, Mapping)
                                     and all(type(k) is str and "\x00" not in k for k in metadata)):
        raise InvalidArgumentError("metadata", metadata, "must be a mapping with str keys (without NUL)")
    if name is not None and (type(name) is not str or len(name) > MAX_NAME or not plain_text(name)):
        raise InvalidArgumentError("name", name, f"must be a str of at most {MAX_NAME} characters (valid UTF-8, without NUL)")
    if type(auto) is not bool:
        raise InvalidArgumentError("auto", auto, "must be a bool")
    if expected_version is not None and (type(expected_version) is not int or expected_version < 0):
        raise InvalidArgumentError("expected_version", expected_version, "must be a non-negative int")
    if checkpoint_id is not None and (
        type(checkpoint_id) is not str or not checkpoint_id or len(checkpoint_id) > MAX_NAME or not plain_text(checkpoint_id)
    ):
        raise InvalidArgumentError(
            "checkpoint_id", checkpoint_id, f"must be a non-empty str of at most {MAX_NAME} characters (valid UTF-8, without NUL)"
        )
