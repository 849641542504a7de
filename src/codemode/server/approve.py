"""Approvals on ``codemode serve``: the person behind the MCP client is asked through
elicitation (a form with ``confirm`` and ``remember``).

How the question travels depends on the protocol the connection negotiated:

- handshake-era connections (2025-11-25): an ``elicitation/create`` request sent mid-call,
  while the agent's code waits inside ``run_code``;
- 2026-07-28 connections have no back-channel: ``run_code`` keeps the run going in the
  background and answers ``InputRequiredResult`` carrying the question; the client retries
  ``run_code`` with the answer and the opaque ``request_state`` (the paused run's ticket),
  and the run resumes (``PausedRuns``). Other tools cannot pause: on such connections they
  refuse calls that need approval, saying so.

A client that declared no form elicitation gets a clear refusal that says why. Waiting for
the answer holds the run's timeout; ``approval.timeout`` bounds it (``codemode.approval``).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mcp.server.elicitation import render_elicitation_schema
from mcp.server.mcpserver import Context
from mcp.shared.exceptions import MCPError
from mcp_types import ElicitRequest, ElicitRequestFormParams, ElicitResult, InputRequiredResult
from pydantic import BaseModel, Field

from codemode.approval.types import Approval, ApprovalRequest, Approver, current_approver
from codemode.errors import CodemodeError

from .toolset import Call, Reply, is_modern

log = logging.getLogger(__name__)

MAX_PAUSED = 256
KEEP_FINISHED = 600.0
"""Seconds a paused run's result waits for its client to come back for it."""


class ApprovalForm(BaseModel):
    """What the client's form asks (an accept needs at least one field: ``confirm``)."""

    confirm: bool = Field(title="Allow this call", description="Yes runs it; no refuses it.")
    remember: bool = Field(
        False,
        title="Remember",
        description=(
            "Give the same answer to this question for the rest of this session (for the "
            "same argument values, when the policy asked because of them)."
        ),
    )


SCHEMA = render_elicitation_schema(ApprovalForm)


def message(request: ApprovalRequest) -> str:
    text = f"The agent's code wants to call {request.describe()}."
    if request.reason:
        text += f"\nThe workspace's policy asks before this call: {request.reason}."
    return text + "\nAllow it?"


def no_elicitation(mcp_ctx: Any) -> str | None:
    """Why this client cannot be asked, or None when it can."""
    caps = getattr(mcp_ctx, "client_capabilities", None)
    elicitation = getattr(caps, "elicitation", None)
    if elicitation is None:
        return (
            "your MCP client does not support elicitation (it declared no 'elicitation' "
            "capability), so codemode cannot ask you to approve this call; use a client that "
            "supports MCP elicitation, or change the workspace's policy"
        )
    if getattr(elicitation, "form", None) is None and getattr(elicitation, "url", None):
        return (
            "your MCP client supports only URL elicitation, and approving a call needs a form "
            "(confirm: yes or no); use a client with form elicitation, or change the policy"
        )
    return None


def to_approval(result: Any) -> Approval:
    """An elicitation answer as an ``Approval`` (anything but an accepted yes refuses)."""
    action = getattr(result, "action", None)
    if action == "decline":
        return Approval(False, reason="you declined it in your MCP client")
    if action != "accept":
        return Approval(False, reason="you dismissed the question in your MCP client")
    content = getattr(result, "content", None) or {}
    remember = content.get("remember") is True
    if content.get("confirm") is True:
        return Approval(True, remember=remember)
    return Approval(False, remember=remember, reason="you answered no in your MCP client")


def client_approver(mcp_ctx: Context | None) -> Approver:
    """Asks the person behind this request's client, mid-call (handshake-era protocol)."""

    async def approve(request: ApprovalRequest) -> Approval:
        why = no_elicitation(mcp_ctx) if mcp_ctx is not None else "there is no client to ask"
        if why is not None:
            return Approval(False, reason=why)
        assert mcp_ctx is not None
        if is_modern(mcp_ctx):
            return Approval(
                False,
                reason=(
                    "this tool cannot pause for your answer on a 2026-07-28 connection "
                    "(no back-channel); run the code with run_code, which can"
                ),
            )
        try:
            result = await mcp_ctx.request_context.session.elicit_form(
                message(request), SCHEMA, related_request_id=mcp_ctx.request_id
            )
        except MCPError as exc:
            return Approval(False, reason=f"your MCP client could not ask: {exc}")
        return to_approval(result)

    return approve


