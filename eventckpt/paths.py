"""Paths into a state: Python tuples of keys and list indices <-> SQLite JSON path text.

The text form is what the journal stores, so `json_extract(state, path)` works in the stock sqlite3 CLI
(3.40 and later). Simple keys are written bare (`$.messages`), other keys quoted (`$."a.b"`), list indices
in brackets (`$.messages[3]`). SQLite's path syntax has no escapes, so a key holding a double quote, a
backslash or a control character cannot be addressed: such a dict is stored as one value by its parent.

One syntax everywhere: a caller's str path (in transactions, history, the CLI) is this same text, with or
without its leading `$.` (`scratch.k3` is `$.scratch.k3`); a tuple names the same path part by part.
"""

from __future__ import annotations

import re
from typing import Union

from .errors import PathError

Key = Union[str, int]
Path = tuple[Key, ...]

_BARE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# one part of path text: a bare key, a quoted key (no quote inside: SQLite paths have no escapes), an index
_PART = re.compile(r'\.([A-Za-z_][A-Za-z0-9_]*)(?=[.\[]|\Z)|\."([^"]*)"|\[([0-9]+)\]')
_UNADDRESSABLE = re.compile(r'["\\\x00-\x1f\x7f\ud800-\udfff]')  # lone surrogates are not UTF-8
_SURROGATE = re.compile(r"[\ud800-\udfff]")
_TEXT_CACHE: dict[Path, str] = {}
_PATH_CACHE: dict[str, Path] = {}
_CACHE_LIMIT = 50_000


def addressable(key: str) -> bool:
    """Whether a dict key can appear in a stored path."""
    return _UNADDRESSABLE.search(key) is None


def encodable(text: str) -> bool:
    """Whether a str can be stored as text: a lone surrogate has no UTF-8 form, and the driver would
    raise a raw UnicodeEncodeError at the first query that binds it."""
    return _SURROGATE.search(text) is None


def to_text(path: Path) -> str:
    """The SQLite JSON path of `path` (cached; paths repeat across versions)."""
    text = _TEXT_CACHE.get(path)
    if text is not None:
        return text
    parts = ["$"]
    for key in path:
        if type(key) is int:
            if key < 0:
                raise PathError(path, "list indices in stored paths are never negative")
            parts.append(f"[{key}]")
        elif type(key) is str:
            if _BARE.match(key):
                parts.append("." + key)
            elif addressable(key):
                parts.append(f'."{key}"')
            else:
                raise PathError(path, f"key {key!r} holds a quote, backslash, control character or lone surrogate")
        else:
            raise PathError(path, f"a path holds str keys and int indices, not {type(key).__name__}")
    text = "".join(parts)
    if len(_TEXT_CACHE) > _CACHE_LIMIT:
        _TEXT_CACHE.clear()
    _TEXT_CACHE[path] = text
    return text


def from_text(text: str) -> Path:
    """Parse JSON path text into a tuple: the one parser, for stored paths and callers' paths alike.

    Grammar: `$` followed by parts, each `.key` (a bare key: a letter or `_`, then letters, digits or
    `_`), `."key"` (any addressable key, quoted) or `[N]` (a list index, digits). Anything else, such as
    `$.`, `$.a..b`, `$.messages.3`, `$.a[x]`, an unclosed bracket or quote, raises PathError naming the
    text. `to_text` writes exactly this grammar, so `from_text(to_text(p)) == p`.
    """
    path = _PATH_CACHE.get(text)
    if path is not None:
        return path
    out = relative_parts(text)
    if not out:
        raise PathError(text, "a path names at least a top-level key")
    if type(out[0]) is not str:
        raise PathError(text, "a path starts with a top-level key, not a list index")
    path = tuple(out)
    if len(_PATH_CACHE) > _CACHE_LIMIT:
        _PATH_CACHE.clear()
    _PATH_CACHE[text] = path
    return path


