"""README.md's query examples run as written: the Python one with the results its comments show, and
every `sqlite3 agent.db "SELECT ..."` through the real sqlite3 program on a real store."""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def literal(comment: str) -> Any:
    """The Python literal a comment starts with ('# [6, 5, 4]: newest first' -> [6, 5, 4])."""
    for candidate in [comment] + [comment.split(sep)[0] for sep in (": ", " (", ", ")]:
        try:
            return ast.literal_eval(candidate.strip())
        except (ValueError, SyntaxError):
            continue
    raise AssertionError(f"no literal in comment {comment!r}")


def is_expression(code: str) -> bool:
    try:
        ast.parse(code, mode="eval")
    except SyntaxError:
        return False
    return True


def test_python_example_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each commented expression of the log/history/diff/search example evaluates to what its comment says."""
    monkeypatch.chdir(tmp_path)
    block = re.search(r"## Log, history, diff and search\n.*?```python\n(.*?)```", README, re.S)
    assert block
    checked = []
    lines = []
    for line in block.group(1).splitlines():
        code, _, comment = line.partition("  # ")
        if comment and code.strip() and is_expression(code.strip()):
            indent = code[: len(code) - len(code.lstrip())]
            lines.append(f"{indent}_check(({code.strip()}), {literal(comment)!r}, {code.strip()!r})")
        else:
            lines.append(line)

    def check(got: Any, want: Any, expr: str) -> None:
        assert got == want, f"{expr}: {got!r} != {want!r}"
        checked.append(expr)

    exec(compile("\n".join(lines), "README log/history/diff", "exec"), {"_check": check})
    assert len(checked) == 7


def sqlite_examples() -> list[tuple[str, str]]:
    section = README.split("## Querying the file with sqlite3", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block
    out = []
    for chunk in block.group(1).strip().split("\n\n"):
        command, _, expected = chunk.partition("\n")
        assert command.startswith("$ sqlite3 agent.db ")
        out.append((command[2:], expected))
    return out


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """agent.db as `eventckpt demo agent.db` leaves it (run as a real process)."""
    where = tmp_path_factory.mktemp("readme")
    subprocess.run([sys.executable, "-m", "eventckpt", "demo", "agent.db"], cwd=where, check=True, capture_output=True)
    return where


@pytest.mark.parametrize("command,expected", sqlite_examples())
def test_sqlite3_examples(demo_store: Path, command: str, expected: str) -> None:
    """The stock sqlite3 program, run through the shell as a reader would, prints what README.md shows."""
    assert shutil.which("sqlite3"), "the sqlite3 program is missing (.ci/run installs it)"
    result = subprocess.run(["bash", "-c", command], cwd=demo_store, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip("\n") == expected


def test_there_are_enough_examples() -> None:
    """README shows a handful of queries, covering every view."""
    examples = sqlite_examples()
    assert len(examples) >= 6
    for view in ("checkpoints", "changes", "path_history", "stream_heads"):
        assert any(f"FROM {view}" in command for command, _ in examples), view


def test_the_path_range_example_leaves_out_sibling_keys(tmp_path: Path) -> None:
    """README's sqlite3 query for a path and everything below it returns no sibling key ($.plan2, $.planB)."""
    import eventckpt

    (command,) = [c for c, _ in sqlite_examples() if "'$.plan" in c]
    with eventckpt.open(str(tmp_path / "agent.db")) as store:
        demo = store.stream("demo-retry")
        demo.save({"plan": ["search flights"], "plan2": "fallback", "planB": {"x": 1}, "plan-b": 0})
        demo.save({"plan": {"steps": ["search trains"]}, "plan2": "other", "planB": {"x": 2}, "plan-b": 1})
    result = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["demo-retry|1|set|$.plan", "demo-retry|2|set|$.plan"]
