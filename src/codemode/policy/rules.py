"""Which calls may run: rules by tool name, by the MCP tool annotations and, for rules that
say so, by the call's arguments. What depends on the tool alone is decided once per tool.

Order of evaluation::

    rules          in order, the first that matches decides (name globs, hint conditions,
                   argument conditions)
    hint shortcuts "read_only", "destructive", "idempotent", "open_world": of those that
                   apply to the tool, the most restrictive decides (deny > ask > allow)
    default        everything else

Annotations are claims made by the server: they count only when the tool's source is
trusted (``"trusted": true`` in mcp.json, or a Python callable the host registered).
Otherwise, and for hints a tool does not declare, the MCP defaults apply: not read-only,
destructive, not idempotent, open-world. So ``{"destructive": "deny"}`` denies every tool
that a trusted server does not declare read-only (or explicitly not destructive).

Argument conditions are matched against the arguments as the tool will receive them
(``ToolCall.revealed``): with privacy on, the real values behind the tokens the code
passed, on the host only; the decision and its reason name the rule, never the value.
A rule's argument is found at any depth and in every list item, each value is judged
alone and the strictest decision counts (``argvalues``); a value is also read as a
lenient receiver reads it (NFKC, invisible characters dropped, ideographic full stops as
dots, a trailing dot dropped, a URL as a WHATWG parser reads it:
``codemode.invisible.loose``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
)

from ..tools.spec import ToolSpec
from .argvalues import MAX_COMBINATIONS, ArgMatch, ArgPlan, parse

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


def _globs(value: Any) -> Any:
    return (value,) if isinstance(value, str) else value


_ARGS_EXAMPLE = '{"to": {"not_matches": "*@example.com"}}'


def _shown(value: Any) -> str:
    return json.dumps(value)[:60] if isinstance(value, str | list | int | float) else repr(value)


class Rule(BaseModel):
    """``{"tools": ["fs.write_*"], "action": "ask"}``, optionally only for tools whose hints
    match (``"destructive": true``...) and for calls whose arguments match (``"args": {"to":
    {"not_matches": "*@example.com"}}``, all of them). A pattern without a dot names a
    whole server."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tools: tuple[str, ...] = Field(default=("*",), description="Globs on 'server.tool'.")
    action: Action
    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None
    args: tuple[tuple[str, ArgMatch], ...] = Field(
        default=(),
        description="Argument name or path (found at any depth) -> condition; every one must hold.",
    )

    @field_validator("tools", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return _globs(value)

    @field_validator("args", mode="before")
    @classmethod
    def _arg_pairs(cls, value: Any) -> Any:
        # Written as an object; kept as sorted pairs so the config stays hashable.
        if isinstance(value, tuple) and all(
            isinstance(p, tuple) and len(p) == 2 and isinstance(p[1], ArgMatch) for p in value
        ):
            return value  # already the kept form (a copy of a validated rule)
        if not isinstance(value, Mapping):
            raise ValueError(f"give an object, {_ARGS_EXAMPLE}, not {_shown(value)}")
        for name, cond in value.items():
            parse(str(name))  # a clear error for "" or "message..to"
            if not isinstance(cond, Mapping | ArgMatch):
                raise ValueError(
                    f'"{name}": give a condition object, {{"matches": [globs]}} or '
                    f'{{"not_matches": [globs]}}, not {_shown(cond)}'
                )
        return tuple(sorted(value.items()))

    @field_serializer("args")
    def _args_object(self, value: tuple[tuple[str, ArgMatch], ...]) -> dict[str, Any]:
        return {name: cond.model_dump(exclude_none=True) for name, cond in value}

    def args_hold(self, args: Mapping[str, Any]) -> bool:
        """Whether some one-value reading of ``args`` meets every condition (see
        ``argvalues``)."""
        return ArgPlan.of([self.args]).holds(0, args)

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
        conds += [f'"args.{name}": {cond.describe()}' for name, cond in self.args]
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
    scope: str = ""
    """What a person's remembered answer to this decision covers, beyond the tool and the
    rule: ``""`` when the rule is about the tool alone, else a digest of the values of the
    arguments the deciding rule looked at (an approval for one outside recipient must not
    cover the next one). A digest: the real values stay out of the approval layer's memory."""


@dataclass(frozen=True, slots=True)
class ToolDecision:
    """What is decided for a tool before its arguments are known: the rules with argument
    conditions that apply to it ahead of the deciding one (in order), then the decision."""

    by_args: tuple[tuple[Rule, Decision], ...]
    otherwise: Decision
    plan: ArgPlan = field(default_factory=lambda: ArgPlan((), (), ()))
    """``by_args``' conditions grouped by argument (``argvalues``)."""

    def for_args(self, args: Mapping[str, Any]) -> Decision:
        """The decision for ``args``: for each argument a rule names, wherever it is found
        and in every list item, each value (as written and as a lenient receiver reads it:
        full-width forms, zero-width characters, a trailing dot, names in any case) is
        judged as a call with that value alone would be, and the strictest decision
        counts. So a value disguised that way, nested or next to an allowed one, neither
        slips past a deny glob nor onto an allow-list."""
        ranks = [_RANK[d.action] for _, d in self.by_args]
        first = self.plan.first(args, ranks, _RANK[self.otherwise.action])
        if first is None:
            return Decision("deny", _TOO_MANY)
        if first < 0:
            return self.otherwise
        decision = self.by_args[first][1]
        if decision.action != "ask":
            return decision  # no one is asked: nothing to remember
        return replace(decision, scope=_scope(self.plan, args))


_TOO_MANY = (
    f"the call's arguments have more than {MAX_COMBINATIONS} combinations of values "
    "that the rules on arguments tell apart; it is refused rather than judged"
)


def _scope(plan: ArgPlan, args: Mapping[str, Any]) -> str:
    """A digest of the values of every argument the tool's rules look at, not only the
    deciding rule's: a yes to ``to="a@x", cc="b@y"``, asked because of ``to``, must not
    cover ``cc="c@z"``, which a later rule would have asked about. Each value whole, so
    an approval of ``["a@x"]`` is not one of ``["a@x", "b@y"]``."""
    return hmac.new(_SCOPE_KEY, plan.seen(args).encode(), hashlib.sha256).hexdigest()


_SCOPE_KEY = secrets.token_bytes(32)
"""Per process: a scope that reached a note or a log cannot be checked against a guess
(an address has too few possible values for a plain hash to hide it)."""


class Policy:
    """Decides per tool (cached until the tool's listing changes), then per call for the
    rules with argument conditions."""

    def __init__(self, config: PolicyConfig) -> None:
        self.config = config
        self._cache: dict[tuple[str, str], tuple[ToolSpec, ToolDecision]] = {}

    def decide(self, spec: ToolSpec, args: Mapping[str, Any] | None = None) -> Decision:
        """The decision for a call of ``spec`` with ``args`` (as the tool will receive
        them). Without ``args`` (discovery), argument rules are left out: use ``hides``
        to know whether a tool is denied whatever its arguments."""
        tool = self.for_tool(spec)
        return tool.for_args(args) if args is not None else tool.otherwise

    def hides(self, spec: ToolSpec) -> Decision | None:
        """The denial when every call of ``spec`` is denied, whatever its arguments."""
        tool = self.for_tool(spec)
        if tool.otherwise.action != "deny":
            return None
        return None if any(d.action != "deny" for _, d in tool.by_args) else tool.otherwise

    def for_tool(self, spec: ToolSpec) -> ToolDecision:
        key = (spec.server, spec.name)
        hit = self._cache.get(key)
        if hit is not None and hit[0] is spec:
            return hit[1]
        decision = self._decide(spec)
        if len(self._cache) > 50_000:
            self._cache.clear()
        self._cache[key] = (spec, decision)
        return decision

    def _decide(self, spec: ToolSpec) -> ToolDecision:
        by_args: list[tuple[Rule, Decision]] = []
        found = self._decide_tool(spec, by_args)
        plan = ArgPlan.of([rule.args for rule, _ in by_args])
        return ToolDecision(tuple(by_args), found, plan)

    def _decide_tool(self, spec: ToolSpec, by_args: list[tuple[Rule, Decision]]) -> Decision:
        cfg = self.config
        h = hints(spec)
        names = spec.names
        for i, rule in enumerate(cfg.rules):
            if rule.matches(names, h):
                if rule.args:
                    by_args.append((rule, Decision(rule.action, rule.describe(i))))
                    continue
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


__all__ = [
    "HINTS",
    "Action",
    "ArgMatch",
    "Decision",
    "Hints",
    "Policy",
    "PolicyConfig",
    "Rule",
    "ToolDecision",
    "hints",
]