# --------------------------------------------------------------------------- 2026-07-28


@dataclass(eq=False)
class _Question:
    key: str
    request: ApprovalRequest
    answer: asyncio.Future[Approval]


@dataclass(eq=False)
class _Paused:
    """A run whose client was sent a question and is expected back with the answer."""

    ticket: str
    owner: str | None
    task: asyncio.Task[Reply]
    questions: asyncio.Queue[_Question] = field(default_factory=asyncio.Queue)
    asked: dict[str, _Question] = field(default_factory=dict)
    count: int = 0
    touched: float = field(default_factory=time.monotonic)


Runner = Callable[[Approver], Awaitable[Reply]]


class PausedRuns:
    """Runs of ``run_code`` that wait for their 2026-07-28 client to answer a question."""

    def __init__(self) -> None:
        self._runs: dict[str, _Paused] = {}

    async def start(self, call: Call, runner: Runner) -> Reply | InputRequiredResult:
        """Run ``runner(approver)`` in the background; answer its result, or its first
        question as an ``InputRequiredResult``."""
        self._sweep()
        if len(self._runs) >= MAX_PAUSED:
            raise CodemodeError(
                f"{MAX_PAUSED} runs are already waiting for their clients' answers; "
                "answer or abandon them, then retry"
            )
        ticket = secrets.token_urlsafe(24)
        holder: dict[str, _Paused] = {}

        async def approve(request: ApprovalRequest) -> Approval:
            paused = holder["run"]
            paused.count += 1
            loop = asyncio.get_running_loop()
            question = _Question(f"approve-{paused.count}", request, loop.create_future())
            await paused.questions.put(question)
            return await question.answer

        async def background() -> Reply:
            current_approver.set(approve)
            return await runner(approve)

        task = asyncio.get_running_loop().create_task(background())
        paused = holder["run"] = _Paused(ticket, call.session_key, task)
        self._runs[ticket] = paused
        return await self._next(paused)

    async def resume(
        self, call: Call, state: str, responses: dict[str, Any]
    ) -> Reply | InputRequiredResult:
        """The client came back with answers for the paused run ``state`` names."""
        self._sweep()
        paused = self._runs.get(state)
        if paused is None or paused.owner != call.session_key:
            return Reply(
                "This run is no longer waiting for an answer (it finished, or the server "
                "restarted); run the code again.",
                None,
                is_error=True,
            )
        paused.touched = time.monotonic()
        for key, question in list(paused.asked.items()):
            got = responses.get(key)
            answer = (
                to_approval(got)
                if isinstance(got, ElicitResult)
                else Approval(False, reason="your MCP client returned no answer to the question")
            )
            if not question.answer.done():
                question.answer.set_result(answer)
            del paused.asked[key]
        return await self._next(paused)

    async def _next(self, paused: _Paused) -> Reply | InputRequiredResult:
        asking = asyncio.ensure_future(paused.questions.get())
        try:
            await asyncio.wait((paused.task, asking), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not asking.done():
                asking.cancel()
        if asking.done() and not asking.cancelled():
            question = asking.result()
            if question.answer.done():  # the approval timed out meanwhile
                return await self._next(paused)
            paused.asked[question.key] = question
            request = ElicitRequest(
                params=ElicitRequestFormParams(
                    message=message(question.request), requested_schema=SCHEMA
                )
            )
            return InputRequiredResult(
                input_requests={question.key: request}, request_state=paused.ticket
            )
        self._runs.pop(paused.ticket, None)
        return paused.task.result()

    def _sweep(self) -> None:
        now = time.monotonic()
        for ticket, paused in list(self._runs.items()):
            if paused.task.done() and now - paused.touched > KEEP_FINISHED:
                del self._runs[ticket]


__all__ = [
    "SCHEMA",
    "ApprovalForm",
    "PausedRuns",
    "client_approver",
    "message",
    "no_elicitation",
    "to_approval",
]
