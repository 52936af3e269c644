"""A caller's state as a dict of top-level keys: what save(), diff(live=) and the autosave helpers take."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import attrs

from .errors import InvalidArgumentError
from .mixin import Checkpointable, capture
from .paths import addressable


def state_dict(values: Any) -> dict[str, Any]:
    """The caller's state as a dict of top-level keys (a mapping, a dataclass/attrs instance's fields, or
    a Checkpointable's state dict)."""
    if isinstance(values, Checkpointable):
        state = capture(values)
    elif isinstance(values, Mapping):
        state = dict(values)
    elif dataclasses.is_dataclass(values) and not isinstance(values, type):
        state = {f.name: getattr(values, f.name) for f in dataclasses.fields(values)}
    elif attrs.has(type(values)):
        state = {a.name: getattr(values, a.name) for a in attrs.fields(type(values))}
    else:
        raise InvalidArgumentError(
            "values", values, "a state is a mapping of str keys (or a dataclass/attrs instance, or a Checkpointable)")
    for key in state:
        if type(key) is not str or not addressable(key):
            raise InvalidArgumentError(
                "values", values, f"top-level key {key!r} must be a str without quotes, backslashes, control characters or lone surrogates"
            )
    return state
