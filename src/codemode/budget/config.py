"""The ``"budget"`` config section: limits per run and per session (cheap to import).

```json
{"budget": {
    "run":     {"tool_calls": 100, "tool_calls_per_tool": 20, "tools": {"mail.send_*": 1},
                "tool_bytes": 10000000, "wall_time": 120, "output_bytes": 200000},
    "session": {"tool_calls": 2000, "tool_bytes": 200000000, "wall_time": 3600}
}}
```

Every limit is optional (none: no limit). ``tools`` maps name globs (``server.tool``) to a
limit on each matching tool's calls, overriding ``tool_calls_per_tool``; the first pattern
that matches decides.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from pydantic import BaseModel, ConfigDict, Field

LIMITS = ("tool_calls", "tool_calls_per_tool", "tools", "tool_bytes", "wall_time", "output_bytes")


class Limits(BaseModel):
    """The limits of one scope (a run, or a session)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_calls: int | None = Field(default=None, ge=0, description="Calls to tools, in total.")
    tool_calls_per_tool: int | None = Field(
        default=None, ge=0, description="Calls to any one tool."
    )
    tools: dict[str, int] = Field(
        default_factory=dict, description="Calls to each tool matching a glob ('server.tool')."
    )
    tool_bytes: int | None = Field(default=None, ge=0, description="Bytes received from tools.")
    wall_time: float | None = Field(default=None, gt=0, description="Seconds of running code.")
    output_bytes: int | None = Field(default=None, ge=0, description="Bytes of output (stdout...).")

    def __hash__(self) -> int:  # ``tools`` is a dict: hash by content
        return hash(self.model_dump_json())

    def per_tool(self, names: tuple[str, ...]) -> tuple[int | None, str]:
        """The limit on one tool's calls and the setting it comes from."""
        for pattern, limit in self.tools.items():
            if any(fnmatchcase(n, pattern) for n in names):
                return limit, f'tools["{pattern}"]'
        return self.tool_calls_per_tool, "tool_calls_per_tool"

    @property
    def active(self) -> bool:
        return any(getattr(self, name) not in (None, {}) for name in LIMITS)


class BudgetConfig(BaseModel):
    """The ``"budget"`` section: ``run`` limits each run, ``session`` a session's runs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    run: Limits = Limits()
    session: Limits = Limits()

    def __hash__(self) -> int:
        return hash((self.run, self.session))


__all__ = ["LIMITS", "BudgetConfig", "Limits"]
