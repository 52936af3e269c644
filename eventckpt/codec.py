"""Values <-> JSON text.

Plain JSON values are stored as themselves, so the file stays readable with sqlite3. Other types are
stored as single-key objects whose key starts with "$" ("tagged forms"): `{"$tuple": [...]}`,
`{"$datetime": "..."}`, ... A dict that is not plain (non-str keys, or a key starting with "$") is stored
as `{"$dict": [[key, value], ...]}`, so a tag can never be confused with user data.

Stored data never chooses code: enums, dataclasses and attrs classes are stored with their qualified
name, and decoding maps that name only onto classes this codec was given by `types=`, or whose instances
a codec of this process encoded. An unknown name decodes to plain data (the enum's value, the object's
fields as a dict), or, for a codec made with `unknown_types="keep"` (the CLI and the viewer, which never
have the program's classes), to an `Unregistered` that keeps the class name and encodes back to the very
tagged form it was read from; nothing is ever imported. Typed restore (`as_type=`) structures with the project's
cattrs converter into the type the caller passes.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import math
import threading
import types
import typing
import uuid
from collections.abc import Callable, Iterable
from functools import lru_cache
from operator import attrgetter
from decimal import Decimal
from typing import Any

import attrs
import cattrs
import cattrs.gen
import orjson
from cattrs.disambiguators import create_default_dis_func
from cattrs.preconf.orjson import make_converter as _make_orjson_converter

from .errors import CorruptStoreError, SerializationError
from .gcpause import quiet_gc

MAX_DEPTH = 100
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1
_TAG_MARK = '{"$'  # cannot occur inside a JSON string (quotes there are escaped), so absence = no tags

JSON_SCALARS = (str, int, float, bool, type(None))
_NOT_PLAIN: Any = object()
UNKNOWN_TYPES = ("plain", "keep")  # what an enum or object of a class the codec does not know decodes to


class PlainData:
    """A dict or list subclass the codec stores as its plain base type: the nodes of a tracked state (any
    other subclass of a builtin type is refused, since it would not come back as itself)."""

    __slots__ = ()


class _Unencodable(Exception):
    """Internal: carries the path (built while unwinding) and the reason to SerializationError."""

    def __init__(self, reason: str, type_name: str | None) -> None:
        self.reason = reason
        self.type_name = type_name
        self.path: list[Any] = []


def type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _is_object_type(cls: type) -> bool:
    return dataclasses.is_dataclass(cls) or attrs.has(cls)


class _SavedClasses:
    """The enum and object classes this process has encoded, by qualified name (README: a stored enum or
    object decodes into its class when you named it, or by saving an instance in this process). One per
    process, so a second Store on a file, or one opened again, decodes what this process saved as it was
    saved. It only ever holds classes the program itself handed to a codec, never a name read from data;
    for a name defined again (a module reloaded, a notebook cell run again) the newest class is kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, type] = {}

    def get(self, name: str) -> type | None:
        return self._by_name.get(name)

    def remember(self, name: str, cls: type) -> None:
        if self._by_name.get(name) is not cls:  # the common case (known already) takes no lock
            with self._lock:
                self._by_name[name] = cls


_SAVED_IN_THIS_PROCESS = _SavedClasses()
_text_enums = False  # see text_enums_known


def text_enums_known() -> bool:
    """Whether a codec of this process was given or has encoded a str enum class (`class Role(str, Enum)`).
    A value a codec decodes or copies holds enums of such classes only, so until then none of its items
    equal to a str is anything but a str: ops compares the stored side's text without looking at types."""
    return _text_enums


def _note_class(cls: type) -> None:
    global _text_enums
    if not _text_enums and issubclass(cls, str):
        _text_enums = True  # for good: classes stay in the registries


