"""The ``approval`` stage: a call the policy marked ``ask`` waits for a person's answer.

Who is asked is the approver of the session that made the call (``current_approver``): an
SDK callback, the terminal of ``codemode run``, or the MCP client of ``codemode serve``
through elicitation. While the person thinks, the run's timeout is held
(``waiting_for_person``); each wait has its own limit, ``approval.timeout``, and all the
waits of one run together ``approval.max_wait_per_run``. Answers a person
asked to remember hold for the rest of the session for the question asked: the tool and the
rule, and for a yes to a rule on argument values, the values that met it; a remembered no
holds for the whole rule (kept per tenant and session id, so one registry can serve many
sessions and tenants). Questions of one session
are asked one at a time, so a terminal never shows two prompts at once, and a remembered
answer settles the questions queued behind it.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections import OrderedDict
from typing import Any

import anyio
import anyio.to_thread

from ..errors import ToolDenied
from ..execution.base import waiting_for_person
from ..observability import signals
from ..tools.registry import APPROVAL_PENDING, Middleware, NextCall, ToolCall
from .config import ApprovalConfig
from .types import Approval, ApprovalRequest, Approver, current_approver

log = logging.getLogger(__name__)

MAX_SESSIONS = 10_000

NO_APPROVER = (
    "no one can approve calls in this session (it has no approver): pass "
    "Session(..., approve=callback), run `codemode run` on a terminal, or use a client of "
    "`codemode serve` that supports MCP elicitation; or change the workspace's policy"
)


SessionKey = tuple[str, str | None]

# how a decision was had -> the ``codemode_approvals_total`` decision label
_DECISION = {
    "approved": "granted",
    "denied": "refused",
    "remembered": "remembered",
    "timeout": "timeout",
    "no approver": "no_approver",
    "error": "error",
}

_pending: dict[int, dict[str, Any]] = {}


def pending_approvals() -> list[dict[str, Any]]:
    """Questions now waiting for a person in this process, oldest first: server, tool,
    tenant and since (epoch seconds); never the call's arguments."""
    return sorted((dict(p) for p in list(_pending.values())), key=lambda p: p["since"])


class Approvals:
    """Remembered answers and the question lock, per (tenant, session)."""

    def __init__(self, config: ApprovalConfig) -> None:
        self.config = config
        self._sessions: OrderedDict[SessionKey, tuple[asyncio.Lock, dict[str, Approval]]] = (
            OrderedDict()
        )
        # seconds each run waited for answers, by (tenant, session, run)
        self._waited: OrderedDict[tuple[str, str | None, str], float] = OrderedDict()

    def _of(self, key: SessionKey) -> tuple[asyncio.Lock, dict[str, Approval]]:
        got = self._sessions.get(key)
        if got is None:
            got = self._sessions[key] = (asyncio.Lock(), {})
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return got

    async def decide(self, call: ToolCall) -> tuple[Approval, str]:
        """The answer for ``call`` and how it was had (asked, remembered, timeout...)."""
        ctx = call.context
        lock, remembered = self._of((ctx.tenant, ctx.session_id))
        key, rule = _question(call), _question(call, values=False)
        async with lock:
            known = (remembered.get(key) or remembered.get(rule)) if ctx.session_id else None
            if known is not None:
                return known, "remembered"
            # As the code called it: a renamed tool (``search_``, ``send_mail_2``) would
            # otherwise be shown under its own or another tool's name.
            server, _, name = (call.spec.alias or call.spec.qualified_name).partition(".")
            request = ApprovalRequest(
                server,
                name,
                dict(call.args),
                str(call.notes.get("policy_reason", "")),
                ctx,
            )
            run = ctx.run_id or ctx.after_run
            waited_key = (ctx.tenant, ctx.session_id, run) if run else None
            answer, how = await self._ask_within(current_approver.get(), request, waited_key)
            if answer.remember and self.config.remember and ctx.session_id:
                # A yes covers the values asked about; a no, refusing only more, every
                # call the rule asks about (code cannot make a person answer it again and
                # again with a new value each time).
                remembered[key if answer.approved else rule] = answer
            return answer, how

    async def _ask_within(
        self,
        approver: Approver | None,
        request: ApprovalRequest,
        run: tuple[str, str | None, str] | None,
    ) -> tuple[Approval, str]:
        """Ask within what is left of the run's total wait (``max_wait_per_run``)."""
        if run is None or approver is None:
            return await self._ask(approver, request, self.config.timeout, "approval.timeout")
        limit = self.config.run_wait_limit
        waited = self._waited.get(run, 0.0)
        if waited >= limit:
            reason = (
                f"this run has waited {waited:.1f} s for answers in all, the limit of the "
                f"workspace's approval.max_wait_per_run ({limit:g} s): it asks no more questions"
            )
            return Approval(False, reason=reason), "timeout"
        left = limit - waited
        timeout, setting = self.config.timeout, "approval.timeout"
        if left < timeout:
            timeout, setting = left, "approval.max_wait_per_run"
        started = time.monotonic()
        try:
            return await self._ask(approver, request, timeout, setting)
        finally:
            self._waited[run] = self._waited.get(run, 0.0) + time.monotonic() - started
            self._waited.move_to_end(run)
            while len(self._waited) > MAX_SESSIONS:
                self._waited.popitem(last=False)

    async def _ask(
        self, approver: Approver | None, request: ApprovalRequest, timeout: float, setting: str
    ) -> tuple[Approval, str]:
        if approver is None:
            return Approval(False, reason=NO_APPROVER), "no approver"
        key = id(request)
        _pending[key] = {
            "server": request.server,
            "tool": request.tool,
            "tenant": request.context.tenant,
            "since": time.time(),
        }
        try:
            return await self._asked(approver, request, timeout, setting)
        finally:
            _pending.pop(key, None)

    async def _asked(
        self, approver: Approver, request: ApprovalRequest, timeout: float, setting: str
    ) -> tuple[Approval, str]:
        with waiting_for_person():
            try:
                with anyio.fail_after(timeout):
                    got = await _call(approver, request)
            except TimeoutError:
                reason = f"no answer within {round(timeout, 2):g} s (the workspace's {setting})"
                return Approval(False, reason=reason), "timeout"
            except Exception as exc:
                log.exception("the approver failed")
                return Approval(False, reason=f"the approver failed: {exc}"), "error"
        if isinstance(got, bool):
            got = Approval(got)
        if not isinstance(got, Approval):
            reason = f"the approver returned {type(got).__name__}, not an Approval or a bool"
            return Approval(False, reason=reason), "error"
        return got, "approved" if got.approved else "denied"


