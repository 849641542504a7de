"""The AST pass over a cell, made cheap for the usual case.

1. A substring scan for the rules' words (``subprocess``, ``system``, ``__globals__``...):
   a cell that contains none cannot break a rule, and costs a few microseconds.
2. Otherwise the cell is parsed once (top-level ``await`` allowed, as the worker runs it)
   and only the top-level statements on lines holding one of those words are walked.

A cell that does not parse is left alone: the worker reports the syntax error as usual.
This is defence in depth: code can always reach a name in ways no syntax check sees
(``getattr(m, "sy" + "stem")``); the sandbox stays the boundary.
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from .config import CodeChecksConfig

_FLAGS = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_GETATTRS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_WILD = re.compile(r"[*?\[\]]")


@dataclass(frozen=True, slots=True)
class Finding:
    lineno: int
    rule: str
    """``import``, ``call`` or ``attribute``."""
    name: str

    def __str__(self) -> str:
        what = {
            "import": f"imports {self.name!r} (a forbidden import)",
            "call": f"calls {self.name!r} (a forbidden call)",
            "attribute": f"uses the attribute {self.name!r} (a forbidden attribute)",
        }[self.rule]
        return f"line {self.lineno}: {what}"


class Checker:
    """The rules of one configuration, ready to scan cells."""

    def __init__(self, config: CodeChecksConfig) -> None:
        self.imports = tuple(config.forbidden_imports)
        self.calls = tuple(config.forbidden_calls)
        self.attributes = frozenset(config.forbidden_attributes)
        # The words a cell must contain to break a rule: each module's and call's last
        # name (up to a wildcard), each attribute. Distinctive enough that most cells hold
        # none and skip the parse.
        words: set[str] = set(self.attributes)
        for pattern in (*self.imports, *self.calls):
            last = pattern.rpartition(".")[2]
            literal = _WILD.split(last)[0]
            words.add(literal if len(literal) >= 3 else pattern.partition(".")[0])
        self.words = tuple(sorted(w for w in words if w))

    def scan(self, code: str) -> list[Finding]:
        found = [w for w in self.words if w in code]
        if not found:
            return []
        try:
            tree = compile(code, "<cell>", "exec", _FLAGS)
        except (SyntaxError, ValueError):
            return []
        aliases: dict[str, str] = {}
        for stmt in tree.body:  # top-level imports name things for the whole cell
            if isinstance(stmt, ast.Import | ast.ImportFrom):
                _note_aliases(stmt, aliases)
        # A name bound to a forbidden call (``from os import system as run``) is a word too.
        found += [
            alias
            for alias, target in aliases.items()
            if alias != target and any(fnmatchcase(target, p) for p in self.calls)
        ]
        lines = _lines_of(code, found)
        findings: list[Finding] = []
        for stmt in tree.body:
            end = stmt.end_lineno or stmt.lineno
            i = bisect.bisect_left(lines, stmt.lineno)
            if i < len(lines) and lines[i] <= end:
                self._walk(stmt, aliases, findings)
        findings.sort(key=lambda f: f.lineno)
        return findings

    def _walk(self, stmt: ast.stmt, aliases: dict[str, str], out: list[Finding]) -> None:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Import | ast.ImportFrom):
                _note_aliases(node, aliases)
                for module in _modules(node):
                    if self._forbidden_module(module):
                        out.append(Finding(node.lineno, "import", module))
            elif isinstance(node, ast.Call):
                name = _dotted(node.func, aliases)
                if name is not None and any(fnmatchcase(name, p) for p in self.calls):
                    out.append(Finding(node.lineno, "call", name))
                if (
                    isinstance(node.func, ast.Name)
                    and node.func.id in _GETATTRS
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and node.args[1].value in self.attributes
                ):
                    out.append(Finding(node.lineno, "attribute", str(node.args[1].value)))
                if (
                    name in ("__import__", "importlib.import_module")
                    and node.args
                    and isinstance(node.args[0], ast.Constant)
                    and isinstance(node.args[0].value, str)
                    and self._forbidden_module(node.args[0].value)
                ):
                    out.append(Finding(node.lineno, "import", node.args[0].value))
            elif isinstance(node, ast.Attribute) and node.attr in self.attributes:
                out.append(Finding(node.lineno, "attribute", node.attr))
            elif isinstance(node, ast.Name) and node.id[:2] == "__" and node.id in self.attributes:
                out.append(Finding(node.lineno, "attribute", node.id))

    def _forbidden_module(self, module: str) -> bool:
        return any(module == m or module.startswith(m + ".") for m in self.imports)


def _lines_of(code: str, words: list[str]) -> list[int]:
    """Sorted line numbers (1-based) holding any of ``words``."""
    starts = [0]
    pos = code.find("\n")
    while pos != -1:
        starts.append(pos + 1)
        pos = code.find("\n", pos + 1)
    lines: set[int] = set()
    for word in words:
        at = code.find(word)
        while at != -1:
            lines.add(bisect.bisect_right(starts, at))
            at = code.find(word, at + 1)
    return sorted(lines)


def _modules(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if node.level or not node.module:
        return []
    return [node.module, *(f"{node.module}.{a.name}" for a in node.names if a.name != "*")]


def _note_aliases(node: ast.Import | ast.ImportFrom, aliases: dict[str, str]) -> None:
    if isinstance(node, ast.Import):
        for a in node.names:
            if a.asname:
                aliases[a.asname] = a.name
            else:
                top = a.name.partition(".")[0]
                aliases.setdefault(top, top)
    elif node.module and not node.level:
        for a in node.names:
            aliases[a.asname or a.name] = f"{node.module}.{a.name}"


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    """``os.path.join`` for ``o.path.join`` after ``import os as o``; None if not a name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(aliases.get(node.id, node.id))
    return ".".join(reversed(parts))


__all__ = ["Checker", "Finding"]
