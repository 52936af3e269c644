"""Every command of README's command table works on a PostgreSQL store, given its postgresql:// URL in
place of the file, as real processes, in README's order; and their errors are one line there too."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from click.testing import CliRunner

import eventckpt
from eventckpt.cli import main

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
    assert len(table) == 17 and table[0] == "eventckpt demo agent.db"
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


def test_errors_are_one_line_on_postgresql(pg_target: str) -> None:
    """A database that does not exist is named at once, on one line of stderr with exit status 1 (not after
    the pool's 30 s of retries, their messages, and "unreachable"); a statement `eventckpt sql` refuses is
    one line too."""
    base = pg_target.rsplit("/", 1)[0]
    start = time.monotonic()
    status, err = run_cli_example(f"eventckpt streams {base}/no_such_database")
    assert status == 1 and time.monotonic() - start < 20
    assert err.count("\n") == 1 and err.startswith("Error: StorageError: ") and '"no_such_database" does not exist' in err
    for query in ("COMMIT", "SELEC 1", "SELECT pg_reload_conf()"):
        status, err = run_cli_example(f'eventckpt sql {pg_target} "{query}"')
        assert status == 1 and err.count("\n") == 1, (query, err)


def test_sql_json_holds_postgresql_types_exactly(pg_target: str) -> None:
    """sql --json on PostgreSQL writes numeric exactly (whole: an integer; else every digit), interval as an
    ISO 8601 duration and non-finite numbers as strings, where it failed with TypeError; text shows them too."""
    assert run_cli_example(f"eventckpt demo {pg_target}")[0] == 0
    query = ("SELECT sum(input_tokens_added) AS total, 12345678901234567890.123456789::numeric AS exact,"
             " 123456789012345678901234567890::numeric AS big, 'NaN'::numeric AS nan, 'infinity'::float8 AS inf,"
             " interval '1 day 2 hours 3.5 seconds' AS took, interval '-1 second' AS back,"
             " ARRAY[1.5::numeric, 2::numeric] AS items FROM eventckpt.checkpoints WHERE stream = 'demo'")
    result = CliRunner().invoke(main, ["sql", pg_target, query, "--json"])
    assert result.exit_code == 0, result.output
    assert '"exact": 12345678901234567890.123456789' in result.stdout
    assert json.loads(result.stdout, parse_float=Decimal) == [{
        "total": 960, "exact": Decimal("12345678901234567890.123456789"),
        "big": 123456789012345678901234567890, "nan": "NaN", "inf": "Infinity", "took": "P1DT2H3.5S",
        "back": "-PT1S", "items": [Decimal("1.5"), 2]}]
    result = CliRunner().invoke(main, ["sql", pg_target, query])
    assert result.exit_code == 0 and result.stdout.splitlines()[1].split()[:5] == [
        "960", "12345678901234567890.123456789", "123456789012345678901234567890", "NaN", "Infinity"]


def test_demo_and_upgrade_do_not_print_the_password(pg_target: str) -> None:
    """demo and upgrade name a PostgreSQL store without its password, as errors do (they printed the URL given)."""
    scheme, rest = pg_target.split("://", 1)
    userinfo, _, where = rest.rpartition("@")
    user = userinfo.split(":", 1)[0] or "postgres"
    url = f"{scheme}://{user}:s3cret-word@{where}"
    for args in (["demo", url], ["upgrade", url], ["upgrade", url, "--json"]):
        result = CliRunner().invoke(main, args)
        assert "s3cret-word" not in result.output and "postgresql://" in result.output, (args, result.output)


def test_an_upper_case_url_is_a_postgresql_store(pg_target: str, tmp_path: Path) -> None:
    """A URL whose scheme is in upper case (POSTGRESQL://) names the PostgreSQL store (schemes are
    case-insensitive), not a file path."""
    scheme, rest = pg_target.split("://", 1)
    url = f"{scheme.upper()}://{rest}"
    assert CliRunner().invoke(main, ["demo", url]).exit_code == 0
    result = CliRunner().invoke(main, ["streams", url, "--json"])
    assert result.exit_code == 0 and [r["stream"] for r in json.loads(result.stdout)] == ["demo", "demo-retry"]
    with eventckpt.open(url, readonly=True) as store:
        assert store.path.startswith("postgresql://") and store.stream("demo").version == 10