class Codec:
    """Encodes and decodes values for one store. Holds the store's own class registry (`types=` and the
    classes it encoded, where two classes of one name clash), over the process's memory of saved classes."""

    def __init__(self, types: Iterable[type] = (), *, allow_nan: bool = False, unknown_types: str = "plain") -> None:
        if unknown_types not in UNKNOWN_TYPES:
            raise ValueError(f"unknown_types must be one of {UNKNOWN_TYPES}, not {unknown_types!r}")
        self.allow_nan = allow_nan
        self.keep_unknown = unknown_types == "keep"
        self._classes: dict[str, type] = {}
        self._converter: cattrs.Converter | None = None
        # A subclass that decodes tags its own way (StoredCodec keeps tuples as stored) must see every tag.
        self._plain_tuples = type(self)._from_tag is Codec._from_tag
        for cls in types:
            self.register(cls)

    @property
    def converter(self) -> cattrs.Converter:
        """The cattrs converter for typed restore, built on first use (it costs about half a
        millisecond, and most codecs never structure anything)."""
        if self._converter is None:
            self._converter = make_converter()
        return self._converter

    # -- registry ---------------------------------------------------------------------------------

    def register(self, cls: type) -> None:
        """Allow stored data naming `cls` to decode into it (it must be an enum, dataclass or attrs class)."""
        if not isinstance(cls, type) or not (issubclass(cls, enum.Enum) or _is_object_type(cls)):
            raise SerializationError((), f"only enums, dataclasses and attrs classes can be registered, not {cls!r}")
        name = type_name(cls)
        known = self._classes.get(name)
        if known is not None and known is not cls:
            raise SerializationError((), f"two different classes are named {name}", name)
        self._classes[name] = cls
        _note_class(cls)

    # -- encoding ---------------------------------------------------------------------------------

    def encode(self, value: Any) -> bytes:
        """JSON bytes of `value` (UTF-8); SerializationError naming the path when it cannot be stored."""
        try:
            if _plain(value, 0):
                return orjson.dumps(value)
            return orjson.dumps(self._jsonable(value, 0))
        except _Unencodable as exc:
            raise SerializationError(tuple(reversed(exc.path)), exc.reason, exc.type_name) from None
        except (TypeError, orjson.JSONEncodeError) as exc:  # e.g. a lone surrogate in a string
            raise SerializationError((), str(exc)) from None

    def encode_text(self, value: Any) -> str:
        return self.encode(value).decode()

    def encode_copy(self, value: Any) -> tuple[bytes, Any]:
        """The JSON bytes of `value` and an independent copy of it.

        The copy's dicts and lists are new; its str, int, float, bool and None leaves are the caller's own
        (immutable) objects. Sharing them is what keeps a later `save()` of the same objects fast: the
        head's copy and the caller's value then compare by identity leaf by leaf, at C speed, instead of
        comparing every string's characters.
        """
        copy = value if type(value) is str else self._plain_copy(value, 0)  # text: the commonest value
        if copy is not _NOT_PLAIN:
            try:
                return orjson.dumps(value), copy
            except orjson.JSONEncodeError as exc:  # a lone surrogate in a str
                raise SerializationError((), str(exc), "str") from None
        raw = self.encode(value)
        return raw, self.decode(raw)

    def _plain_copy(self, v: Any, depth: int) -> Any:
        """A copy of `v` sharing its scalars when `v` is plain JSON data (see `_plain`), else _NOT_PLAIN."""
        t = type(v)
        if t is dict:
            for k in v:
                if type(k) is not str or k[:1] == "$":
                    return _NOT_PLAIN
            out = dict(v)
            pairs: Iterable[tuple[Any, Any]] = v.items()
        elif t is list:
            out = v[:]
            pairs = enumerate(v)
        else:
            plain = t is str or t is bool or v is None or (t is int and _INT_MIN <= v <= _INT_MAX) or (
                t is float and math.isfinite(v))
            return v if plain else _NOT_PLAIN
        if depth >= MAX_DEPTH:
            return _NOT_PLAIN
        for key, item in pairs:  # scalars inline, as in _plain
            ti = type(item)
            if ti is str or ti is bool or item is None:
                continue
            if ti is int:
                if _INT_MIN <= item <= _INT_MAX:
                    continue
                return _NOT_PLAIN
            if ti is float:
                if math.isfinite(item):
                    continue
                return _NOT_PLAIN
            inner = self._plain_copy(item, depth + 1)
            if inner is _NOT_PLAIN:
                return _NOT_PLAIN
            out[key] = inner
        return out

    def _jsonable(self, v: Any, depth: int) -> Any:
        """`v` as plain JSON data; returns `v` itself when it already is (no copy on the hot path)."""
        t = type(v)
        if t is str or t is bool or v is None:
            return v
        if t is int:
            return v if _INT_MIN <= v <= _INT_MAX else {"$bigint": str(v)}
        if t is float:
            if math.isfinite(v):
                return v
            if self.allow_nan:
                return {"$float": repr(v)}
            raise _Unencodable(f"{v!r} is not a finite number (open the store with allow_nan=True)", "float")
        if depth >= MAX_DEPTH:
            raise _Unencodable(f"nested deeper than {MAX_DEPTH} levels (or a reference cycle)", t.__name__)
        depth += 1
        if t is dict:
            return self._dict(v, depth)
        if t is list:
            out = None
            for i, item in enumerate(v):
                try:
                    enc = self._jsonable(item, depth)
                except _Unencodable as exc:
                    exc.path.append(i)
                    raise
                if out is not None:
                    out.append(enc)
                elif enc is not item:
                    out = v[:i]
                    out.append(enc)
            return v if out is None else out
        if t is tuple:
            return {"$tuple": self._items(v, depth)}
        if t is set or t is frozenset:
            items = self._items(v, depth)
            items.sort(key=orjson.dumps)  # a set has no order; a canonical one keeps diffs quiet
            return {"$set" if t is set else "$frozenset": items}
        return self._other(v, t, depth)

    def _items(self, v: Iterable[Any], depth: int) -> list[Any]:
        out = []
        for i, item in enumerate(v):
            try:
                out.append(self._jsonable(item, depth))
            except _Unencodable as exc:
                exc.path.append(i)
                raise
        return out

    def _dict(self, v: dict[Any, Any], depth: int) -> Any:
        if all(type(k) is str and not k.startswith("$") for k in v):
            out = None
            for k, item in v.items():
                try:
                    enc = self._jsonable(item, depth)
                except _Unencodable as exc:
                    exc.path.append(k)
                    raise
                if out is not None:
                    out[k] = enc
                elif enc is not item:
                    out = {}
                    for k2, item2 in v.items():
                        if k2 == k:
                            break
                        out[k2] = item2
                    out[k] = enc
            return v if out is None else out
        pairs = []
        for k, item in v.items():
            try:
                pairs.append([self._jsonable(k, depth), self._jsonable(item, depth)])
            except _Unencodable as exc:
                exc.path.append(k)
                raise
        return {"$dict": pairs}

    def _other(self, v: Any, t: type, depth: int) -> Any:
        if t is Unregistered:  # before the object types: it is a dataclass itself, but stands for its class
            return self._unregistered(v, depth)
        if isinstance(v, enum.Enum):
            self._remember(t)
            return self._tagged_enum(type_name(t), v.value, depth)
        if t is dt.datetime:
            return {"$datetime": stored_clock(v)}
        if t is dt.date:
            return {"$date": v.isoformat()}
        if t is dt.time:
            return {"$time": stored_clock(v)}
        if t is dt.timedelta:
            return {"$timedelta": [v.days, v.seconds, v.microseconds]}
        if t is uuid.UUID:
            return {"$uuid": str(v)}
        if t is Decimal:
            if v.is_snan():  # it raises on ==, so no later save or diff could compare it
                raise _Unencodable(f"{v!r} is a signaling NaN (store Decimal('NaN'))", "decimal.Decimal")
            return {"$decimal": str(v)}
        if t is bytes:
            return {"$bytes": base64.b64encode(v).decode()}
        if t is bytearray:
            return {"$bytearray": base64.b64encode(v).decode()}
        if _is_object_type(t):
            self._remember(t)
            return self._tagged_object(type_name(t), ((name, getattr(v, name)) for name in _field_names(t)), depth)
        if isinstance(v, PlainData):  # a tracked state's dicts and lists: plain data to any other save
            return self._jsonable(dict(v) if isinstance(v, dict) else list(v), depth - 1)
        # Other subclasses of the builtin types (a namedtuple, OrderedDict, defaultdict, Counter, a str or
        # int subclass) are refused, not stored as their base type: they would come back without their class
        # (and a defaultdict without its factory), and a value comes back exactly or is not stored.
        for base in (dict, list, tuple, set, frozenset, str, int, float, bytes):
            if isinstance(v, base):
                raise _Unencodable(f"values of type {t.__qualname__} (a subclass of {base.__name__}) cannot be "
                                   f"stored: they would come back as a plain {base.__name__}; store "
                                   f"{base.__name__}(value) instead", type_name(t))
        raise _Unencodable(f"values of type {t.__qualname__} cannot be stored", type_name(t))

    def _unregistered(self, v: Unregistered, depth: int) -> Any:
        """The tagged form an Unregistered was decoded from (no class is remembered: there is none)."""
        if v.kind == "enum":
            return self._tagged_enum(v.name, v.value, depth)
        return self._tagged_object(v.name, v.value.items(), depth)

    def _tagged_enum(self, name: str, value: Any, depth: int) -> Any:
        try:
            return {"$enum": [name, self._jsonable(value, depth)]}
        except _Unencodable as exc:
            exc.path.append("value")
            raise

    def _tagged_object(self, name: str, fields: Iterable[tuple[str, Any]], depth: int) -> Any:
        out = {}
        for field, item in fields:
            try:
                out[field] = self._jsonable(item, depth)
            except _Unencodable as exc:
                exc.path.append(field)
                raise
        return {"$object": [name, out]}

    def _remember(self, cls: type) -> None:
        name = type_name(cls)
        known = self._classes.get(name)
        if known is None:
            self._classes[name] = cls
            _note_class(cls)
        elif known is not cls:
            raise _Unencodable(f"two different classes are named {name}", name)
        _SAVED_IN_THIS_PROCESS.remember(name, cls)

    def _class(self, name: str) -> type | None:
        """The class stored data naming `name` decodes into: this store's, else one saved in this process."""
        return self._classes.get(name) or _SAVED_IN_THIS_PROCESS.get(name)

    # -- decoding ---------------------------------------------------------------------------------

    def decode(self, text: str | bytes, *, untag: bool = True) -> Any:
        """The value stored as JSON `text` (`untag=False`: its tagged forms left as the JSON has them)."""
        try:
            data = orjson.loads(text)
        except orjson.JSONDecodeError as exc:  # only the store's own JSON is decoded: the file is damaged
            raise CorruptStoreError(f"stored JSON is damaged: {exc}", code="corrupt") from None
        return self.untag(data) if untag and _has_tags(text) else data

    def decode_many(self, texts: list[str]) -> list[Any]:
        """Decode many stored JSON texts with one parser call (the replay hot path). A text may also be
        a run of array items (an extend's value without its brackets): its items come back in place."""
        if not texts:
            return []
        joined = "[" + ",".join(texts) + "]"
        with quiet_gc():
            data = self.decode(joined, untag=False)
            if not _has_tags(joined):
                return data
            if len(data) != len(texts):  # some text was a run of items: no text-to-item pairing
                return self.untag(data)
            return [self._untag_stored(text, item) if _has_tags(text) else item for text, item in zip(texts, data)]

    def _untag_stored(self, text: str, item: Any) -> Any:
        """`item` (decoded from `text`) untagged. A value whose one tagged form is itself, a tuple (as the
        LangGraph saver stores each msgpack extension, every message of a conversation), needs no walk
        below it: its text holds no other object whose first key starts with "$" (a quote inside a JSON
        string is escaped, so the marker cannot hide in one)."""
        if (self._plain_tuples and type(item) is dict and len(item) == 1 and type(item.get("$tuple")) is list
                and text.count(_TAG_MARK) == 1):
            return tuple(item["$tuple"])
        return self.untag(item)

    def untag(self, data: Any) -> Any:
        """Turn tagged forms inside decoded JSON data back into Python values."""
        t = type(data)
        if t is list:
            return [self.untag(x) for x in data]
        if t is not dict:
            return data
        if len(data) == 1:
            (key,) = data
            if key.startswith("$"):
                return self._from_tag(key, data[key])
        return {k: self.untag(x) for k, x in data.items()}

    def _from_tag(self, tag: str, body: Any) -> Any:
        try:
            if tag == "$tuple":
                return tuple(self.untag(x) for x in body)
            if tag == "$set":
                return {self.untag(x) for x in body}
            if tag == "$frozenset":
                return frozenset(self.untag(x) for x in body)
            if tag == "$dict":
                return {self.untag(k): self.untag(v) for k, v in body}
            if tag == "$datetime":
                return dt.datetime.fromisoformat(body) if type(body) is str else _from_clock(dt.datetime, body)
            if tag == "$date":
                return dt.date.fromisoformat(body)
            if tag == "$time":
                return dt.time.fromisoformat(body) if type(body) is str else _from_clock(dt.time, body)
            if tag == "$timedelta":
                return dt.timedelta(days=body[0], seconds=body[1], microseconds=body[2])
            if tag == "$uuid":
                return uuid.UUID(body)
            if tag == "$decimal":
                return Decimal(body)
            if tag == "$bytes":
                return base64.b64decode(body, validate=True)
            if tag == "$bytearray":
                return bytearray(base64.b64decode(body, validate=True))
            if tag == "$bigint":
                return int(body)
            if tag == "$float":
                return float(body)
            if tag == "$enum":
                name, raw = body
                value = self.untag(raw)
                cls = self._class(name)
                if cls is not None:
                    return cls(value)
                return Unregistered("enum", name, value) if self.keep_unknown else value
            if tag == "$object":
                name, fields = body
                fields = {k: self.untag(v) for k, v in fields.items()}
                cls = self._class(name)
                if cls is not None:
                    return _build(cls, fields)
                return Unregistered("object", name, fields) if self.keep_unknown else fields
        except (TypeError, ValueError, KeyError, LookupError, ArithmeticError) as exc:
            raise SerializationError((tag,), f"stored {tag} value is damaged: {exc}") from None
        # An unknown tag is data, never code: keep it as the object it is.
        return {tag: self.untag(body)}

    # -- typed state ------------------------------------------------------------------------------

    def structure(self, data: Any, as_type: Any) -> Any:
        """Structure decoded data into the caller's type (dataclass, attrs class, or any cattrs type)."""
        try:
            return self.converter.structure(data, as_type)
        except Exception as exc:  # cattrs raises ClassValidationError/TypeError/KeyError/...
            detail = cattrs.transform_error(exc) if isinstance(exc, cattrs.BaseValidationError) else [str(exc)]
            raise SerializationError((), f"cannot structure the state as {as_type!r}: {'; '.join(detail)}") from None

    def copy(self, value: Any) -> Any:
        """An independent deep copy, exact for every storable type."""
        return self.decode(self.encode(value))

    def is_plain(self, value: Any) -> bool:
        """Whether `value` is plain JSON data stored exactly as itself (str-keyed dicts without "$" keys,
        lists, str, finite floats, 64-bit ints, bools, None), with no tagged form anywhere inside."""
        return _plain(value, 0)


