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
    """No module outside eventckpt/journal/ imports a driver (apsw, psycopg), so driver errors cannot escape
    untranslated."""
    offenders = []
    for module, node in _nodes_outside_the_journal():
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        offenders += [f"{module} imports {n}" for n in names if n.split(".")[0] in ("apsw", "sqlite3", "psycopg", "psycopg_pool")]
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


# -- layers: no reach into another module's private names, no import cycles ---------------------------

_TUPLE_API = {"_make", "_replace", "_asdict", "_fields"}  # namedtuple's public API is spelled with "_"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _defined_names(tree: ast.AST) -> set[str]:
    """Every name a module defines: functions, classes, methods, and attributes it assigns."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            out.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            out.add(node.id)
        elif isinstance(node, ast.alias):
            out.add(node.asname or node.name.split(".")[0])
    return out


def test_no_module_calls_another_modules_private_names() -> None:
    """`x._name` is only used where `_name` is defined (its own module) or on self/cls: a module that
    needs another's internals gets a public name for them instead."""
    offenders = []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        own = _defined_names(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__") or name in _TUPLE_API or name in own:
                continue
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno} .{name}")
    assert offenders == []


def _runtime_imports(path: Path, modules: set[str]) -> set[str]:
    """The eventckpt modules `path` imports when it runs (imports under `if TYPE_CHECKING:` excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            typing_only.update(id(n) for child in node.body for n in ast.walk(child))
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
    return {m for m in out if m in modules and m != me}


def test_no_import_cycles() -> None:
    """The modules form layers: no chain of runtime imports leads from a module back to itself."""
    modules = {_module_name(p): p for p in _modules()}
    graph = {name: _runtime_imports(path, set(modules)) for name, path in modules.items()}
    cycles, state = [], {}

    def visit(node: str, stack: list[str]) -> None:
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [])
    assert cycles == []


def test_engine_neutral_code_uses_only_the_contract() -> None:
    """Outside eventckpt/journal/, code imports the journal package itself (contract and rows), never an
    engine's modules: diff, history, retention, verify, transfer and the LangGraph mapping run unchanged
    on every engine."""
    modules = {_module_name(p): p for p in _modules()}
    offenders = [f"{name} imports {dep}" for name, path in modules.items() if not name.startswith("eventckpt.journal")
                 for dep in _runtime_imports(path, set(modules))
                 if dep.startswith("eventckpt.journal.") and dep not in ("eventckpt.journal.rows", "eventckpt.journal.contract")]


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
