"""The ``policy`` stage of the tool-call chain, and the filter that hides denied tools."""

from __future__ import annotations

from typing import Any

from ..errors import ToolDenied
from ..tools.registry import APPROVAL_PENDING, Middleware, NextCall, ToolCall, ToolFilter
from ..tools.spec import ToolSpec
from .rules import Policy


def policy_layer(policy: Policy) -> Middleware:
    """Refuse denied calls before anything runs; mark ``ask`` calls for the approval stage.
    Rules on arguments see them as the tool will (``ToolCall.revealed``: real values with
    privacy on), asked for only when such a rule applies to the tool."""

    async def layer(call: ToolCall, call_next: NextCall) -> Any:
        tool = policy.for_tool(call.spec)
        decision = tool.for_args(call.revealed()) if tool.by_args else tool.otherwise
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
            call.notes["approval_scope"] = decision.scope  # a digest, never the values
            call.notes["approval"] = APPROVAL_PENDING
        return await call_next(call)

    return layer


def denial(reason: str) -> str:
    return f"denied by the workspace's policy: {reason}"


def hidden_filter(policy: Policy) -> ToolFilter:
    def hidden(spec: ToolSpec) -> str | None:
        decision = policy.hides(spec)  # not a tool some arguments may still call
        return denial(decision.reason) if decision is not None else None

    return hidden


__all__ = ["denial", "hidden_filter", "policy_layer"]