@dataclasses.dataclass(frozen=True, repr=False)
class Unregistered:
    """A stored enum member or object whose class the codec does not know (a codec made with
    `unknown_types="keep"`): the class's qualified name and the member's value, or the object's fields as a
    dict. It encodes back to exactly the tagged form it was read from, and is equal only to an Unregistered
    of the same kind, name and value: Color.RED stored where the int 1 was, or a Pt where a dict or a Qt
    with the same fields was, is a change. Hashable (as an enum member or a frozen object was) by its
    name and the hashable parts of its value, so it can be a set member or a dict key."""

    kind: str  # "enum" or "object"
    name: str  # the class's qualified name, as stored
    value: Any

    def __post_init__(self) -> None:
        if self.kind not in ("enum", "object") or type(self.name) is not str:
            raise ValueError(f"an Unregistered is an 'enum' or 'object' with a str name, not {self.kind!r} {self.name!r}")
        if self.kind == "object" and not (type(self.value) is dict and all(type(k) is str for k in self.value)):
            raise ValueError("an unregistered object's value is its fields: a dict with str keys")

    def __repr__(self) -> str:
        if self.kind == "enum":
            return f"{self.name}({self.value!r})"
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.value.items())})"

    def __hash__(self) -> int:
        if self.kind == "enum":
            return hash((self.kind, self.name, _loose_hash(self.value)))
        return hash((self.kind, self.name, frozenset((k, _loose_hash(v)) for k, v in self.value.items())))