def _question(call: ToolCall, *, values: bool = True) -> str:
    """What a remembered answer covers: the question asked, not the tool. The tool and the
    rule that asked (its reason names it), and for a rule on argument values the values
    that met it (the policy's ``approval_scope``, a keyed digest): a yes to one outside
    recipient is not a yes to the next. A question about the tool itself has an empty
    scope, so its answer holds for every call of the tool. ``values=False``: the rule's
    question whatever the values (where a remembered no is kept)."""
    reason = str(call.notes.get("policy_reason", ""))
    scope = str(call.notes.get("approval_scope", "")) if values else ""
    return "\x00".join((call.server, call.tool, reason, scope))


async def _call(approver: Approver, request: ApprovalRequest) -> Any:
    if inspect.iscoroutinefunction(approver) or inspect.iscoroutinefunction(
        getattr(approver, "__call__", None)  # noqa: B004 - async callable objects
    ):
        return await approver(request)  # type: ignore[misc]
    got = await anyio.to_thread.run_sync(approver, request, abandon_on_cancel=True)
    return await got if inspect.isawaitable(got) else got


def approval_layer(approvals: Approvals) -> Middleware:
    async def layer(call: ToolCall, call_next: NextCall) -> Any:
        if call.notes.get("approval") != APPROVAL_PENDING:
            return await call_next(call)
        started = time.monotonic()
        answer, how = await approvals.decide(call)
        signals.approval(_DECISION.get(how, how))
        call.notes["approval_wait"] = time.monotonic() - started  # not running time (budgets)
        if how == "remembered":
            call.notes["approval"] = "remembered-" + ("yes" if answer.approved else "no")
        else:
            call.notes["approval"] = how
        if not answer.approved:
            why = answer.reason or "a person declined it"
            raise ToolDenied(
                f"not approved: {why} (the workspace's policy asks before this call: "
                f"{call.notes.get('policy_reason', '')})",
                server=call.spec.py_server,
                tool=call.spec.py_name,
                reason="approval",
            )
        return await call_next(call)

    return layer


__all__ = [
    "NO_APPROVER",
    "ApprovalConfig",
    "Approvals",
    "approval_layer",
    "pending_approvals",
]
