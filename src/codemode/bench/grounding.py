"""The hindsight check: a scripted agent may use only what its transcript has shown it.

The token benchmark's agents are scripts, so a sceptic's first question is whether the
script knows something the model would not (a result key, a tool name, an argument
name). Before each model turn the transcript asks this module which upstream-specific
facts the turn relies on, and refuses the turn when one of them has not appeared in what
the model has seen so far: the user's task and the results of earlier calls (plus, for a
direct agent, the tool definitions it was given up front).

Facts a piece of code relies on (found with ``ast``, so comments and strings in prints
do not count):

- each tool it calls, ``tools.<server>.<tool>`` (as ``server.tool``);
- each keyword argument name of such a call, and each key of a ``**{...}`` literal passed
  to one;
- each string used as a subscript (``res["attachment_id"]``) or as ``.get("key")``;
- each string compared with ``==``, ``!=`` or ``in`` (``status != "done"``).

A fact counts as seen when it occurs as a whole word in the seen text. Free choices of the
agent (a file name it invents, the words of a ``print``) are not facts.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_WORD = r"(?<![\w.]){}(?![\w])"


@dataclass(frozen=True, slots=True)
class Fact:
    kind: str  # tool | argument | key | value
    value: str

    def __str__(self) -> str:
        return f"{self.kind} {self.value!r}"


def _tool_name(node: ast.expr) -> str | None:
    """``server.tool`` for ``tools.server.tool`` or ``tools.server.tool.aio``."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not (isinstance(node, ast.Name) and node.id == "tools"):
        return None
    parts.reverse()
    if parts and parts[-1] == "aio":
        parts.pop()
    return ".".join(parts) if len(parts) == 2 else None


def code_facts(code: str) -> list[Fact]:
    """The upstream-specific facts ``code`` relies on, in order of appearance."""
    facts: list[Fact] = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Attribute):
            name = _tool_name(node)
            if name is not None:
                facts.append(Fact("tool", name))
        if isinstance(node, ast.Call) and _tool_name(node.func) is not None:
            for kw in node.keywords:
                if kw.arg is not None:
                    facts.append(Fact("argument", kw.arg))
                elif isinstance(kw.value, ast.Dict):
                    facts += [
                        Fact("argument", k.value)
                        for k in kw.value.keys
                        if isinstance(k, ast.Constant) and isinstance(k.value, str)
                    ]
        if isinstance(node, ast.Subscript):
            sl = node.slice
            if isinstance(sl, ast.Constant) and isinstance(sl.value, str):
                facts.append(Fact("key", sl.value))
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            facts.append(Fact("key", node.args[0].value))
        if isinstance(node, ast.Compare) and any(
            isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops
        ):
            for side in (node.left, *node.comparators):
                if isinstance(side, ast.Constant) and isinstance(side.value, str):
                    facts.append(Fact("value", side.value))
    return list(dict.fromkeys(facts))


def call_facts(name: str, args: dict[str, Any]) -> list[Fact]:
    """What a direct tool call relies on: the tool's name and its argument names."""
    return [Fact("tool", name), *(Fact("argument", k) for k in args)]


def unseen(facts: Iterable[Fact], seen: str) -> list[Fact]:
    """The facts that do not occur as a whole word in ``seen``."""
    return [f for f in facts if not re.search(_WORD.format(re.escape(f.value)), seen)]