def _loose_hash(value: Any) -> int:
    """A hash of `value` that equal values share, also when it is unhashable: a set or bytearray hashes as
    the frozenset or bytes it is == to, anything else unhashable (a dict, a list) as one constant."""
    if type(value) is set:
        value = frozenset(value)
    elif type(value) is bytearray:
        value = bytes(value)
    try:
        return hash(value)
    except TypeError:
        return 0


def plain_json(value: Any) -> bool:
    """Whether `value` is plain JSON data stored exactly as itself (see `Codec.is_plain`): what JSON text
    shows as it is, where a tuple, a datetime or a UUID would look like a list or a string."""
    return _plain(value, 0)


def _plain(v: Any, depth: int) -> bool:
    """Whether `v` is already plain JSON data that orjson writes exactly (the common, fast case)."""
    t = type(v)
    if t is dict:
        for k in v:
            if type(k) is not str or k[:1] == "$":
                return False
        items: Iterable[Any] = v.values()
    elif t is list:
        items = v
    else:
        return t is str or t is bool or v is None or (t is int and _INT_MIN <= v <= _INT_MAX) or (
            t is float and math.isfinite(v))
    if depth >= MAX_DEPTH:
        return False
    for item in items:  # scalars inline: this loop runs for every saved message
        ti = type(item)
        if ti is str or ti is bool or item is None:
            continue
        if ti is int:
            if _INT_MIN <= item <= _INT_MAX:
                continue
            return False
        if ti is float:
            if math.isfinite(item):
                continue
            return False
        if not _plain(item, depth + 1):
            return False
    return True


