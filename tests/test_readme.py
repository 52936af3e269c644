"""README.md tells the truth: its set-up commands are the ones CI runs, and its examples run."""

from __future__ import annotations

import re
from pathlib import Path

import eventckpt

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


def test_tracked_state_example_runs(tmp_path: Path, monkeypatch) -> None:
    """The tracked-state example runs as written and stores what its comments say."""
    monkeypatch.chdir(tmp_path)
    block = re.search(r"### Tracked state\n\n```python\n(.*?)```", README, re.S)
    assert block
    exec(compile(block.group(1), "README tracked state", "exec"), {})
    with eventckpt.open(tmp_path / "agent.db") as store:
        task = store.stream("task-2")
        assert task.version == 3 and task.get(2).token_usage == {"input_tokens": 90}
        assert [(c.path, c.new) for c in task.diff(1, 2).changes] == [
            (("messages", 0, "content"), "hi!"), (("messages", 1), {"role": "assistant", "content": "calling search"}),
            (("scratch", "searches"), 1)]
        assert task.state() == {"messages": [], "scratch": {}}
