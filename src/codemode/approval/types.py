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
        """``server.tool(arg=value, ...)`` within ``limit`` characters, for a prompt; no
        character of it can move the cursor or reorder the line (:func:`printable`).

        When it does not fit, each long value is cut, not the line's end: code that sends a
        long harmless value first cannot push the argument that matters out of view. If
        even the names do not fit, the prompt says how many arguments there are in all."""
        items = [
            (printable(str(k)), printable(json.dumps(v, ensure_ascii=False, default=repr)))
            for k, v in self.arguments.items()
        ]
        head = printable(self.qualified)  # code chose the names and values
        text = f"{head}({', '.join(f'{k}={v}' for k, v in items)})"
        if len(text) <= limit:
            return text
        note = f" [{len(items)} arguments; long values cut]"
        room = limit - len(head) - 2 - len(note) - len(", ... 9999 more")
        each = max(_MIN_SHOWN, room // max(len(items), 1) - 2)
        parts: list[str] = []
        for k, v in items:
            key = _cut(k, max(_MIN_SHOWN, each // 3))
            part = f"{key}={_cut(v, max(_MIN_SHOWN, each - len(key) - 1))}"
            if sum(len(p) + 2 for p in parts) + len(part) > room:
                break
            parts.append(part)
        more = len(items) - len(parts)
        shown = ", ".join(parts) + (f", ... {more} more" if more else "")
        return _cut(f"{head}({shown}){note}", limit)


_MIN_SHOWN = 12


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


@dataclass(frozen=True, slots=True)
class Approval:
    """A person's answer. ``remember``: the same answer to the same question for the rest
    of the session: every call of the tool when the policy asked about the tool, the same
    argument values when it asked because of them (a rule with ``args``; a no, there,
    holds for the whole rule). ``reason`` says why it was refused (shown to the agent's
    code)."""

    approved: bool
    remember: bool = False
    reason: str = ""


Approver = Callable[[ApprovalRequest], "Awaitable[Approval | bool] | Approval | bool"]

current_approver: ContextVar[Approver | None] = ContextVar("codemode_approver", default=None)
"""Who answers approvals for the call being served (set per worker call by ``Session``)."""


__all__ = ["Approval", "ApprovalRequest", "Approver", "current_approver"]
