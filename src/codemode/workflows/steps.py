"""Workflow step kinds (placeholder: the engine lands with the workflows capability)."""

from __future__ import annotations

BUILTIN_KINDS: tuple[str, ...] = (
    "code",
    "tool",
    "skill",
    "task",
    "ask",
    "form",
    "if",
    "foreach",
    "set",
)
"""The keys that name a step's kind in a workflow file; plugins may not reuse them."""
