"""The module boundaries DESIGN.md names: only eventckpt/journal/ speaks SQL to the engine, and modules
stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import eventckpt

PACKAGE = Path(eventckpt.__file__).parent
JOURNAL = PACKAGE / "journal"


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _nodes_outside_the_journal() -> list[tuple[str, ast.AST]]:
    """(module, node) for every AST node of every module outside eventckpt/journal/."""
    out = []
    for path in _modules():
        if JOURNAL not in path.parents:
            name = str(path.relative_to(PACKAGE))
            out += [(name, node) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))]
    return out


def test_only_the_journal_imports_the_driver() -> None:
    """No module outside eventckpt/journal/ imports apsw, so driver errors cannot escape untranslated."""
    offenders = []
    for module, node in _nodes_outside_the_journal():
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        offenders += [f"{module} imports {n}" for n in names if n.split(".")[0] in ("apsw", "sqlite3")]
    assert offenders == []


def test_only_the_journal_executes_statements() -> None:
    """No module outside eventckpt/journal/ calls .execute/.executemany or touches a connection."""
    offenders = [f"{module}:{node.lineno} .{node.attr}" for module, node in _nodes_outside_the_journal()
                 if isinstance(node, ast.Attribute) and node.attr in ("execute", "executemany", "conn")]
    assert offenders == []


def test_modules_stay_small() -> None:
    """Every module is under 800 lines (one concept per module)."""
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in _modules()}
    assert {name: n for name, n in sizes.items() if n >= 800} == {}


NAMEDTUPLE_API = ("_replace", "_asdict", "_make", "_fields")  # public, underscored only to avoid field names


def test_the_viewer_uses_only_public_names() -> None:
    """eventckpt/serve/ is an edge on the public API: it reads no other object's private names (`x._y`
    where x is not self or cls) and never touches a journal or a connection."""
    offenders = []
    for path in sorted((PACKAGE / "serve").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute):
                owner = node.value.id if isinstance(node.value, ast.Name) else None
                if node.attr.startswith("_") and not node.attr.startswith("__") and owner not in ("self", "cls") \
                        and node.attr not in NAMEDTUPLE_API:
                    offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
                if node.attr in ("journal", "conn", "_journal"):
                    offenders.append(f"{path.name}:{node.lineno} .{node.attr}")
            elif isinstance(node, ast.ImportFrom) and node.module and "journal" in node.module:
                offenders.append(f"{path.name}:{node.lineno} imports {node.module}")
    assert offenders == []
