"""README.md's "Agent integrations" example runs as written and leaves what it says."""

from __future__ import annotations

import re
from pathlib import Path

import eventckpt

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_agent_integrations_example_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    """The example runs in a fresh directory; its summary line and pruned stream are as commented."""
    monkeypatch.chdir(tmp_path)
    block = re.search(r"## Agent integrations\n.*?```python\n(.*?)```", README, re.S)
    assert block
    exec(compile(block.group(1), "README agent integrations", "exec"), {})
    assert "agent-1 v1 'planned' | manual | " in capsys.readouterr().out
    with eventckpt.open(tmp_path / "agents.db") as store:
        stream = store.stream("agent-1")
        # v1 manual, v2-v3 by the decorator (auto), v4 with the tool call, v5 the undo record; v2 pruned
        assert stream.list_versions() == [1, 3, 4, 5]
        assert [stream.get(v).auto for v in stream.list_versions()] == [False, True, False, False]
        assert store.stream("session-1").version == 2  # a save, then the tracked edit
        assert store.stream("session-1").state() == {"messages": ["hi", "there"]}
