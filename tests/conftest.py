"""Shared fixtures: every test runs against real SQLite files in tmp_path."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest
from hypothesis import HealthCheck, settings

import eventckpt

settings.register_profile(
    "default", deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.register_profile(
    "ci", deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A path for a fresh store file."""
    return tmp_path / "agent.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[eventckpt.Store]:
    """An open store on a real file."""
    with eventckpt.open(db_path) as s:
        yield s


def journal_rows(path: Path | str) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, read with a separate plain connection (to compare before/after)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")]
        return {t: conn.execute(f'SELECT * FROM "{t}" ORDER BY 1, 2').fetchall() for t in tables}
    finally:
        conn.close()


def strict_equal(a: Any, b: Any) -> bool:
    """Equal with exact types all the way down (1, 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, (set, frozenset)):
        return a == b and sorted(map(repr, a)) == sorted(map(repr, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b