class StoredCodec(Codec):
    """A codec for moving what a store holds (import, copy, retention's rewritten versions and repaired
    snapshots), so that what it writes is exactly what was stored, whatever classes this process knows.

    A value decodes as far as events can reach into it and no further: dicts (also those stored as
    "$dict" pairs, which events may set keys of), lists, and numbers ("$bigint" and "$float" too, which an
    incr adds to). Every other tagged form (tuples, sets, enums, objects, dates, bytes, ...) stays its
    stored JSON, as a `Stored` value that encodes back to exactly that: an enum whose class this process
    does not know would otherwise decode to its plain value and be written back as such. NaN and
    infinities are allowed: it only writes what was stored."""

    def __init__(self) -> None:
        super().__init__(allow_nan=True)

    def _from_tag(self, tag: str, body: Any) -> Any:
        if tag in _STORED_AS_IS:
            return Stored({tag: body})
        return super()._from_tag(tag, body)

    def _other(self, v: Any, t: type, depth: int) -> Any:
        if t is Stored:
            return v.data
        return super()._other(v, t, depth)


_STORED_AS_IS = frozenset(("$tuple", "$set", "$frozenset", "$datetime", "$date", "$time", "$timedelta", "$uuid",
                           "$decimal", "$bytes", "$bytearray", "$enum", "$object"))


