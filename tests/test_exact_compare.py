"""The C extension eventckpt.exactcompare decides `ops.same` exactly as the Python definition does, for
random values full of lookalikes; hands what it does not know to the Python definition; and stays safe
when Python code it calls changes the values it is comparing."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventckpt import ops

from .conftest import strict_equal

pytestmark = pytest.mark.usefixtures("comparison")

scalars = st.one_of(
    st.sampled_from([0, 1, -1, 2**70, 0.0, -0.0, 1.0, math.nan, math.inf, True, False, None, "", "a", "é", "😀"]),
    st.text(max_size=3),
    st.integers(),
    st.floats(allow_nan=True),
    st.sampled_from([Decimal("1.0"), Decimal("1.00"), frozenset({1}), frozenset({1.0})]),
)
keys = st.one_of(st.sampled_from(["a", "b", "c", "é"]), st.sampled_from([1, 1.0, True, None]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.lists(inner, max_size=3).map(tuple),
                                                       st.dictionaries(keys, inner, max_size=4)), max_leaves=12)


def python_same(a: Any, b: Any, monkeypatch: pytest.MonkeyPatch) -> bool:
    with monkeypatch.context() as patch:
        patch.setattr(ops, "native_same", None)
        return ops.same(a, b)


def reordered(value: Any) -> Any:
    """`value` with each dict's keys in reverse order (the same value to a checkpoint)."""
    if type(value) is dict:
        return {k: reordered(value[k]) for k in reversed(list(value))}
    if type(value) is list:
        return [reordered(item) for item in value]
    return value


