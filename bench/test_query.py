"""Issue 3's reads on W stores of each size, next to the bare SQL over the same rows: log of the newest
3000 versions, history of one path over every version, diff of two versions 10k apart (targets: 10 ms,
50 ms, 20 ms at 100k versions).

Not collected until CheckpointStore has log/history/diff: remove `collect_ignore` in bench/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import eventckpt
from systems import HISTORY_PATH, Bare, count

LOG_LIMIT = 3000
DIFF_SPAN = 10_000


@pytest.fixture
def w_stream(w_file: Path):
    with eventckpt.open(w_file, readonly=True) as store:
        yield store.stream("w")


@pytest.fixture
def w_bare(w_file: Path):
    bare = Bare()
    bare.open(str(w_file))
    yield bare
    bare.close()


def test_log(benchmark, w_stream, versions: int) -> None:
    """log(limit): the newest checkpoints without decoding any state."""
    limit = min(LOG_LIMIT, versions)
    assert count(benchmark(w_stream.log, limit)) == limit


def test_log_bare_sql(benchmark, w_bare: Bare, versions: int) -> None:
    """The bare SQL of the same listing (the limit)."""
    limit = min(LOG_LIMIT, versions)
    assert benchmark(w_bare.log, limit, 0.0) == limit


def test_history(benchmark, w_stream, versions: int) -> None:
    """history(path) of a path that changes at every version."""
    assert count(benchmark(w_stream.history, HISTORY_PATH)) >= versions


def test_history_bare_sql(benchmark, w_bare: Bare, versions: int) -> None:
    """The bare SQL of the same history (the limit)."""
    assert benchmark(w_bare.history, 0.0) == versions + 1


def test_diff(benchmark, w_stream, versions: int) -> None:
    """diff(a, b) of two versions up to 10k apart: answered from the events between them."""
    head = versions + 1
    assert count(benchmark(w_stream.diff, head - min(DIFF_SPAN, versions // 2), head)) > 0
