"""What an approval asks and what a person answers: the seam between the ``approval``
tool layer and whoever asks the person (an SDK callback, the terminal, an MCP client
through elicitation).

An *approver* is ``approve(request) -> Approval | bool`` (a coroutine function, or a plain
function, which is run in a thread so it may block on ``input()``). ``Session`` publishes
its approver in ``current_approver`` while it serves its worker's calls, so the layer,
shared by every session of a registry, asks the right person.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..context import CallContext
from ..printable import printable


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """One call waiting for a person's yes."""

    server: str
    """Server and tool as the agent's code names them (Python identifiers)."""
    tool: str
    arguments: Mapping[str, Any]
    """As the approval stage sees them: tokens, not real values, when privacy is on."""
    reason: str
    """Why it needs approval (the policy rule that said ``ask``)."""
    context: CallContext = field(default_factory=CallContext)

    @property
    def qualified(self) -> str:
        return f"{self.server}.{self.tool}"

    def describe(self, limit: int = 600) -> str:
        """``server.tool(arg=value, ...)`` cut at ``limit`` characters, for a prompt; no
        character of it can move the cursor or reorder the line (:func:`printable`)."""
        args = ", ".join(
            f"{k}={json.dumps(v, ensure_ascii=False, default=repr)}"
            for k, v in self.arguments.items()
        )
        text = printable(f"{self.qualified}({args})")  # code chose the names and values
        return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class Approval:
    """A person's answer. ``remember``: the same answer for this tool for the rest of the
    session. ``reason`` says why it was refused (shown to the agent's code)."""

    approved: bool
    remember: bool = False
    reason: str = ""


Approver = Callable[[ApprovalRequest], "Awaitable[Approval | bool] | Approval | bool"]

current_approver: ContextVar[Approver | None] = ContextVar("codemode_approver", default=None)
"""Who answers approvals for the call being served (set per worker call by ``Session``)."""


__all__ = ["Approval", "ApprovalRequest", "Approver", "current_approver"]