class Stored:
    """A tagged value kept as its stored JSON data (see StoredCodec); equal and hashed by that JSON, so it
    can be a dict key as the value it stands for was."""

    __slots__ = ("data", "_text")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self._text = orjson.dumps(data)

    def __eq__(self, other: object) -> bool:
        return type(other) is Stored and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __repr__(self) -> str:
        return f"Stored({self._text.decode()})"


def _has_tags(text: str | bytes) -> bool:
    # A one-character search is a memchr, about 70x faster on long texts than the three-character one
    # (whose first character, '{', starts every object); most texts hold no "$" at all.
    if isinstance(text, str):
        return "$" in text and _TAG_MARK in text
    return b"$" in text and b'{"$' in text


def _field_names(cls: type) -> list[str]:
    if dataclasses.is_dataclass(cls):
        return [f.name for f in dataclasses.fields(cls)]
    return [a.name for a in attrs.fields(cls)]


def stored_clock(v: dt.datetime | dt.time) -> Any:
    """A datetime's or time's stored form: its ISO text alone (with its offset, if any), or with the name of
    its zoneinfo zone, `[text, zone]`, and with its fold when that is 1, `[text, zone or None, 1]`.

    The text alone loses both: a ZoneInfo is more than its offset (the zone's rules go on after it), and
    `fold` picks which of a repeated wall clock hour's two instants is meant (a naive one when it is read
    as local time, too); a time's ISO text has no offset at all for a ZoneInfo (it has no date to find one).
    Values without either keep the plain text older versions wrote."""
    key = zone_name(v.tzinfo)
    if v.fold:
        return [v.isoformat(), key, 1]
    return [v.isoformat(), key] if key else v.isoformat()


def _from_clock(cls: type[Any], body: list[Any]) -> Any:
    """The datetime or time stored as `[text, zone]` or `[text, zone or None, fold]` (see `stored_clock`)."""
    text, key, *rest = body
    value = cls.fromisoformat(text)
    if key is None:
        return value.replace(fold=rest[0]) if rest else value
    import zoneinfo

    local = value.replace(tzinfo=zoneinfo.ZoneInfo(key))
    if rest:
        return local.replace(fold=rest[0])
    # Written before the fold was kept: the offset in the text still tells which of the repeated hour's
    # two instants it was (fold 0 is the earlier one).
    if value.utcoffset() is not None and local.utcoffset() != value.utcoffset():
        later = local.replace(fold=1)
        if later.utcoffset() == value.utcoffset():
            return later
    return local


