"""The ``policy`` stage of the tool-call chain, and the filter that hides denied tools."""

from __future__ import annotations

from typing import Any

from ..errors import ToolDenied
from ..tools.registry import APPROVAL_PENDING, Middleware, NextCall, ToolCall, ToolFilter
from ..tools.spec import ToolSpec
from .rules import Policy


def policy_layer(policy: Policy) -> Middleware:
    """Refuse denied calls before anything runs; mark ``ask`` calls for the approval stage."""

    async def layer(call: ToolCall, call_next: NextCall) -> Any:
        decision = policy.decide(call.spec)
        call.notes["policy"] = decision.action
        if decision.action == "deny":
            call.notes["policy_reason"] = decision.reason
            raise ToolDenied(
                denial(decision.reason),
                server=call.spec.py_server,
                tool=call.spec.py_name,
                reason="policy",
            )
        if decision.action == "ask":
            call.notes["policy_reason"] = decision.reason
            call.notes["approval"] = APPROVAL_PENDING
        return await call_next(call)

    return layer


def denial(reason: str) -> str:
    return f"denied by the workspace's policy: {reason}"


def hidden_filter(policy: Policy) -> ToolFilter:
    def hidden(spec: ToolSpec) -> str | None:
        decision = policy.decide(spec)
        return denial(decision.reason) if decision.action == "deny" else None

    return hidden


__all__ = ["denial", "hidden_filter", "policy_layer"]
