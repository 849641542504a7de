"""The names every session's code starts with: tools, skills, artifacts, state, deps."""

from __future__ import annotations

from typing import Any


def install(g: dict[str, Any]) -> None:
    from . import memory_ns, tools_ns

    tools_ns.install(g)
    memory_ns.install(g)