def zone_name(tz: dt.tzinfo | None) -> str | None:
    """The name of a datetime's zone the codec stores beside its offset (a zoneinfo.ZoneInfo keeps its zone,
    not only the offset), or None."""
    return getattr(tz, "key", None)


@lru_cache(maxsize=256)
def stored_fields(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """For a dataclass or attrs class, a C-speed getter of the tuple of field values an instance is stored
    by (every field, in order: also those its `==` leaves out); None for any other class."""
    if not _is_object_type(cls):
        return None
    names = _field_names(cls)
    if len(names) >= 2:
        return attrgetter(*names)
    get = attrgetter(*names) if names else None
    return (lambda obj: (get(obj),)) if get else (lambda obj: ())


def _build(cls: type, fields: dict[str, Any]) -> Any:
    """Rebuild a registered dataclass/attrs instance from its stored fields."""
    if issubclass(cls, enum.Enum):
        raise TypeError(f"{cls!r} is an enum, not an object type")
    if dataclasses.is_dataclass(cls):
        init = {f.name: fields[f.name] for f in dataclasses.fields(cls) if f.init and f.name in fields}
        late = {f.name: fields[f.name] for f in dataclasses.fields(cls) if not f.init and f.name in fields}
    else:
        init = {a.alias: fields[a.name] for a in attrs.fields(cls) if a.init and a.name in fields}
        late = {a.name: fields[a.name] for a in attrs.fields(cls) if not a.init and a.name in fields}
    obj = cls(**init)
    for name, value in late.items():
        object.__setattr__(obj, name, value)
    return obj


def make_converter() -> cattrs.Converter:
    """The project's cattrs converter: preconf orjson, tolerant of values the codec already decoded."""
    conv = _make_orjson_converter()
    for cls, parse in (
        (dt.datetime, dt.datetime.fromisoformat),
        (dt.date, dt.date.fromisoformat),
        (uuid.UUID, uuid.UUID),
        (Decimal, Decimal),
        (bytes, base64.b85decode),
    ):
        conv.register_structure_hook(cls, _passthrough(cls, parse))

    def object_hook_factory(cls: type) -> Any:
        generated = cattrs.gen.make_dict_structure_fn(cls, conv)
        late = _late_fields(cls)

        def hook(value: Any, _type: Any) -> Any:
            if isinstance(value, cls):
                return value
            obj = generated(value, _type)
            # init=False fields get what was saved, not what a default or __post_init__ computes. Not by
            # cattrs' own _cattrs_include_init_false: it uses setattr, which a frozen class refuses, and then
            # drops the error.
            for name, field_type in late:
                if name in value:
                    object.__setattr__(obj, name, conv.structure(value[name], field_type))
            return obj

        return hook

    def union_hook_factory(union: Any) -> Any:
        # A class saved in this process decodes into an instance already; cattrs' own union hook only
        # tells the members apart by the keys of a dict. A value that is an instance of a member is itself.
        members = tuple(m for m in union.__args__ if m is not type(None))
        pick = create_default_dis_func(conv, *members)

        def hook(value: Any, _type: Any) -> Any:
            if value is None and len(members) < len(union.__args__):
                return None
            if type(value) in members:
                return value
            return conv.structure(value, pick(value))

        return hook

    conv.register_structure_hook_factory(_is_object_type, object_hook_factory)
    conv.register_structure_hook_factory(_object_union, union_hook_factory)
    return conv


def _late_fields(cls: type) -> list[tuple[str, Any]]:
    """The (name, type) of each init=False field of a dataclass or attrs class."""
    if dataclasses.is_dataclass(cls):
        names = [f.name for f in dataclasses.fields(cls) if not f.init]
    else:
        names = [a.name for a in attrs.fields(cls) if not a.init]
    if not names:
        return []
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # an annotation that names what cannot be found from its module: take the value as it is
        hints = {}
    return [(name, hints.get(name, Any)) for name in names]


def _object_union(t: Any) -> bool:
    """A Union of dataclasses and attrs classes (and maybe None), other than an Optional of one class."""
    if typing.get_origin(t) not in (typing.Union, types.UnionType):
        return False
    members = [m for m in t.__args__ if m is not type(None)]
    return len(members) > 1 and all(isinstance(m, type) and _is_object_type(m) for m in members)


def _passthrough(cls: type, parse: Any) -> Any:
    def hook(value: Any, _type: Any) -> Any:
        return value if isinstance(value, cls) else parse(value)

    return hook