@pytest.mark.parametrize("comparison", ["native"], indirect=True)  # with Python alone it would compare it to itself
@settings(max_examples=500)
@given(a=values, b=values)
def test_same_agrees_with_python_on_any_two_values(a: Any, b: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """ops.same gives the Python definition's answer for any two values (usually different ones)."""
    assert ops.same(a, b) is python_same(a, b, monkeypatch)


@settings(max_examples=500)
@given(value=values, shuffle=st.booleans())
def test_same_finds_a_copy_the_same(value: Any, shuffle: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deep copy (keys in another order or not) is the same exactly when the Python definition says so
    (a NaN key is never found again), and agrees with an independent exact comparison when it holds no NaN."""
    other = reordered(copy.deepcopy(value)) if shuffle else copy.deepcopy(value)
    answer = ops.same(value, other)
    assert answer is python_same(value, other, monkeypatch)
    if "nan" not in repr(value).lower():
        assert answer is strict_equal(value, other)


@pytest.mark.parametrize("a, b, expected", [
    ([{"n": 1}], [{"n": 1.0}], False),
    ([{"n": 1}], [{"n": True}], False),
    ({"x": 0.0}, {"x": -0.0}, False),
    ({"x": math.nan}, {"x": float("nan")}, True),
    ([1, "a"], (1, "a"), False),
    ({"a": 1, "b": [2]}, {"b": [2], "a": 1}, True),
    ({"a": 1, "b": 2}, {"a": 1, "c": 2}, False),
    ({1: "x"}, {1.0: "x"}, False),
    ([2**80], [2**80 + 0], True),
    (["é"], ["e\u0301"], False),
    ([Decimal("1.0")], [Decimal("1.00")], False),
])
def test_lookalikes(a: Any, b: Any, expected: bool) -> None:
    """The changes `==` cannot see are changes; key order and a new NaN are not."""
    assert ops.same(a, b) is expected
    assert ops.same(b, a) is expected


def test_deep_values_compare(comparison: str) -> None:
    """Values nested deeper than any a store keeps (100 levels) still compare, equal or changed at the bottom."""
    deep: Any = "leaf"
    for _ in range(120):
        deep = [{"k": deep}]
    assert ops.same(deep, copy.deepcopy(deep))
    changed = copy.deepcopy(deep)
    inner = changed
    for _ in range(119):
        inner = inner[0]["k"]
    inner[0]["k"] = "other"
    assert not ops.same(deep, changed)


@pytest.mark.parametrize("nesting", ["[x]", "{'k': x}", "(x,)"])
def test_a_value_past_the_recursion_limit_raises_recursion_error(comparison: str, nesting: str) -> None:
    """A value nested 200,000 levels deep (or two cycles) raises RecursionError, as `==` does, in a real
    process that must not crash: the C walk counts its levels with Python's frames."""
    program = f"""
import sys
from eventckpt import ops
if {comparison!r} == "python":
    ops.native_same = None
def nest():
    x = "leaf"
    for _ in range(200_000):
        x = {nesting}
    return x
try:
    ops.same(nest(), nest())
except RecursionError:
    one, other = [], []
    one.append(one)
    other.append(other)
    try:
        ops.same(one, other)
    except RecursionError:
        print("refused")
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout.strip()) == (0, "refused"), done.stderr[-2000:]


class Meddler:
    """A value whose == empties the containers it was put in (what caller code could do inside a compare)."""

    def __init__(self, victims: list[Any]) -> None:
        self.victims = victims

    def __eq__(self, other: object) -> bool:
        for victim in self.victims:
            victim.clear()
        return True

    __hash__ = object.__hash__


def test_a_comparison_that_empties_its_containers_does_not_crash() -> None:
    """Python code run mid-comparison may clear the lists and dicts being walked: the answer may be
    anything, but nothing freed is read (run enough times for a use-after-free to show)."""
    for _ in range(200):
        stored_list: list[Any] = []
        caller_list: list[Any] = []
        stored_dict: dict[str, Any] = {}
        caller_dict: dict[str, Any] = {}
        victims = [stored_list, caller_list, stored_dict, caller_dict]
        stored_list += [Meddler(victims), {"k": [object() for _ in range(3)]}, "x" * 100]
        caller_list += [Meddler(victims), {"k": [object() for _ in range(3)]}, "y" * 100]
        stored_dict.update(a=Meddler(victims), b=[1.5] * 10, c="z")
        caller_dict.update(a=Meddler(victims), b=[1.5] * 10, c="z")
        assert ops.same(stored_list, caller_list) in (True, False)
        assert ops.same(stored_dict, caller_dict) in (True, False)
        assert ops.same([stored_dict], [caller_dict]) in (True, False)


def test_an_error_in_python_code_reaches_the_caller() -> None:
    """An exception raised while a pair is decided in Python comes out of ops.same unchanged."""

    class Broken:
        def __eq__(self, other: object) -> bool:
            raise ZeroDivisionError("from __eq__")

        __hash__ = object.__hash__

    with pytest.raises(ZeroDivisionError, match="from __eq__"):
        ops.same([{"k": Broken()}], [{"k": Broken()}])


def test_a_pair_stays_alive_while_a_lookup_runs_python_code(comparison: str) -> None:
    """Once Python code run mid-compare gives the stored dict a key that is not text, looking a key up
    in it runs that key's __eq__, which may delete the caller's entry: the value being compared stays
    alive until its comparison is done (a real process: reading freed memory would crash it or lie)."""
    program = f"""
from eventckpt import ops
if {comparison!r} == "python":
    ops.native_same = None
armed = False

class Collider:
    def __hash__(self):
        return hash("x")
    def __eq__(self, other):
        if armed:
            del caller["x"]
        return False

class Watched:
    def __init__(self, name):
        self.name = name
    def __del__(self):
        print("freed", self.name, flush=True)
    def __eq__(self, other):
        print("compared", self.name, other.name, flush=True)
        return True
    __hash__ = object.__hash__

class Meddling:
    def __eq__(self, other):
        global armed
        value = stored.pop("x")
        stored[Collider()] = 0
        stored["x"] = value
        armed = True
        return True
    __hash__ = object.__hash__

x = "".join(["x"])  # equal text, another object: the lookup compares keys
stored = {{"x": Watched("stored"), "k": Meddling()}}
caller = {{"k": Meddling(), x: Watched("caller")}}  # another order: compared key by key
print("answer", ops.same(stored, caller), flush=True)
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    # an answer, or a Python exception (Python's own loop refuses a dict that changed size): never a crash
    assert done.returncode == 0 or (done.returncode == 1 and "Traceback" in done.stderr), done.stderr[-2000:]
    lines = done.stdout.splitlines()
    if "compared stored caller" in lines:
        assert lines.index("compared stored caller") < lines.index("freed caller")
