"""The audit log: every run, tool call and memory write of a workspace, as append-only
JSONL chained by an HMAC keyed outside the workspace (``codemode.audit.log``), checked by
``codemode audit verify``."""

from __future__ import annotations

from .config import AuditConfig

__all__ = ["AuditConfig"]
