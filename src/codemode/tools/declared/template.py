"""``{name}`` placeholders in argv items, URL paths, query values and JSON bodies.

Deliberately tiny: a placeholder is ``{identifier}`` naming a declared parameter (``{{``
and ``}}`` are literal braces); no attribute access, indexing or format specs, so a
template can only ever insert a parameter's value. Templates are checked when the
definition loads (every placeholder names a parameter), rendered at call time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ...errors import ToolArgumentError

_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


def placeholders(template: str) -> list[str]:
    """The parameter names ``template`` uses; ValueError for a malformed one."""
    names: list[str] = []
    for m in _TOKEN.finditer(template):
        text = m.group(0)
        if text in ("{{", "}}"):
            continue
        name = m.group(1)
        if name is None:
            raise ValueError(f"unbalanced brace in {template!r} (write {{{{ or }}}})")
        if not name.isidentifier():
            raise ValueError(f"{{{name}}} in {template!r} is not a parameter name")
        names.append(name)
    return names


def whole(template: str) -> str | None:
    """The parameter name when ``template`` is exactly one placeholder (``"{x}"``)."""
    m = re.fullmatch(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", template)
    return m.group(1) if m else None


def render(template: str, values: Mapping[str, Any], text: Any = str) -> str:
    """``template`` with each placeholder replaced by ``text(value)``."""

    def sub(m: re.Match[str]) -> str:
        token = m.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        return str(text(values[m.group(1)]))

    return _TOKEN.sub(sub, template)


def scalar_text(value: Any, *, where: str) -> str:
    """A parameter value as text: strings as they are, numbers and booleans as JSON."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    raise ToolArgumentError(f"{where}: a {type(value).__name__} cannot be placed in text here")


__all__ = ["placeholders", "render", "scalar_text", "whole"]
