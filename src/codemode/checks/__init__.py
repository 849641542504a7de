"""Code checks before a run: an AST pass for forbidden imports, calls and attributes, which
warns (the default) or rejects. Defence in depth: the sandbox stays the boundary."""

from __future__ import annotations

from .config import CodeChecksConfig
from .scan import Checker, Finding

__all__ = ["Checker", "CodeChecksConfig", "Finding"]
