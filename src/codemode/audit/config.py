"""The ``"audit"`` config section (cheap to import).

```json
{"audit": {"enabled": true, "max_bytes": 10000000, "sinks": ["syslog"]}}
```

The log is ``<workspace>/audit/audit.jsonl`` unless ``path`` says otherwise. Its lines are
chained with an HMAC keyed outside the workspace: the key comes from the environment
(``key_env``, ``CODEMODE_AUDIT_KEY`` by default), else from ``key_file``, else from
``~/.config/codemode/audit.key`` (``codemode audit keygen`` writes one). The hash of the
last line is copied to a head file outside the workspace (``head_file``; by default under
``~/.local/state/codemode/audit-heads/``), so cutting lines off the end is detected too.

Tool-call lines inside a run are written in batches (``batch_lines``, ``batch_ms``), at the
latest when the run's own line is written: a crash of the host process loses at most the
pending batch (docs/guardrails.md, "Audit log").
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_PATH = "audit/audit.jsonl"
DEFAULT_KEY_ENV = "CODEMODE_AUDIT_KEY"


class AuditConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    path: str = Field(default=DEFAULT_PATH, description="The log, relative to the workspace.")
    max_bytes: int = Field(default=10_000_000, gt=0, description="Rotate past this size.")
    keep: int | None = Field(default=None, ge=1, description="Rotated files kept (None: all).")
    key_env: str = Field(default=DEFAULT_KEY_ENV, description="Environment variable of the key.")
    key_file: str | None = Field(default=None, description="A file holding the key.")
    head_file: str | None = Field(default=None, description="Where the chain's head is copied.")
    sinks: tuple[Literal["stderr", "syslog"], ...] = Field(
        default=(), description="Also copy each record there (stdout carries MCP on serve)."
    )
    batch_lines: int = Field(
        default=64,
        ge=1,
        description="Tool-call lines of a run written together (1: each before its call returns).",
    )
    batch_ms: int = Field(
        default=200,
        gt=0,
        description="A batch is written at the latest this long after its first line.",
    )
    record_code: bool = Field(default=True, description="Record each run's code.")
    max_code_bytes: int = Field(default=65_536, gt=0, description="Longer code is cut.")


__all__ = ["DEFAULT_KEY_ENV", "DEFAULT_PATH", "AuditConfig"]
