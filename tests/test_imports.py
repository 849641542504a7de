"""The import graph of ``src/``, read with ``ast``: no circles, and each layer imports only
what it may.

What counts as an import of module ``m``: every ``import``/``from ... import`` statement at
module level of ``m``, including those under ``if TYPE_CHECKING:`` and inside ``try:``;
not those inside functions or classes (they run later, on use). Each edge goes to the
module named: ``from a import b`` is an edge to ``a.b`` when ``a.b`` is a module of ``src``,
else to ``a``; relative imports are resolved; a package's ``__init__`` is an edge only when
named (``import a.b`` is an edge to ``a.b``, not to ``a``). Third-party modules are not
nodes.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def module_level_imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    def walk(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If | ast.Try | ast.ExceptHandler):
            for child in ast.iter_child_nodes(node):
                yield from walk(child)

    for stmt in tree.body:
        yield from walk(stmt)


def targets(name: str, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The module names an import statement of module ``name`` reaches (any, not only ours)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        package = name.split(".") if MODULES[name].name == "__init__.py" else name.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        reached = {t for node in module_level_imports(tree) for t in targets(name, node)}
        edges[name] = (reached & set(MODULES)) - {name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def all_imports(name: str) -> set[str]:
    """Top-level packages a module imports anywhere (functions included)."""
    tree = ast.parse(MODULES[name].read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            out |= {t.split(".")[0] for t in targets(name, node)}
    return out


def test_there_is_no_circle_of_module_level_imports() -> None:
    assert len(MODULES) > 60
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_only_the_mcp_source_the_server_and_the_benchmark_import_the_mcp_sdk() -> None:
    allowed = ("codemode.tools.sources.mcp", "codemode.server", "codemode.bench")
    users = {m for m in MODULES if all_imports(m) & {"mcp", "mcp_types"}}
    assert users, "the scan found no MCP import at all"
    assert {m for m in users if not m.startswith(allowed)} == set()


def test_the_worker_imports_only_the_standard_library() -> None:
    for name in (m for m in MODULES if m.startswith("codemode_worker")):
        outside = all_imports(name) - set(sys.stdlib_module_names) - {"codemode_worker"}
        assert outside == set(), f"{name} imports {outside}"


def test_no_in_tree_module_is_imported_by_string_or_guarded_as_optional() -> None:
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in (
                "importlib.import_module",
                "import_module",
                "__import__",
            ):
                raise AssertionError(f"{name}:{node.lineno}: imports a module by string")
            if isinstance(node, ast.Try) and any(
                "ImportError" in ast.unparse(h.type or ast.Constant(None)) for h in node.handlers
            ):
                guarded = {
                    t
                    for stmt in node.body
                    if isinstance(stmt, ast.Import | ast.ImportFrom)
                    for t in targets(name, stmt)
                }
                ours = {t for t in guarded if t.split(".")[0] in ("codemode", "codemode_worker")}
                assert not ours, f"{name}:{node.lineno}: {ours} guarded as if optional"
