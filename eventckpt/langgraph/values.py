"""LangGraph values <-> what eventckpt stores: plain JSON as itself, anything else through the serde.

A value that is plain JSON (eventckpt's `Codec.is_plain`) is stored as itself, so its changes are
eventckpt events (a list that grew is one append). Any other value goes through the saver's serde
exactly as LangGraph's own savers do (`dumps_typed` / `loads_typed`, with the serde's allowlist and
strict mode). Pickle is never written nor read, even by a serde built with pickle_fallback=True.

When the serde writes msgpack, the msgpack is stored as JSON readable in the file: maps, arrays and
scalars as themselves, `bin` as bytes and each msgpack extension as the pair `(code, payload)`, which
eventckpt stores as `{"$tuple": [code, payload]}` (msgpack arrays always decode to lists, so a tuple
can only be an extension). A messages list is thus a JSON array, one item per message, and grows by
one append per step. Reading packs the tree back into the same msgpack bytes and hands them to
`serde.loads_typed`, so the serde's allowlist decides what is built.

The encoding of a value is `None` (plain JSON) or `[serde type, form]`: form "tree" is the msgpack as
JSON, form "bytes" the serialized bytes as they are (a serde that does not write msgpack, e.g. an
encrypted one, or msgpack that does not round-trip through the tree or holds NaN).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import ormsgpack

from ..codec import Codec
from ..errors import CorruptStoreError, SerializationError

TREE, BYTES = "tree", "bytes"
_PACK = ormsgpack.OPT_NON_STR_KEYS | ormsgpack.OPT_PASSTHROUGH_TUPLE
# A msgpack float64/float32 holding NaN or an infinity (or bytes that look like one): JSON has no such
# number, so such values keep their bytes.
_NON_FINITE = re.compile(rb"\xcb[\x7f\xff][\xf0-\xff]|\xca[\x7f\xff][\x80-\xff]")
_NOT_PACKABLE = (ormsgpack.MsgpackDecodeError, ormsgpack.MsgpackEncodeError, TypeError, ValueError)


TREE_ENCODING = ["msgpack", TREE]


@dataclass(frozen=True, slots=True, eq=False)
class PackedPrefix:
    """Stands in, in a state being restored, for each of the first `count` items of a msgpack list whose
    bytes a later version's cached list already holds (see heads.Blob.marks): `body` is those items'
    msgpack, back to back. `Values.decode` hands them to the serde as they are, so an older checkpoint's
    messages are neither read from the journal nor packed again. Only get_tuple of one older checkpoint
    makes them; they compare equal to nothing but themselves."""

    body: bytes
    count: int


class PrefixUnusable(Exception):
    """A state holds PackedPrefix items where they cannot be decoded as a prefix (the caller restores the
    checkpoint without them)."""


@dataclass(frozen=True, slots=True)
class Encoded:
    """A value as the state holds it, its encoding, and (unless plain) the serde's bytes of it."""

    stored: Any
    encoding: list[str] | None
    data: bytes | None = None


