"""Every command of README's command table works on a PostgreSQL store, given its postgresql:// URL in
place of the file, as real processes, in README's order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import eventckpt

from .conftest import run_cli_example
from .engines import TARGETS
from .test_readme import readme_steps


@pytest.fixture
def databases() -> Iterator[dict[str, str]]:
    """README's three store files (agent.db, copy.db, backup.db) as three empty PostgreSQL stores."""
    made = {name: TARGETS.take("postgresql") for name in ("agent.db", "copy.db", "backup.db")}
    yield made
    for target in made.values():
        TARGETS.give_back(target)


def test_readme_command_table_on_postgresql(databases: dict[str, str], tmp_path: Path) -> None:
    """The table's commands, run on URLs instead of files, all succeed, and they leave in the stores what
    they leave in files: the demo's streams, the fork, the rollback, the import and the copy."""
    table = [step[1] for step in readme_steps() if step[0] == "cli"][1:]  # [0] is the set-up's demo
    assert len(table) == 16 and table[0] == "eventckpt demo agent.db"
    for command in table:
        for name, url in databases.items():
            command = command.replace(f" {name}", f" {url}")
        status, err = run_cli_example(command, cwd=tmp_path)
        assert status == 0, (command, err)
    with eventckpt.open(databases["agent.db"], readonly=True) as store:
        assert sorted(store.streams()) == ["demo", "demo-retry", "retry"]
        assert store.stream("demo").state() == store.stream("demo").state(3)
        assert store.stream("demo").version == 11
    for other in ("copy.db", "backup.db"):
        with eventckpt.open(databases[other], readonly=True) as store:
            assert set(store.streams()) >= {"demo", "demo-retry"}
            assert store.verify().ok
