"""Placeholder: skills, artifacts, state and deps namespaces (owned by the memory helper)."""

from __future__ import annotations

from typing import Any


def install(g: dict[str, Any]) -> None:
    pass