def relative_parts(text: str) -> list[Key]:
    """The parts of JSON path text relative to some value: like `from_text`, but `$` alone (the value
    itself) and a first index (`$[3].content`) are allowed."""
    if type(text) is not str or not text.startswith("$"):
        raise PathError(text, "a JSON path starts with '$' (like $.scratch.k3)")
    out: list[Key] = []
    i, n = 1, len(text)
    while i < n:
        m = _PART.match(text, i)
        if m is None:
            raise PathError(text, f"malformed at {text[i:]!r}: expected .key, .\"key\" or [index]"
                            " (keys that are not identifiers are quoted: $.\"a.b\", $.messages[3])")
        bare, quoted, index = m.groups()
        if index is not None:
            out.append(int(index))
        else:
            key = bare if bare is not None else quoted
            if not addressable(key):
                raise PathError(text, f"key {key!r} holds a backslash, control character or lone surrogate")
            out.append(key)
        i = m.end()
    return out


def parse(text: str) -> Path:
    """A caller's path text: a JSON path (`$.scratch.k3`, `$."a.b"`) or the same without its leading `$.`
    (`scratch.k3`, `messages[3].content`, `"a.b"`). The CLI, transactions and history all read str paths
    here; a top-level key that is not an identifier is written quoted (`"a.b"`) or as a tuple."""
    if type(text) is not str or not text:
        raise PathError(text, "an empty path: name at least a top-level key (like step or $.step)")
    if text.startswith("$"):
        return from_text(text)
    try:
        return from_text("$." + text)
    except PathError as exc:
        raise PathError(text, exc.reason) from None


_NORMALIZED: dict[str, Path] = {}


def normalize(path: object) -> Path:
    """A caller's path: str path text (see `parse`), or a tuple/list of keys and list indices."""
    if type(path) is str:  # paths repeat every step
        hit = _NORMALIZED.get(path)
        if hit is None:
            hit = parse(path)
            if len(_NORMALIZED) > _CACHE_LIMIT:
                _NORMALIZED.clear()
            _NORMALIZED[path] = hit
        return hit
    if type(path) is tuple:
        # Only tuples of str keys are cached: ("a", True) == ("a", 1), so a tuple holding an index could
        # find another's entry, while a key equal to a str key is that str.
        try:
            known = _KEYS.get(path)
        except TypeError:  # an unhashable part (a list): no path, and _normalize says why
            known = None
        if known is not None:
            return known
        parts = _normalize(path)
        if all(type(key) is str for key in parts):
            if len(_KEYS) > _CACHE_LIMIT:
                _KEYS.clear()
            _KEYS[parts] = parts
        return parts
    return _normalize(path)


_KEYS: dict[Path, Path] = {}


def _normalize(path: object) -> Path:
    if isinstance(path, (tuple, list)):
        parts = tuple(path)
    else:
        raise PathError((path,), "a path is path text (str, like scratch.k3) or a tuple of keys and list indices")
    if not parts:
        raise PathError((), "a path names at least a top-level key")
    if type(parts[0]) is not str:
        raise PathError(parts, "a path starts with a top-level key (str)")
    for key in parts:
        if type(key) is str:
            if not addressable(key):
                raise PathError(parts, f"key {key!r} holds a quote, backslash, control character or lone surrogate")
        elif type(key) is not int:
            raise PathError(parts, f"a path holds str keys and int indices, not {type(key).__name__}")
    return parts  # type: ignore[return-value]


def child_ranges(text: str) -> tuple[tuple[str, str], tuple[str, str]]:
    """Half-open text ranges holding every stored path strictly below `text` ('[' and '.' children).

    '.' and '[' are followed in ASCII by '/' and '\\', so `[text + '.', text + '/')` holds exactly the
    paths that continue with a key, and `[text + '[', text + '\\')` those that continue with an index.
    """
    return (text + ".", text + "/"), (text + "[", text + "\\")
