"""README.md tells the truth: its set-up commands are the ones CI runs, and its examples run."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import eventckpt

from .conftest import run_cli_example

from .test_readme_queries import is_expression, literal

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_setup_commands_are_what_ci_runs() -> None:
    """The two set-up commands in README.md appear verbatim in .ci/run."""
    commands = re.findall(r"```bash\n(python3 -m venv .*?)\n```", README)
    assert len(commands) == 2
    ci = (ROOT / ".ci" / "run").read_text()
    for command in commands:
        assert command in ci.splitlines(), command


def test_quick_start_runs(tmp_path: Path, monkeypatch) -> None:
    """The quick start example runs as written."""
    monkeypatch.chdir(tmp_path)
    block = re.search(r"## Quick start\n\n```python\n(.*?)```", README, re.S)
    assert block
    exec(compile(block.group(1), "README quick start", "exec"), {})
    with eventckpt.open(tmp_path / "agent.db") as store:
        task = store.stream("task-1")
        assert task.version == 3 and task.state(3) == task.state(1)
        assert task.get(2).token_usage == {"input_tokens": 200, "output_tokens": 40}


NOTHING = object()


def with_checks(code: str, check: str) -> str:
    """The block with every `expression  # literal` line turned into a check of that result (a comment
    that is prose, not a literal, is left alone)."""
    lines = []
    for line in code.splitlines():
        expr, _, comment = line.partition("  # ")
        try:
            expected = literal(comment) if comment and expr.strip() else NOTHING
        except AssertionError:
            expected = NOTHING
        if expected is not NOTHING and is_expression(expr.strip()):
            indent = expr[: len(expr) - len(expr.lstrip())]
            lines.append(f"{indent}{check}(({expr.strip()}), {expected!r}, {expr.strip()!r})")
        else:
            lines.append(line)
    return "\n".join(lines)


def readme_steps() -> list[tuple[str, str]]:
    """README's runnable examples in document order: ("python", code), ("shell", command, expected output
    or None) and ("cli", command), each as a newcomer would paste it."""
    found: list[tuple[int, tuple]] = []
    for m in re.finditer(r"```(bash|python)\n(.*?)```", README, re.S):
        kind, body = m.groups()
        if kind == "python":
            # LangGraph's two lines go into the reader's own program; the PostgreSQL example needs a server
            # (tests/test_readme_postgres.py runs it on one)
            if "builder.compile" not in body and "postgresql://" not in body:
                found.append((m.start(), ("python", body)))
        elif body.startswith("python3 -m venv"):
            if body.rstrip().endswith("eventckpt demo agent.db"):  # the set-up: install, then the demo
                found.append((m.start(), ("cli", "eventckpt demo agent.db")))
        elif body.startswith("$ "):
            for chunk in body.strip().split("\n\n"):
                command, _, expected = chunk.partition("\n")
                found.append((m.start(), ("shell", command[2:], expected)))
        elif body.startswith("sqlite3 "):
            found.append((m.start(), ("shell", body.strip(), None)))
    table = README.index("| command | what it does |")
    for command in re.findall(r"^\| `(eventckpt [^`]*)` \|", README[table:].split("\n\n", 1)[0], re.M):
        found.append((table, ("cli", command)))
    return [step for _, step in sorted(found, key=lambda item: item[0])]


def test_readme_examples_run_in_order_in_one_directory(tmp_path: Path, monkeypatch, capsys) -> None:
    """README's examples, pasted in order into one directory (the set-up's demo, the quick start, the
    query example, the sqlite3 queries with the output shown, the command table, the agent example),
    all run and show what README says: no example needs a fresh file."""
    monkeypatch.chdir(tmp_path)
    checked: list[str] = []

    def check(got: Any, want: Any, expr: str) -> None:
        assert got == want, f"{expr}: {got!r} != {want!r}"
        checked.append(expr)

    steps = readme_steps()
    assert [s[0] for s in steps].count("python") == 4 and [s[0] for s in steps].count("cli") == 18
    for step in steps:
        if step[0] == "python":
            exec(compile(with_checks(step[1], "_check"), "README example", "exec"), {"_check": check})
        elif step[0] == "cli":
            status, err = run_cli_example(step[1])
            assert status == 0, (step[1], err)
        else:
            done = subprocess.run(["bash", "-c", step[1]], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, (step[1], done.stderr)
            assert step[2] is None or done.stdout.rstrip("\n") == step[2], (step[1], done.stdout)
    assert len(checked) >= 8, checked
    assert "agent-1 v1 'planned' | manual | " in capsys.readouterr().out


def test_tracked_state_example_runs(tmp_path: Path, monkeypatch) -> None:
    """The tracked-state example runs as written and stores what its comments say."""
    monkeypatch.chdir(tmp_path)
    block = re.search(r"### Tracked state\n\n```python\n(.*?)```", README, re.S)
    assert block
    exec(compile(block.group(1), "README tracked state", "exec"), {})
    with eventckpt.open(tmp_path / "agent.db") as store:
        task = store.stream("chat-1")
        assert task.version == 3 and task.get(2).token_usage == {"input_tokens": 90}
        assert [(c.path, c.new) for c in task.diff(1, 2).changes] == [
            (("messages", 0, "content"), "hi!"), (("messages", 1), {"role": "assistant", "content": "calling search"}),
            (("scratch", "searches"), 1)]
        assert task.state() == {"messages": [], "scratch": {}}