class Values:
    """Encodes and decodes values with one saver's serde and one store's codec."""

    def __init__(self, serde: Any, codec: Codec) -> None:
        self.serde = serde
        self.codec = codec

    def encode(self, value: Any, where: str) -> tuple[Any, list[str] | None]:
        """(what to store, its encoding); SerializationError naming `where` when the serde refuses."""
        encoded = self.encode_value(value, where)
        return encoded.stored, encoded.encoding

    def encode_value(self, value: Any, where: str) -> Encoded:
        """`value` encoded for the state, keeping the serde's bytes (the saver's head cache holds them)."""
        if self.codec.is_plain(value):
            return Encoded(value, None)
        try:
            type_, data = self.serde.dumps_typed(value)
        except Exception as exc:  # the serde raises TypeError, ormsgpack errors, ...
            raise SerializationError((where,), f"the saver's serde cannot serialize it: {exc}",
                                     type(value).__name__) from None
        if type_ == "pickle":  # a serde built with pickle_fallback=True: stored data must never choose code
            raise SerializationError((where,), "the saver's serde fell back to pickle, which eventckpt never stores",
                                     type(value).__name__)
        data = bytes(data)
        if type_ == "msgpack":
            tree = _tree(data)
            if tree is not None:
                return Encoded(tree, [type_, TREE], data)
        return Encoded(data, [type_, BYTES], data)

    def encode_items(self, items: list[Any], encoding: list[str] | None,
                     ) -> tuple[list[Any], bytes, list[int] | None] | None:
        """Items to append to a list stored with `encoding`: (their stored forms, their msgpack as it sits
        inside the whole list's: plain data packed by ormsgpack, anything else by the serde, and for the
        latter each item's bytes' length), or None when they cannot be stored that way (then the whole list
        is encoded again)."""
        if encoding is None:
            if not self.codec.is_plain(items):
                return None
            try:
                return items, packed_items(ormsgpack.packb(items)), None
            except (ormsgpack.MsgpackEncodeError, TypeError):  # a lone surrogate: the store refuses it too
                return None
        if encoding != TREE_ENCODING:
            return None
        try:
            type_, data = self.serde.dumps_typed(items)
        except Exception:  # the whole list's encoding will report it, naming the channel
            return None
        if type_ != "msgpack":
            return None
        data = bytes(data)
        found = _tree_items(data)
        if found is None or len(found[0]) != len(items):
            return None
        return found[0], packed_items(data), found[1]

    def decode(self, stored: Any, encoding: Any, items: dict[int, tuple[Any, Any]] | None = None) -> Any:
        """The value stored with `encoding`. With `items` (a cache shared by one listing), a msgpack
        array is decoded item by item and items already decoded are reused: states that share a
        message share its decoded object instead of decoding it once per checkpoint."""
        if type(stored) is list and stored and type(stored[0]) is PackedPrefix:
            return self._decode_prefixed(stored, encoding)
        if encoding is None:
            return stored
        try:
            type_, form = encoding
        except (TypeError, ValueError):
            raise CorruptStoreError(f"a LangGraph value has a damaged encoding: {encoding!r}") from None
        if type_ == "pickle":
            raise CorruptStoreError("a LangGraph value claims to be a pickle, which eventckpt never loads")
        if form == BYTES:
            if type(stored) is not bytes:
                raise CorruptStoreError(f"a LangGraph value stored as bytes is a {type(stored).__name__}")
            return self.serde.loads_typed((type_, stored))
        if form != TREE or type_ != "msgpack":
            raise CorruptStoreError(f"a LangGraph value has an unknown encoding: {encoding!r}")
        if items is not None and type(stored) is list:
            out = []
            for item in stored:
                hit = items.get(id(item))
                if hit is None or hit[0] is not item:
                    hit = items[id(item)] = (item, self.serde.loads_typed(("msgpack", _pack(item))))
                out.append(hit[1])
            return out
        return self.serde.loads_typed(("msgpack", _pack(stored)))

    def _decode_prefixed(self, stored: list[Any], encoding: Any) -> Any:
        """A msgpack list whose first items are PackedPrefix marks of one prefix (and the rest stored trees):
        its bytes are the prefix's, then the rest packed; PrefixUnusable when it is not that."""
        mark = stored[0]
        n = mark.count
        rest = stored[n:]
        if encoding != TREE_ENCODING or stored[:n].count(mark) != n or any(type(item) is PackedPrefix for item in rest):
            raise PrefixUnusable
        data = b"".join((array_header(len(stored)), mark.body, *map(_pack, rest)))
        return self.serde.loads_typed(("msgpack", data))


def array_header(count: int) -> bytes:
    """The msgpack header of an array of `count` items (fixarray, array 16 or array 32)."""
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def packed_items(data: bytes) -> bytes:
    """The items of a packed msgpack array, back to back (the array without its header)."""
    first = data[0]
    return data[1 if 0x90 <= first <= 0x9F else 3 if first == 0xDC else 5 :]


def pack(tree: Any) -> bytes:
    """The msgpack bytes of a stored tree (what `Values.decode` hands to the serde)."""
    return _pack(tree)


def _ext(code: int, data: bytes) -> tuple[int, Any]:
    return code, ormsgpack.unpackb(data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)


def _tree(data: bytes) -> Any:
    """The msgpack `data` as a JSON-storable tree, or None when the tree would not pack back into
    exactly these bytes or would hold a number JSON cannot (then the bytes are stored as they are)."""
    if _NON_FINITE.search(data):
        return None
    try:
        tree = ormsgpack.unpackb(data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS)
        return tree if _packb(tree) == data else None
    except _NOT_PACKABLE:
        return None


def _tree_items(data: bytes) -> tuple[list[Any], list[int]] | None:
    """`_tree` of a packed array, with the length of each item's bytes (for the head cache's item ends).
    The whole array is checked as `_tree` checks it: packed one by one, an item nests one level less, and
    ormsgpack's depth limit would then let through a tree that does not pack back as a whole."""
    tree = _tree(data)
    return (tree, [len(_packb(item)) for item in tree]) if type(tree) is list else None


def _pack_ext(obj: Any) -> ormsgpack.Ext:
    if type(obj) is tuple and len(obj) == 2 and type(obj[0]) is int:
        return ormsgpack.Ext(obj[0], _packb(obj[1]))
    raise TypeError(f"a stored msgpack tree holds a {type(obj).__name__}")


def _packb(tree: Any) -> bytes:
    return ormsgpack.packb(tree, default=_pack_ext, option=_PACK)


def _pack(tree: Any) -> bytes:
    """The msgpack bytes of a stored tree; CorruptStoreError when the file holds something else."""
    try:
        return _packb(tree)
    except (ormsgpack.MsgpackEncodeError, TypeError, ValueError) as exc:
        raise CorruptStoreError(f"a stored LangGraph msgpack tree is damaged: {exc}") from None

