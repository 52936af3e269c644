"""README's "Many hosts: PostgreSQL" section tells the truth: its example, its command and its psql
queries run on a real PostgreSQL server and show what it says."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from typing import Any

from .conftest import run_cli_example
from .engines import TARGETS
from .test_readme import README, with_checks

SECTION = README.split("## Many hosts: PostgreSQL\n", 1)[1].split("\n## ", 1)[0]
PLACEHOLDER = "postgresql://agent@db-host/agents"


def test_the_example_runs_on_postgresql(pg_target: str) -> None:
    """The section's Python example, with its URL pointed at a real server, runs and shows its results;
    the command the section names then reads what it wrote."""
    (code,) = re.findall(r"```python\n(.*?)```", SECTION, re.S)
    assert PLACEHOLDER in code
    checked: list[str] = []

    def check(got: Any, want: Any, expr: str) -> None:
        assert got == want, f"{expr}: {got!r} != {want!r}"
        checked.append(expr)

    exec(compile(with_checks(code.replace(PLACEHOLDER, pg_target), "_check"), "README PostgreSQL", "exec"),
         {"_check": check})
    assert checked == ['task.state(1)["step"]']
    command = re.search(r"`(eventckpt log postgresql://\S+ task-1)`", SECTION)
    assert command
    status, err = run_cli_example(command.group(1).replace(PLACEHOLDER, pg_target))
    assert status == 0, err


def test_psql_examples_show_what_readme_says(pg_target: str) -> None:
    """After `eventckpt demo "$DATABASE_URL"`, each psql query of the section prints what README shows,
    run with the server's own psql."""
    status, err = run_cli_example(f"eventckpt demo {shlex.quote(pg_target)}")
    assert status == 0, err
    env = {**os.environ, "DATABASE_URL": pg_target, "PATH": f"{TARGETS.server().bin}:{os.environ['PATH']}"}
    examples = [chunk for block in re.findall(r"```console\n(.*?)```", SECTION, re.S)
                for chunk in block.strip().split("\n\n")]
    assert len(examples) == 5
    for chunk in examples:
        command, _, expected = chunk.partition("\n")
        assert command.startswith("$ psql ")
        done = subprocess.run(["bash", "-c", command[2:]], capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, (command, done.stderr)
        assert done.stdout.rstrip("\n") == expected, (command, done.stdout)
