"""A LangGraph checkpoint's bookkeeping as its version's metadata (the "record").

The record is the JSON object `{"metadata": LangGraph's metadata, "checkpoint": the rest of LangGraph's
checkpoint (v, channel_versions, versions_seen, updated_channels, ...)}`, and only when needed:

- "serde": the encoding of "checkpoint" when it is not plain JSON (see values.py);
- "parent": the parent checkpoint id the put named when the thread does not hold that checkpoint
  (otherwise the parent is the previous version of the lineage);
- "absent": the derivable fields (below) that the checkpoint did not have at all.

Two fields that every step writes are left out when they can be derived exactly, which keeps the record
of a step near 300 bytes: `ts`, when it is the version's `created_at` (LangGraph writes
`datetime.now(timezone.utc).isoformat()`: the same instant with "+00:00" for eventckpt's "Z"), and
`updated_channels`, when it is the sorted list of the channels holding the highest channel version (as
LangGraph sets them: every channel a step writes gets that step's new version). Records written before
these rules keep both fields and read as they are.
"""

from __future__ import annotations

import re
from typing import Any

from .values import Values

TS, UPDATED = "ts", "updated_channels"
_LANGGRAPH_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00")


def build(checkpoint: dict[str, Any], metadata: dict[str, Any], values: Values,
          parent: str | None = None) -> tuple[dict[str, Any], str | None]:
    """(the record, the created_at the version must have for `ts` to be left out, or None)."""
    fields = {k: v for k, v in checkpoint.items() if k not in ("id", "channel_values")}
    stored, encoding = values.encode(fields, "checkpoint")
    created_at = None
    record: dict[str, Any] = {"metadata": metadata, "checkpoint": stored}
    if encoding:
        record["serde"] = encoding
    else:
        absent = [name for name in (TS, UPDATED) if name not in fields]
        if absent:
            record["absent"] = absent
        ts = fields.get(TS)
        if type(ts) is str and _LANGGRAPH_TS.fullmatch(ts):
            created_at = ts[:-6] + "Z"
            del stored[TS]
        updated = fields.get(UPDATED)
        if type(updated) is list and updated and updated == _updated(fields.get("channel_versions")):
            del stored[UPDATED]
    if parent is not None:
        record["parent"] = parent
    return record, created_at


def parse(record: dict[str, Any], created_at: str, values: Values) -> tuple[dict[str, Any], dict[str, Any]]:
    """(LangGraph's checkpoint fields but id and channel_values, LangGraph's metadata) of a record."""
    fields = values.decode(record.get("checkpoint", {}), record.get("serde"))
    if "serde" not in record and type(fields) is dict:
        absent = record.get("absent", ())
        if TS not in fields and TS not in absent:
            fields[TS] = created_at[:-1] + "+00:00"
        if UPDATED not in fields and UPDATED not in absent:
            fields[UPDATED] = _updated(fields.get("channel_versions"))
    return fields, record.get("metadata", {})


def _updated(versions: Any) -> list[str] | None:
    """The channels holding the highest version, sorted (None when versions cannot be compared)."""
    if type(versions) is not dict or not versions:
        return None
    try:
        top = max(versions.values())
    except TypeError:  # mixed kinds of versions
        return None
    return sorted(name for name, version in versions.items() if version == top)


def explicit(record: dict[str, Any], created_at: str) -> dict[str, Any]:
    """The record with `ts` written out (for a copy whose version gets another created_at)."""
    stored = record.get("checkpoint")
    if "serde" in record or type(stored) is not dict or TS in stored or TS in record.get("absent", ()):
        return record
    return {**record, "checkpoint": {**stored, TS: created_at[:-1] + "+00:00"}}
