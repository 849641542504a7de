"""The AST pass over a cell, made cheap: parsing a 200-line cell alone costs about the
whole budget (1 ms), so only the statements that can break a rule are parsed.

1. A substring scan for the rules' words (``subprocess``, ``system``, ``__globals__``...):
   a cell that contains none cannot break a rule (a few microseconds).
2. Where are those words as code, not in strings or comments (``lex``: regular
   expressions, no parse)? Nowhere: no finding. Words that matter inside strings
   (``getattr(x, "__globals__")``, ``__import__("socket")``) are reached through the
   call, whose name is code.
3. The top-level statements holding them, and every ``import`` (for aliases), are parsed
   together in one ``compile``, each at its own line number (a line's ``;``-separated
   statements one by one). When that guess of statement bounds does not parse, the
   whole cell is parsed instead.
4. One walk of those statements, one handler per node type.

A cell whose statements that hold the words do not parse is left alone: the worker
reports the syntax error as usual. Results are kept for the last few cells (a cell run
again is not checked again). This is defence in depth: code can always reach a name in
ways no syntax check sees (``getattr(m, "sy" + "stem")``); the sandbox stays the boundary.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import translate

from .config import CodeChecksConfig
from .lex import Layout, layout

_FLAGS = ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_GETATTRS = ("getattr", "setattr", "delattr", "hasattr")
_IMPORTERS = ("__import__", "import_module")
_WILD = re.compile(r"[*?\[\]]")
_CACHED = 64

Pieces = dict[tuple[int, int], tuple[int, int]]
"""{(first line, statement on that line): (start, end) offsets} of the code to parse."""

# An import of plain names at the start of a line, up to a ``;``, a comment or the end of
# the line: read by this expression, not parsed (a cell of imports would otherwise cost a
# parse of every line).
_NAME = r"[^\W\d]\w*"
_DOTTED = rf"{_NAME}(?:[ \t]*\.[ \t]*{_NAME})*"
_AS = rf"(?:[ \t]+as[ \t]+{_NAME})?"
_PLAIN_IMPORT = re.compile(
    rf"^[ \t]*(?P<kw>import[ \t]+(?P<names>{_DOTTED}{_AS}(?:[ \t]*,[ \t]*{_DOTTED}{_AS})*)"
    rf"|(?P<kw2>from)[ \t]+(?P<module>{_DOTTED})[ \t]+import[ \t]+"
    rf"(?P<items>{_NAME}{_AS}(?:[ \t]*,[ \t]*{_NAME}{_AS})*))[ \t]*(?=[;\#\r\n]|\Z)",
    re.MULTILINE,
)
_AS_SPLIT = re.compile(r"[ \t]+as[ \t]+")
_BLANKS = re.compile(r"[ \t]+")


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


Handler = Callable[[ast.AST, dict[str, str], list[Finding]], None]


class Checker:
    """The rules of one configuration, ready to scan cells."""

    def __init__(self, config: CodeChecksConfig) -> None:
        self.imports = tuple(config.forbidden_imports)
        self.calls = tuple(config.forbidden_calls)
        self.attributes = frozenset(config.forbidden_attributes)
        # The call globs as one expression: one match per name instead of one per glob.
        globs = "|".join(f"(?:{translate(p)})" for p in self.calls) or r"(?!)"
        self._forbidden_call = re.compile(globs).match
        modules = "|".join(re.escape(m) for m in self.imports) or r"(?!)"
        self._forbidden_module = re.compile(rf"(?:{modules})(?:\.|\Z)").match
        # The words a cell must contain to break a rule: each module's and call's last
        # name (up to a wildcard: a prefix, ``exec*``), each attribute.
        words: set[str] = set(self.attributes)
        prefixes: set[str] = set()
        for pattern in (*self.imports, *self.calls):
            last = pattern.rpartition(".")[2]
            literal = _WILD.split(last)[0]
            if len(literal) >= 3:
                (words if literal == last else prefixes).add(literal)
            else:
                words.add(pattern.partition(".")[0])
        self.words = tuple(sorted(w for w in words | prefixes if w))
        self._prefixes = frozenset(prefixes)
        # A word that is itself a glob (``*``) leaves nothing to look for: parse every cell.
        self._always = any(_WILD.search(w) for w in self.words)
        triggers: list[str] = []
        if self.attributes:
            triggers += _GETATTRS
        if self.imports:
            triggers += _IMPORTERS
        self._triggers = tuple(triggers)
        self._patterns: dict[frozenset[str], re.Pattern[str]] = {}
        self._dispatch: dict[type, Handler] = {
            ast.Import: self._on_import,
            ast.ImportFrom: self._on_import,
            ast.Call: self._on_call,
            ast.Attribute: self._on_attribute,
            ast.Name: self._on_name,
        }
        self._seen: dict[str, tuple[Finding, ...]] = {}
        self._module_verdicts: dict[str, bool] = {}

    def scan(self, code: str) -> list[Finding]:
        seen = self._seen.get(code)
        if seen is None:
            # A statement may be read twice (a plain import inside a parsed block).
            seen = tuple(sorted(dict.fromkeys(self._scan(code)), key=lambda f: f.lineno))
            if len(self._seen) >= _CACHED:
                self._seen.clear()  # simplest bound, and safe if threads share a checker
            self._seen[code] = seen
        return list(seen)

    def _scan(self, code: str) -> list[Finding]:
        if self._always:
            return self._scan_whole(code, None)
        present = [w for w in self.words if w in code]
        if not present:
            return []
        lay = layout(code)
        findings: list[Finding] = []
        aliases: dict[str, str] = {}
        text, import_lines = self._plain_imports(lay, aliases, findings)
        renamed = self._renamed(aliases, ())
        hits, rules = self._code_hits(lay, text, (*present, *self._triggers, "import", *renamed))
        if not rules:
            return findings  # the other words are all in strings and comments
        starts = lay.statement_starts()
        pieces: Pieces = {}
        self._add_pieces(lay, starts, hits, pieces)
        tree = _parse(lay, pieces)
        if tree is None:
            return self._scan_whole(code, set(hits) | import_lines)
        nodes = _nodes(tree.body)
        _note_all(nodes, aliases)
        more = self._renamed(aliases, renamed)
        if more:
            extra: Pieces = {}
            self._add_pieces(lay, starts, self._code_hits(lay, text, more)[0], extra)
            extra = {k: v for k, v in extra.items() if k not in pieces}
            if extra:
                again = _parse(lay, extra)
                if again is None:
                    return self._scan_whole(code, None)
                nodes += _nodes(again.body)
        return findings + self._check(nodes, aliases)

    def _renamed(self, aliases: dict[str, str], known: Iterable[str]) -> list[str]:
        """Names bound to a forbidden call (``from os import system as run``): words too."""
        forbidden = {t for t in set(aliases.values()) if self._forbidden_call(t)}
        return [a for a, t in aliases.items() if t in forbidden and a != t and a not in known]

    def _plain_imports(
        self, lay: Layout, aliases: dict[str, str], findings: list[Finding]
    ) -> tuple[str, set[int]]:
        """Reads the plain imports (``_PLAIN_IMPORT``); returns the code with them blanked
        out (so their words are not looked at again) and their lines."""
        code = lay.code
        parts: list[str] = []
        lines: set[int] = set()
        done = 0
        line, counted = 1, 0  # matches come in order: count newlines as they pass
        starts, ends = lay.masked_starts, lay.masked_ends
        forbidden = self._module_verdicts
        for m in _PLAIN_IMPORT.finditer(code):
            names = m["names"]
            kw = m.start("kw") if names is not None else m.start("kw2")
            i = bisect.bisect_right(starts, kw) - 1
            if i >= 0 and kw < ends[i]:
                continue  # inside a string
            line += code.count("\n", counted, kw)
            counted = kw
            lines.add(line)
            if names is not None:
                for name, asname in _names(names):
                    if asname:
                        aliases[asname] = name
                    else:
                        top = name.partition(".")[0]
                        aliases.setdefault(top, top)
                    if forbidden.get(name) or (
                        name not in forbidden and self._module_verdict(name)
                    ):
                        findings.append(Finding(line, "import", name))
            else:
                module = _BLANKS.sub("", m["module"])
                if self._forbidden_module(module):
                    findings.append(Finding(line, "import", module))
                for name, asname in _names(m["items"]):
                    aliases[asname or name] = f"{module}.{name}"
                    if self._forbidden_module(f"{module}.{name}"):
                        findings.append(Finding(line, "import", f"{module}.{name}"))
            start, end = m.span()
            parts += (code[done:start], " " * (end - start))
            done = end
        if not parts:
            return code, lines
        parts.append(code[done:])
        return "".join(parts), lines

    def _module_verdict(self, name: str) -> bool:
        """Whether importing ``name`` is forbidden, remembered (a cell repeats its modules)."""
        verdict = self._forbidden_module(name) is not None
        if len(self._module_verdicts) < 4096:
            self._module_verdicts[name] = verdict
        return verdict

    def _check(self, nodes: list[ast.AST], aliases: dict[str, str]) -> list[Finding]:
        findings: list[Finding] = []
        dispatch = self._dispatch
        for node in nodes:
            handler = dispatch.get(type(node))
            if handler is not None:
                handler(node, aliases, findings)
        return findings

    def _code_hits(
        self, lay: Layout, code: str, words: Iterable[str]
    ) -> tuple[dict[int, list[int]], bool]:
        """({line: offsets} of ``words`` found as code in ``code`` (the cell, or the cell
        with its plain imports blanked), not in strings or comments; whether any of them
        is other than ``import``)."""
        hits: dict[int, list[int]] = {}
        rules = False
        starts, ends, offsets = lay.masked_starts, lay.masked_ends, lay.line_offsets
        right = bisect.bisect_right
        for m in self._pattern(frozenset(words)).finditer(code):
            pos = m.start()
            if pos and _in_name(code[pos - 1]):
                continue  # inside a longer name (``retrieval`` is not ``eval``)
            i = right(starts, pos) - 1
            if i >= 0 and pos < ends[i]:
                continue
            line = right(offsets, pos)
            got = hits.get(line)
            if got is None:
                hits[line] = [pos]
            else:
                got.append(pos)
            if not rules:
                rules = m.group() != "import"
        return hits, rules

    def _pattern(self, words: frozenset[str]) -> re.Pattern[str]:
        """Identifiers ending with the words (or, for prefixes, continuing them); that
        they also start with them is checked by the caller (``_in_name``)."""
        got = self._patterns.get(words)
        if got is None:
            alts = [
                re.escape(w) + (r"\w*" if w in self._prefixes else r"(?!\w)")
                for w in sorted(words, key=len, reverse=True)
            ]
            # No leading ``(?<!\w)``: it would cost ``re`` its fast scan for the first
            # letters (4x slower); callers check the character before instead.
            got = re.compile("|".join(alts))
            if len(self._patterns) < 256:
                self._patterns[words] = got
        return got

    def _add_pieces(
        self,
        lay: Layout,
        starts: list[int],
        hits: dict[int, list[int]],
        pieces: Pieces,
    ) -> None:
        """For each line of ``hits``, the statement holding it: its top-level statement or,
        when that is one line, those of its ``;``-separated statements that hold a hit (a
        ``;`` outside strings and comments separates statements: the grammar has no other
        use for it)."""
        code, offsets, masked = lay.code, lay.line_offsets, lay.masked
        lines, count = len(offsets), len(starts)
        for line, positions in hits.items():
            i = bisect.bisect_right(starts, line) - 1
            first = starts[i] if i >= 0 else 1
            last = starts[i + 1] - 1 if i + 1 < count else lines
            start = offsets[first - 1]
            end = offsets[last] - 1 if last < lines else len(code)
            if first != last:
                pieces[(first, 0)] = (start, end)
                continue
            semi = code.find(";", start, end)
            while semi != -1 and masked(semi):
                semi = code.find(";", semi + 1, end)
            if semi == -1:
                pieces[(line, 0)] = (start, end)
                continue
            n = 0
            while True:
                stop = end if semi == -1 else semi
                if any(start <= pos < stop for pos in positions):
                    pieces[(line, n)] = (start, stop)
                if semi == -1:
                    break
                start, n = semi + 1, n + 1
                semi = code.find(";", start, end)
                while semi != -1 and masked(semi):
                    semi = code.find(";", semi + 1, end)

    def _scan_whole(self, code: str, lines: set[int] | None) -> list[Finding]:
        """The fallback: the whole cell parsed, its statements on ``lines`` (None: all)."""
        try:
            tree = compile(code, "<cell>", "exec", _FLAGS)
        except (SyntaxError, ValueError):
            return []
        body = tree.body
        if lines is not None:
            wanted = sorted(lines)
            body = [s for s in body if _holds(wanted, s.lineno, s.end_lineno or s.lineno)]
        nodes = _nodes(body)
        aliases: dict[str, str] = {}
        _note_all(nodes, aliases)
        return self._check(nodes, aliases)

    # -- one handler per node type ---------------------------------------------------
    def _on_import(self, node: ast.AST, aliases: dict[str, str], out: list[Finding]) -> None:
        assert isinstance(node, ast.Import | ast.ImportFrom)
        for module in _modules(node):
            if self._forbidden_module(module):
                out.append(Finding(node.lineno, "import", module))

    def _on_call(self, node: ast.AST, aliases: dict[str, str], out: list[Finding]) -> None:
        assert isinstance(node, ast.Call)
        func, args = node.func, node.args
        name = _dotted(func, aliases)
        if name is not None and self._forbidden_call(name):
            out.append(Finding(node.lineno, "call", name))
        if (
            isinstance(func, ast.Name)
            and func.id in _GETATTRS
            and len(args) >= 2
            and isinstance(args[1], ast.Constant)
            and args[1].value in self.attributes
        ):
            out.append(Finding(node.lineno, "attribute", str(args[1].value)))
        if (
            name in ("__import__", "importlib.import_module")
            and args
            and isinstance(args[0], ast.Constant)
            and isinstance(args[0].value, str)
            and self._forbidden_module(args[0].value)
        ):
            out.append(Finding(node.lineno, "import", args[0].value))

    def _on_attribute(self, node: ast.AST, aliases: dict[str, str], out: list[Finding]) -> None:
        assert isinstance(node, ast.Attribute)
        if node.attr in self.attributes:
            out.append(Finding(node.lineno, "attribute", node.attr))

    def _on_name(self, node: ast.AST, aliases: dict[str, str], out: list[Finding]) -> None:
        assert isinstance(node, ast.Name)
        if node.id[:2] == "__" and node.id in self.attributes:
            out.append(Finding(node.lineno, "attribute", node.id))


def _in_name(ch: str) -> bool:
    """Whether ``ch`` belongs to a name (then a word right after it is not a whole name)."""
    return ch.isalnum() or ch == "_"


def _parse(lay: Layout, pieces: Pieces) -> ast.Module | None:
    """The pieces as one module, each at its own line number; None if it does not parse."""
    code, offsets = lay.code, lay.line_offsets
    out: list[str] = []
    cursor = 1  # the line the text built so far ends on
    for (line, n), (start, end) in sorted(pieces.items()):
        text = code[start:end]
        if n and out and line == cursor:
            out.append("; ")  # another statement of the same line
        else:
            out.append("\n" * (line - cursor))
            cursor = line
        out.append(text if start == offsets[line - 1] else text.lstrip())
        cursor += text.count("\n")
    try:
        tree = compile("".join(out), "<cell>", "exec", _FLAGS)
    except (SyntaxError, ValueError):
        return None
    assert isinstance(tree, ast.Module)
    return tree


def _nodes(body: list[ast.stmt]) -> list[ast.AST]:
    """Every node of ``body`` (an import needs no walk)."""
    nodes: list[ast.AST] = []
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            nodes.append(stmt)
        else:
            nodes.extend(ast.walk(stmt))
    return nodes


def _note_all(nodes: list[ast.AST], aliases: dict[str, str]) -> None:
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            _note_aliases(node, aliases)


def _names(text: str) -> list[tuple[str, str | None]]:
    """``a . b as c, d`` -> [("a.b", "c"), ("d", None)]."""
    out: list[tuple[str, str | None]] = []
    for part in text.split(",") if "," in text else (text,):
        words = part.split()
        if len(words) == 1:
            out.append((words[0], None))
        elif len(words) == 3 and words[1] == "as":
            out.append((words[0], words[2]))
        else:  # spaces around dots
            name, *asname = _AS_SPLIT.split(part.strip(), maxsplit=1)
            out.append((_BLANKS.sub("", name), asname[0] if asname else None))
    return out


def _holds(lines: list[int], first: int, last: int) -> bool:
    i = bisect.bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


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
