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


SIGNATURES = {
    "register_migration": eventckpt.register_migration,
    "stream.rollback_on_error": eventckpt.CheckpointStore.rollback_on_error,
    "ToolRegistry().register": eventckpt.ToolRegistry.register,
    "stream.tool_calls": eventckpt.CheckpointStore.tool_calls,
    "ctx.snapshot": eventckpt.Context.snapshot,
}


def test_agent_integration_signatures_mark_keyword_only_parameters() -> None:
    """The signatures README's Agent integrations section writes put `*` exactly where the code does."""
    import ast
    import inspect

    section = " ".join(README.split("## Agent integrations", 1)[1].split("\n## ", 1)[0].split())
    for written, fn in SIGNATURES.items():
        found = re.search(r"`(?:with )?" + re.escape(written) + r"\((.*?)\)", section)
        assert found, written
        shown = ast.parse(f"def f({found.group(1)}): pass").body[0].args  # type: ignore[attr-defined]
        real = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        assert [a.arg for a in shown.args] == [p.name for p in real if p.kind is p.POSITIONAL_OR_KEYWORD], written
        assert [a.arg for a in shown.kwonlyargs] == [p.name for p in real if p.kind is p.KEYWORD_ONLY], written
