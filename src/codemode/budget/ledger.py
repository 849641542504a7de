"""What each run and each session has used, and the checks against the limits.

Usage is kept per run (by ``run_id``) and per session (by tenant and session id, the least
recently used forgotten beyond ``MAX_SESSIONS``), so one registry serving many sessions and
tenants keeps their accounts apart. A run's usage outlives the run while its session runs
nothing else: calls the session's code makes between runs (``CallContext.after_run``, a
thread left running) spend the budgets of the run that ended last, not none; calls made
before the first run, those of a stand-in run of the session's start
(``context.session_start``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..context import CallContext
from ..errors import BudgetExceeded
from .config import BudgetConfig, Limits

MAX_SESSIONS = 10_000


@dataclass(slots=True)
class Usage:
    tool_calls: int = 0
    per_tool: dict[str, int] = field(default_factory=dict)
    tool_bytes: int = 0
    wall_time: float = 0.0
    output_bytes: int = 0
    waited: float = 0.0
    """Seconds this run spent waiting for a person (not counted as running time)."""


def how_to_raise(scope: str, setting: str) -> str:
    return (
        f'raise it in the workspace\'s config under "budget" -> "{scope}" -> {setting}'
        if setting.startswith("tools[")
        else f'raise it in the workspace\'s config under "budget" -> "{scope}" -> "{setting}"'
    )


def exceeded(
    scope: str,
    setting: str,
    what: str,
    limit: float,
    used: float,
    *,
    server: str = "",
    tool: str = "",
) -> BudgetExceeded:
    whose = "this run" if scope == "run" else "this session"
    name = f"budget.{scope}.{setting}"
    return BudgetExceeded(
        f"{whose}'s budget of {limit:g} {what} is spent ({used:g} used; {name}); "
        + how_to_raise(scope, setting),
        server=server,
        tool=tool,
        budget=name,
        limit=limit,
        used=used,
    )


TOOL_LIMITS = (("tool_calls", "tool calls"), ("tool_bytes", "bytes received from tools"))
RUN_LIMITS = (("wall_time", "seconds of running code"), ("output_bytes", "bytes of output"))


def spent_of(
    scope: str,
    usage: Usage,
    limits: Limits,
    settings: tuple[tuple[str, str], ...],
    *,
    server: str = "",
    tool: str = "",
) -> BudgetExceeded | None:
    """The first of ``settings`` (name, what it counts) whose limit ``usage`` has reached."""
    for setting, what in settings:
        limit = getattr(limits, setting)
        used = getattr(usage, setting)
        if limit is not None and used >= limit:
            return exceeded(scope, setting, what, limit, used, server=server, tool=tool)
    return None


class Ledger:
    """Usage per run and per session, for one budget configuration."""

    def __init__(self, config: BudgetConfig) -> None:
        self.config = config
        self.runs: OrderedDict[str, Usage] = OrderedDict()
        self.ended: OrderedDict[str, Usage] = OrderedDict()
        """Runs that ended, for the calls their code makes afterwards (see the module doc)."""
        self._last: OrderedDict[tuple[str, str], str] = OrderedDict()
        self._sessions: OrderedDict[tuple[str, str], Usage] = OrderedDict()

    def session(self, ctx: CallContext) -> Usage | None:
        if not ctx.session_id:
            return None
        key = (ctx.tenant, ctx.session_id)
        usage = self._sessions.get(key)
        if usage is None:
            usage = self._sessions[key] = Usage()
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return usage

    def run(self, ctx: CallContext) -> Usage | None:
        if not ctx.run_id:
            return self._after(ctx, ctx.after_run) if ctx.after_run else None
        usage = self.runs.get(ctx.run_id)
        if usage is None:  # a call outside a run hook's bracket (a session without hooks)
            usage = self.runs[ctx.run_id] = Usage()
            while len(self.runs) > MAX_SESSIONS:
                self.runs.popitem(last=False)
        return usage

    def end_run(self, ctx: CallContext) -> None:
        """The run of ``ctx`` ended: its usage is kept for calls made after it, until its
        session's next run ends (at most ``MAX_SESSIONS`` ended runs are kept)."""
        if not ctx.run_id:
            return
        usage = self.runs.pop(ctx.run_id, None)
        if ctx.session_id:
            previous = self._last.pop((ctx.tenant, ctx.session_id), None)
            if previous is not None:
                self.ended.pop(previous, None)
            self._last[(ctx.tenant, ctx.session_id)] = ctx.run_id
            while len(self._last) > MAX_SESSIONS:
                self.ended.pop(self._last.popitem(last=False)[1], None)
        if usage is not None:
            self.ended[ctx.run_id] = usage
            while len(self.ended) > MAX_SESSIONS:
                self.ended.popitem(last=False)

    def _after(self, ctx: CallContext, run_id: str) -> Usage:
        usage = self.ended.get(run_id)
        if usage is None:  # forgotten (beyond the cap) or never bracketed: counted afresh
            usage = self.ended[run_id] = Usage()
            while len(self.ended) > MAX_SESSIONS:
                self.ended.popitem(last=False)
            last = (ctx.tenant, ctx.session_id) if ctx.session_id else None
            if last is not None and last not in self._last:
                # the session's start (no run ended yet): dropped when its first run ends
                self._last[last] = run_id
                while len(self._last) > MAX_SESSIONS:
                    self.ended.pop(self._last.popitem(last=False)[1], None)
        return usage

    def scopes(self, ctx: CallContext) -> list[tuple[str, Usage, Limits]]:
        out: list[tuple[str, Usage, Limits]] = []
        run = self.run(ctx) if self.config.run.active else None
        if run is not None:
            out.append(("run", run, self.config.run))
        session = self.session(ctx) if self.config.session.active else None
        if session is not None:
            out.append(("session", session, self.config.session))
        return out

    def charge_call(
        self, ctx: CallContext, names: tuple[str, ...], *, server: str, tool: str
    ) -> list[Usage]:
        """Check every limit on tool calls, then count this call (raises ``BudgetExceeded``)."""
        scopes = self.scopes(ctx)
        key = names[0]
        for scope, usage, limits in scopes:
            limit, setting = limits.per_tool(names)
            used = usage.per_tool.get(key, 0)
            if limit is not None and used >= limit:
                what = f"calls to {server}.{tool}"
                raise exceeded(scope, setting, what, limit, used, server=server, tool=tool)
            spent = spent_of(scope, usage, limits, TOOL_LIMITS, server=server, tool=tool)
            if spent is not None:
                raise spent
        for _, usage, _ in scopes:
            usage.tool_calls += 1
            usage.per_tool[key] = usage.per_tool.get(key, 0) + 1
        return [usage for _, usage, _ in scopes]

    def state(self, ctx: CallContext) -> dict[str, Any]:
        """Usage against limits, for the audit log (``{"run.tool_calls": [3, 100], ...}``)."""
        out: dict[str, Any] = {}
        for scope, usage, limits in self.scopes(ctx):
            for name in ("tool_calls", "tool_bytes", "wall_time", "output_bytes"):
                limit = getattr(limits, name)
                if limit is not None:
                    out[f"{scope}.{name}"] = [round(getattr(usage, name), 3), limit]
        return out


__all__ = [
    "MAX_SESSIONS",
    "RUN_LIMITS",
    "TOOL_LIMITS",
    "Ledger",
    "Usage",
    "exceeded",
    "how_to_raise",
    "spent_of",
]
