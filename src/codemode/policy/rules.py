"""Which calls may run: rules by tool name and by the MCP tool annotations, decided once per
tool (the decision depends on the tool, not on its arguments).

Order of evaluation::

    rules          in order, the first that matches decides (name globs, hint conditions)
    hint shortcuts "read_only", "destructive", "idempotent", "open_world": of those that
                   apply to the tool, the most restrictive decides (deny > ask > allow)
    default        everything else

Annotations are claims made by the server: they count only when the tool's source is
trusted (``"trusted": true`` in mcp.json, or a Python callable the host registered).
Otherwise, and for hints a tool does not declare, the MCP defaults apply: not read-only,
destructive, not idempotent, open-world. So ``{"destructive": "deny"}`` denies every tool
that a trusted server does not declare read-only (or explicitly not destructive).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..tools.spec import ToolSpec

Action = Literal["allow", "deny", "ask"]
_RANK: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}
HINTS = ("read_only", "destructive", "idempotent", "open_world")

# The annotation keys of the MCP spec, and the snake_case spelling Python code may use.
_KEYS = {
    "readOnlyHint": "read_only",
    "read_only_hint": "read_only",
    "destructiveHint": "destructive",
    "destructive_hint": "destructive",
    "idempotentHint": "idempotent",
    "idempotent_hint": "idempotent",
    "openWorldHint": "open_world",
    "open_world_hint": "open_world",
}


@dataclass(frozen=True, slots=True)
class Hints:
    """A tool's hints as policies read them (the MCP defaults unless trusted and declared)."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True
    trusted: bool = False

    def get(self, name: str) -> bool:
        value: bool = getattr(self, name)
        return value


def hints(spec: ToolSpec) -> Hints:
    """``spec``'s hints: its annotations when its source is trusted, else the MCP defaults."""
    if not spec.trusted:
        return Hints()
    declared: dict[str, Any] = {}
    for key, value in spec.annotations.items():
        name = _KEYS.get(key)
        if name is not None and isinstance(value, bool):
            declared[name] = value
    read_only = declared.get("read_only", False)
    return Hints(
        read_only=read_only,
        # The spec: destructiveHint and idempotentHint mean something only for tools that
        # are not read-only; a read-only tool changes nothing.
        destructive=not read_only and declared.get("destructive", True),
        idempotent=read_only or declared.get("idempotent", False),
        open_world=declared.get("open_world", True),
        trusted=True,
    )


class Rule(BaseModel):
    """``{"tools": ["fs.write_*"], "action": "ask"}``, optionally only for tools whose hints
    match (``"destructive": true``...). A pattern without a dot names a whole server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: tuple[str, ...] = Field(default=("*",), description="Globs on 'server.tool'.")
    action: Action
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None

    @field_validator("tools", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value

    @field_validator("tools")
    @classmethod
    def _patterns(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value or any(not p.strip() for p in value):
            raise ValueError("give at least one non-empty pattern")
        return tuple(p if "." in p or "*" in p else f"{p}.*" for p in value)

    def matches(self, names: tuple[str, ...], h: Hints) -> bool:
        for name in HINTS:
            want = getattr(self, name)
            if want is not None and h.get(name) is not want:
                return False
        return any(fnmatchcase(n, p) for p in self.tools for n in names)

    def describe(self, index: int) -> str:
        conds = [f'"{n}": {str(getattr(self, n)).lower()}' for n in HINTS if getattr(self, n)]
        conds += [f'"{n}": false' for n in HINTS if getattr(self, n) is False]
        when = f" when {', '.join(conds)}" if conds else ""
        pats = ", ".join(f'"{p}"' for p in self.tools)
        return f"rule {index + 1} (tools {pats}{when} -> {self.action})"


class PolicyConfig(BaseModel):
    """The ``"policy"`` section of the workspace's config (see the module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Action = Field(default="allow", description="For calls no rule or shortcut decides.")
    read_only: Action | None = None
    destructive: Action | None = None
    idempotent: Action | None = None
    open_world: Action | None = None
    rules: tuple[Rule, ...] = ()
    hide_denied: bool = Field(
        default=True, description="Hide denied tools from discovery and stubs."
    )

    @property
    def active(self) -> bool:
        """False when it allows everything (then no layer is installed at all)."""
        shortcuts = any(getattr(self, n) not in (None, "allow") for n in HINTS)
        rules = any(r.action != "allow" for r in self.rules)
        return self.default != "allow" or shortcuts or rules


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str


class Policy:
    """Decides per tool; decisions are cached until the tool's listing changes."""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self._cache: dict[tuple[str, str], tuple[ToolSpec, Decision]] = {}

    def decide(self, spec: ToolSpec) -> Decision:
        key = (spec.server, spec.name)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is spec:
            return hit[1]
        decision = self._decide(spec)
        if len(self._cache) > 50_000:
            self._cache.clear()
        self._cache[key] = (spec, decision)
        return decision

    def _decide(self, spec: ToolSpec) -> Decision:
        cfg = self.config
        h = hints(spec)
        names = spec.names
        for i, rule in enumerate(cfg.rules):
            if rule.matches(names, h):
                return Decision(rule.action, rule.describe(i))
        applies = [(getattr(cfg, n), n) for n in HINTS if getattr(cfg, n) is not None and h.get(n)]
        if applies:
            action, name = max(applies, key=lambda a: _RANK[a[0]])  # first of the strictest
            return Decision(action, _shortcut_reason(spec, name, action, h))
        return Decision(cfg.default, f'"default": "{cfg.default}"')


def _shortcut_reason(spec: ToolSpec, name: str, action: str, h: Hints) -> str:
    label = name.replace("_", "-")
    text = f'"{name}": "{action}" (the tool counts as {label}'
    if not h.trusted:
        text += (
            f'; server {spec.server!r} is not marked "trusted" in mcp.json, so its '
            "annotations are not believed and the MCP defaults apply: destructive, open-world"
        )
    elif name in ("destructive", "open_world") and not _declared(spec.annotations, name):
        text += "; it declares no such hint, so the MCP default applies"
    return text + ")"


def _declared(annotations: Mapping[str, Any], name: str) -> bool:
    return any(_KEYS.get(k) == name for k in annotations)


__all__ = ["HINTS", "Action", "Decision", "Hints", "Policy", "PolicyConfig", "Rule", "hints"]
