"""One path syntax everywhere: a tuple of keys and list indices, or the same as SQLite JSON path text (with
or without `$.`), read by one parser in transactions, history and the command line, and stored as that
text in the file. A malformed path raises PathError naming it, and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import eventckpt
from eventckpt.cli import main
from eventckpt.paths import from_text, parse, to_text

from .conftest import RawSQL, journal_rows

SAME = [
    ("scratch.answer", ("scratch", "answer")),
    ("$.scratch.answer", ("scratch", "answer")),
    ("messages[3].content", ("messages", 3, "content")),
    ("$.messages[3].content", ("messages", 3, "content")),
    ('$."a.b"', ("a.b",)),
    ('"a.b"', ("a.b",)),
    ('$."a b".c', ("a b", "c")),
    ('$."$x"', ("$x",)),
    ('$."3"', ("3",)),
    ("step", ("step",)),
    ("_k9", ("_k9",)),
]

MALFORMED = ["scratch..k", "$.", "", "$", "messages.3", "messages[3", "messages[x]", "messages[-1]", '"a.b', 'a"b',
             "$foo", "$[0]", "[0]", "a b", "a-b", "a.", ".a", "a]", "a[1]]", "$.a.\u00e9"]


@pytest.mark.parametrize("text,parts", SAME, ids=[t for t, _ in SAME])
def test_text_and_tuples_name_the_same_path(text: str, parts: tuple) -> None:
    """Path text with or without `$.` parses to the tuple, and the tuple prints as the stored `$.` text."""
    assert parse(text) == parts
    assert from_text(to_text(parts)) == parts
    assert to_text(parse(text)) == (text if text.startswith("$") else to_text(parts))


@pytest.mark.parametrize("text", MALFORMED)
def test_malformed_paths_raise_path_error_naming_them(store: eventckpt.Store, store_target: str, text: str) -> None:
    """A malformed path is refused by the parser, a transaction and history with PathError naming the text;
    nothing is written."""
    task = store.stream("t")
    task.save({"scratch": {"k": 1}, "messages": [{"content": "hi"}]})
    before = journal_rows(store_target)
    for call in (lambda: parse(text), lambda: task.history(text)):
        with pytest.raises(eventckpt.PathError) as info:
            call()
        assert info.value.path == text and repr(text) in str(info.value)
    with pytest.raises(eventckpt.PathError):
        with task.transaction() as tx:
            tx.set(text, 1)
    assert journal_rows(store_target) == before


@pytest.mark.parametrize("parts", [(None, []), ("a", []), ("a", {}), ("a", ["b"])])
def test_tuple_paths_holding_unhashable_parts_raise_path_error(store: eventckpt.Store, store_target: str,
                                                               parts: tuple) -> None:
    """A tuple path holding a list or dict is refused with PathError (not a TypeError from a cache lookup),
    in a transaction and in history; nothing is written."""
    task = store.stream("t")
    task.save({"a": {"b": 1}})
    before = journal_rows(store_target)
    with pytest.raises(eventckpt.PathError):
        with task.transaction() as tx:
            tx.set(parts, 1)
    with pytest.raises(eventckpt.PathError):
        task.history(parts)
    assert journal_rows(store_target) == before


def test_transactions_and_history_read_str_paths_as_paths(store: eventckpt.Store, store_target: str) -> None:
    """tx.set("scratch.answer") and tx.set("$.scratch.answer") set a nested key (not a top-level key named
    with a dot); history("scratch.answer") finds both changes; a top-level key with a dot is `$."a.b"`."""
    task = store.stream("t")
    task.save({"scratch": {}, "messages": [{"content": "hi"}]})
    with task.transaction() as tx:
        tx.set("scratch.answer", 1)
    with task.transaction() as tx:
        tx.set("$.scratch.answer", 2)
        tx.set('$."a.b"', 3)
        tx.set("messages[0].content", "hello")
    assert task.state() == {"scratch": {"answer": 2}, "messages": [{"content": "hello"}], "a.b": 3}
    assert [(e.version, e.value) for e in task.history("scratch.answer")] == [(3, 2), (2, 1)]
    assert [e.value for e in task.history('"a.b"')] == [3] == [e.value for e in task.history(("a.b",))]
    assert [e.value for e in task.history("messages[0].content")] == ["hello", "hi"]
    with RawSQL(store_target) as raw:
        stored = sorted(row[0] for row in raw.execute("SELECT path FROM events"))
    assert '$."a.b"' in stored and "$.scratch.answer" in stored and "$.messages[0].content" in stored


def test_the_command_line_reads_the_same_paths(store: eventckpt.Store, store_target: str) -> None:
    """The CLI's history takes the same text as Python and finds the same changes."""
    task = store.stream("t")
    task.save({"scratch": {"k3": 1}, "a.b": 1})
    with task.transaction() as tx:
        tx.set("scratch.k3", 2)
        tx.set('"a.b"', 2)
    for text in ("scratch.k3", "$.scratch.k3", '$."a.b"', '"a.b"'):
        got = CliRunner().invoke(main, ["history", str(store_target), "t", text, "--json"])
        assert got.exit_code == 0 and [e["value"] for e in orjson.loads(got.stdout)] == \
            [e.value for e in task.history(text)] == [2, 1], text
    bad = CliRunner().invoke(main, ["history", str(store_target), "t", "scratch..k3"])
    assert bad.exit_code == 1 and "PathError: invalid path 'scratch..k3'" in bad.stderr


keys = st.one_of(st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'), max_size=6),
                 st.integers(0, 10**6))


@given(st.tuples(st.text(st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters='"\\'), max_size=6))
       .flatmap(lambda first: st.lists(keys, max_size=4).map(lambda rest: first + tuple(rest))))
def test_every_addressable_path_round_trips(path: Any) -> None:
    """Every path of addressable keys and indices prints as text that parses back to it."""
    assert from_text(to_text(path)) == path
    assert parse(to_text(path)) == path
