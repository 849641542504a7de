"""Packages for the agent's code, in a per-workspace directory (never codemode's own env)."""

from __future__ import annotations

from .manager import Deps, check_spec

__all__ = ["Deps", "check_spec"]
