"""Placeholder: the `tools` namespace (owned by the tools helper)."""

from __future__ import annotations

from typing import Any


def install(g: dict[str, Any]) -> None:
    pass
