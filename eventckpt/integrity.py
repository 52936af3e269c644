"""The checksum chain: each version's checksum covers its row, its events and its parent's checksum.

Like git's commit ids, altering, dropping or reordering any event or version changes every checksum
after it, so `verify` can tell a damaged or edited journal from an intact one. The hash runs over bytes
the save already produced, so it costs a few microseconds.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import orjson

DIGEST_SIZE = 16
ROOT = bytes(DIGEST_SIZE)  # the parent checksum of a lineage's first version
_PERSON = b"eventckpt.v1"


def version_checksum(
    parent: bytes,
    version: int,
    created_at: str,
    name: str | None,
    auto: int,
    metadata: str | None,
    usage: str | None,
    events: Iterable[tuple[str, str, bytes | str | None]],
) -> bytes:
    """The checksum of one version: `events` are its (op, path, value JSON) rows in seq order.

    JSON text and stored paths never hold raw control characters, so record (0x1e) and unit (0x1f)
    separators delimit the fields unambiguously; a missing value (delete) is an empty field.
    """
    parts = [parent, orjson.dumps([version, created_at, name, auto, metadata, usage])]
    for op, path, value in events:
        head = _FIELD_CACHE.get((op, path))
        if head is None:
            head = _FIELD_CACHE[(op, path)] = b"\x1e%s\x1f%s\x1f" % (op.encode(), path.encode())
            if len(_FIELD_CACHE) > 50_000:
                _FIELD_CACHE.clear()
        parts.append(head)
        if value is not None:
            parts.append(value.encode() if type(value) is str else value)
    hasher = _KEYED.copy()
    hasher.update(b"".join(parts))
    return hasher.digest()


_KEYED = hashlib.blake2b(digest_size=DIGEST_SIZE, person=_PERSON)  # copied per version: cheaper than setting it up
_FIELD_CACHE: dict[tuple[str, str], bytes] = {}
