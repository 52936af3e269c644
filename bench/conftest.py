"""Micro-benchmarks of eventckpt's native API on stores holding workload W to 1k, 10k and 100k versions.

    pytest bench/                                  # every size
    pytest bench/ --bench-sizes 1000,10000         # the sizes you choose

Each writing benchmark runs on its own copy of the store; a bare apsw commit of the same rows on a store of
the same size is measured next to them (the physical limit), so compare ratios, not absolute times.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import Recorder  # noqa: E402
from systems import EventckptTx  # noqa: E402
from workload import Step, steps  # noqa: E402

# issue 3's log/history/diff: remove this line once CheckpointStore has them (after that branch merges)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--bench-sizes", default="1000,10000,100000",
                     help="comma-separated version counts of the W stores to benchmark on")


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    # pyproject's addopts disables benchmarks for the test suite; here they measure unless asked not to
    if "--benchmark-disable" not in config.invocation_params.args:
        config.option.benchmark_enable = True


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "versions" in metafunc.fixturenames:
        sizes = [int(x) for x in metafunc.config.getoption("bench_sizes").split(",")]
        ids = [f"{n // 1000}k" if n % 1000 == 0 else str(n) for n in sizes]
        metafunc.parametrize("versions", sizes, ids=ids, scope="session")


@pytest.fixture(scope="session")
def w_file(versions: int, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A closed store whose stream `w` holds W to `versions` steps (W step v is version v + 1)."""
    path = tmp_path_factory.mktemp(f"w{versions}") / "w.db"
    system = EventckptTx()
    system.open(str(path))
    try:
        system.write(versions, Recorder(str(path), versions, None))
    finally:
        system.close()
    return path


@pytest.fixture
def w_copy(w_file: Path, tmp_path: Path) -> Path:
    """A private copy of that store, for a benchmark that writes."""
    target = tmp_path / "w.db"
    shutil.copyfile(w_file, target)
    return target


def steps_after(versions: int) -> Iterator[Step]:
    """W's steps after the store's last one."""
    return islice(steps(versions + 100_000), versions, None)
