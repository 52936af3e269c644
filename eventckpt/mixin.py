"""Checkpointable: PyTorch-style `state_dict()` / `load_state_dict()` for agent objects, with schema
versions and migrations.

    class Agent(eventckpt.Checkpointable):
        def __init__(self):
            self.memory = []          # public attributes are captured
            self._client = None       # `_`-prefixed ones are not

    stream.save(agent)                # a Checkpointable is a state like any other
    stream.load_into(agent, 3)        # restore version 3 in place

A state dict holds the captured fields plus `__class__` (the class name) and `__version__` (the class's
`_checkpoint_version()`). Loading state saved by an older version runs the registered migrations in a
chain; stored data never chooses code (the class named in it is compared, never imported).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import Any

from .codec import Codec
from .errors import InvalidArgumentError, MigrationError, SerializationError

CLASS_KEY = "__class__"
VERSION_KEY = "__version__"
_MARKERS = (CLASS_KEY, VERSION_KEY)

_ABSENT = object()  # a planned load removes the attribute: the state it restores does not have it

Version = str | int
Migration = Callable[[dict[str, Any]], dict[str, Any]]


class Migrations:
    """A registry of state migrations: (class name, from version) -> (function, to version).

    `eventckpt.register_migration` registers into `default_migrations`; pass your own `Migrations()` to
    `load_into`/`load_state_dict(migrations=...)` to keep a registry scoped (tests, plugins), or use
    `with default_migrations.scoped():` to undo registrations on exit.
    """

    def __init__(self) -> None:
        self._steps: dict[tuple[str, Version], tuple[Migration, Version | None]] = {}
        self._lock = threading.Lock()

    def register(self, class_name: str, from_version: Version, fn: Migration, *, to_version: Version | None = None) -> None:
        """Migrate `class_name` state saved at `from_version`. The step leads to `to_version`, or, when
        that is None, straight to the current version of the class being loaded."""
        if type(class_name) is not str or not class_name:
            raise InvalidArgumentError("class_name", class_name, "must be a non-empty str")
        for name, value in (("from_version", from_version), ("to_version", to_version)):
            if value is not None and type(value) not in (str, int):
                raise InvalidArgumentError(name, value, "a schema version is a str or an int")
        if not callable(fn):
            raise InvalidArgumentError("fn", fn, "a migration is a function taking and returning a state dict")
        if to_version is not None and to_version == from_version:
            raise InvalidArgumentError("to_version", to_version, "a migration must lead to another version")
        with self._lock:
            self._steps[(class_name, from_version)] = (fn, to_version)

    def unregister(self, class_name: str, from_version: Version) -> None:
        with self._lock:
            self._steps.pop((class_name, from_version), None)

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()

    @contextmanager
    def scoped(self) -> Iterator[Migrations]:
        """Registrations made inside the block are undone on exit (earlier ones are restored)."""
        with self._lock:
            saved = dict(self._steps)
        try:
            yield self
        finally:
            with self._lock:
                self._steps = saved

    def migrate(self, class_name: str, state: dict[str, Any], found: Version, wanted: Version) -> dict[str, Any]:
        """Run the chain of steps from `found` to `wanted` on `state` (the caller's copy)."""
        seen = [found]
        current = found
        while current != wanted:
            with self._lock:
                step = self._steps.get((class_name, current))
            if step is None:
                known = sorted(str(v) for (name, v) in self._steps if name == class_name)
                chain = " -> ".join(map(repr, seen))
                raise MigrationError(class_name, str(found), str(wanted),
                                     f"no migration registered from version {current!r} (chain so far: {chain}; "
                                     f"registered from: {known or 'none'})")
            fn, to_version = step
            try:
                result = fn(state)
            except Exception as exc:
                raise MigrationError(class_name, str(found), str(wanted),
                                     f"the migration from {current!r} raised {type(exc).__name__}: {exc}") from exc
            if not isinstance(result, dict):
                raise MigrationError(class_name, str(found), str(wanted),
                                     f"the migration from {current!r} returned {type(result).__name__}, not a dict")
            state = result
            current = wanted if to_version is None else to_version
            if current in seen:
                raise MigrationError(class_name, str(found), str(wanted),
                                     f"the migrations loop: {' -> '.join(map(repr, seen + [current]))}")
            seen.append(current)
        state[VERSION_KEY] = wanted
        return state


default_migrations = Migrations()


def register_migration(class_name: str, from_version: Version, fn: Migration, *, to_version: Version | None = None) -> None:
    """Register a migration in `default_migrations` (see `Migrations.register`)."""
    default_migrations.register(class_name, from_version, fn, to_version=to_version)


def copy_value(value: Any) -> Any:
    """An independent deep copy through a fresh codec: exactly what a save and a restore would give,
    and never pickle (copy.deepcopy runs the pickle protocol). NaN is copied: a copy is not storage,
    and whether a NaN may be saved is the store's to say (allow_nan) when it is saved."""
    return Codec(allow_nan=True).copy(value)


class Checkpointable:
    """Mixin giving an object `state_dict()`, `load_state_dict()` and `clone()`.

    Captured fields: every public attribute (those in `vars(self)` and the slots that are set, without
    names starting with `_`), or the names
    `_checkpoint_fields()` returns. A field holding another Checkpointable is captured as its state dict
    and loaded back into the object already there. `_checkpoint_version()` names the class's schema
    version; state saved at another version is migrated on load (see `register_migration`).
    """

    def _checkpoint_fields(self) -> list[str] | None:
        """The names of the fields to capture, or None for every public attribute."""
        return None

    def _checkpoint_version(self) -> Version:
        """The schema version of this class's state (bump it when the fields change meaning)."""
        return "1.0"

    def _checkpoint_name(self) -> str:
        """The class name stored in `__class__` (and the key of its migrations)."""
        return type(self).__name__

    def _checkpoint_new(self) -> Checkpointable:
        """A fresh instance for `clone()` (override when __init__ needs arguments)."""
        return type(self)()

    # -- capture ----------------------------------------------------------------------------------

    def _field_names(self) -> list[str]:
        pinned = self._checkpoint_fields()
        if pinned is None:
            return [name for name in _public_attributes(self) if not name.startswith("_")]
        names = list(pinned)
        for name in names:
            if type(name) is not str or not name.isidentifier() or name in _MARKERS:
                raise InvalidArgumentError("_checkpoint_fields", name, "field names are identifiers (not __class__/__version__)")
        return names

    def _checkpoint_state(self) -> dict[str, Any]:
        """The state dict holding the object's own values (no copy: the store encodes what it saves)."""
        return _state_of(self, (), frozenset())

    def state_dict(self) -> dict[str, Any]:
        """The object's state as a new dict, independent of the object (a deep copy)."""
        return copy_value(self._checkpoint_state())

    # -- load -------------------------------------------------------------------------------------

    def load_state_dict(self, state: Mapping[str, Any], *, migrations: Migrations | None = None) -> None:
        """Set the object's fields from `state` (migrated first when its version is older). All or
        nothing: on any error the object and its nested Checkpointables are unchanged. A public attribute
        `state` lacks is kept (a class that gained one since the save keeps its default)."""
        if not isinstance(state, Mapping):
            raise InvalidArgumentError("state", state, "a state dict is a mapping")
        self._load_owned(copy_value(dict(state)), migrations)

    def _load_owned(self, state: dict[str, Any], migrations: Migrations | None, exact: bool = False) -> None:
        """Load a state the caller owns (a fresh restore): no defensive copy. `exact`: also remove the
        public attributes the state lacks (a rollback to a save this very object made)."""
        assignments: list[tuple[Checkpointable, str, Any]] = []
        self._plan_load(state, migrations or default_migrations, assignments, (), exact)
        for obj, name, value in assignments:
            if value is _ABSENT:
                delattr(obj, name)
            else:
                setattr(obj, name, value)

    def _plan_load(self, state: dict[str, Any], migrations: Migrations, out: list[tuple[Checkpointable, str, Any]],
                   where: tuple[str, ...], exact: bool = False) -> None:
        name = self._checkpoint_name()
        stored_name = state.get(CLASS_KEY, name)
        if stored_name != name:
            raise InvalidArgumentError("state", _where(where), f"holds the state of {stored_name!r}, not {name!r}")
        wanted = self._checkpoint_version()
        found = state.get(VERSION_KEY, wanted)
        if found != wanted:
            state = migrations.migrate(name, state, found, wanted)
        pinned = self._checkpoint_fields()
        allowed = None if pinned is None else set(self._field_names())
        for key, value in state.items():
            if key in _MARKERS:
                continue
            if type(key) is not str or not key.isidentifier() or (allowed is None and key.startswith("_")):
                raise InvalidArgumentError("state", _where(where + (str(key),)), "is not a field name this object captures")
            if allowed is not None and key not in allowed:
                raise InvalidArgumentError(
                    "state", _where(where + (key,)),
                    f"is not among {name}'s checkpoint fields; bump _checkpoint_version() and register a migration")
            current = getattr(self, key, None)
            if value is None:  # saved before a sub-object was set there (or cleared): put None back
                out.append((self, key, None))
            elif isinstance(current, Checkpointable):
                if not isinstance(value, dict):
                    raise InvalidArgumentError("state", _where(where + (key,)), f"holds {type(value).__name__}, not the state of a nested {type(current).__name__}")
                current._plan_load(value, migrations, out, where + (key,), exact)
            elif _is_nested_state(value):
                raise InvalidArgumentError(
                    "state", _where(where + (key,)),
                    f"holds the state of a {value[CLASS_KEY]!r} but the object has no Checkpointable there to load it into")
            else:
                out.append((self, key, value))
        if exact and pinned is None:
            # A rollback to the save made as its block began: a public attribute the state lacks was
            # created by the block and would otherwise survive into the next save. (Not for any other
            # load: a class that gained an attribute since an older save keeps its default.)
            for key in self._field_names():
                if key not in state:
                    out.append((self, key, _ABSENT))

    def clone(self) -> Checkpointable:
        """A new, independent instance with the same state (a round trip through the codec)."""
        twin = self._checkpoint_new()
        twin._load_owned(copy_value(self._checkpoint_state()), None)
        return twin


def _state_of(obj: Checkpointable, path: tuple[str, ...], active: frozenset[int]) -> dict[str, Any]:
    """`obj`'s state dict, nested Checkpointables as theirs. `path` leads to `obj` and `active` holds the
    ids of the Checkpointables being captured around it: a reference cycle (a tool holding its agent)
    is a SerializationError naming the path, not a recursion until RecursionError."""
    active = active | {id(obj)}
    state: dict[str, Any] = {}
    for name in obj._field_names():
        try:
            value = getattr(obj, name)
        except AttributeError:
            raise InvalidArgumentError("field", name, f"{type(obj).__name__} has no attribute {name!r} to capture") from None
        if isinstance(value, Checkpointable):
            if id(value) in active:
                raise SerializationError(path + (name,), "a reference cycle: this Checkpointable contains itself",
                                         type(value).__name__)
            value = _state_of(value, path + (name,), active)
        state[name] = value
    state[CLASS_KEY] = obj._checkpoint_name()
    state[VERSION_KEY] = obj._checkpoint_version()
    return state


def _slot_names(cls: type) -> list[str]:
    """The slots `cls` and its bases declare, bases first (the order a dataclass or attrs class lists
    its fields in); a slotted class (attrs' @define, @dataclass(slots=True)) keeps its fields there, not
    in __dict__."""
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        slots = klass.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return names


def _public_attributes(obj: Any) -> list[str]:
    """The attributes `obj` holds: its __dict__ and its slots that are set (an unset slot is an
    absent attribute)."""
    names = list(getattr(obj, "__dict__", ()))
    for name in _slot_names(type(obj)):
        if name not in names and hasattr(obj, name):
            names.append(name)
    return names


def _is_nested_state(value: Any) -> bool:
    return type(value) is dict and CLASS_KEY in value and VERSION_KEY in value


def _where(path: tuple[str, ...]) -> str:
    return ".".join(path) or "(top level)"


def capture(obj: Any) -> Any:
    """What a save stores for `obj`: a Checkpointable's state dict, anything else as it is."""
    return obj._checkpoint_state() if isinstance(obj, Checkpointable) else obj


def check_restorable(obj: Any) -> None:
    """InvalidArgumentError unless `restore` can put a state into `obj` in place."""
    if not isinstance(obj, (Checkpointable, MutableMapping)):
        raise InvalidArgumentError("obj", obj, "only a Checkpointable or a mutable mapping can be restored in place")


def restore(obj: Any, state: dict[str, Any], migrations: Migrations | None = None, *, exact: bool = False) -> None:
    """Put `state` (owned by the caller, e.g. a fresh restore) into `obj` in place: a Checkpointable
    loads it (`exact`: and loses the public attributes the state lacks); a mutable mapping is cleared and
    updated."""
    check_restorable(obj)
    if isinstance(obj, Checkpointable):
        obj._load_owned(state, migrations, exact)
    else:
        obj.clear()
        obj.update(state)
