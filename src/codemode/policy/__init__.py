"""Tool policy: allow, deny or ask, by tool name, by trusted MCP tool annotations and by
the call's arguments (as the tool receives them: real values with privacy on).

Configured under ``"policy"`` in the workspace's config (``codemode.policy.rules`` has the
order of evaluation), e.g. ``{"policy": {"read_only": "allow", "default": "ask"}}``.
"""

from __future__ import annotations

from .rules import HINTS, Action, ArgMatch, Decision, Hints, Policy, PolicyConfig, Rule, hints

__all__ = [
    "HINTS",
    "Action",
    "ArgMatch",
    "Decision",
    "Hints",
    "Policy",
    "PolicyConfig",
    "Rule",
    "hints",
]
