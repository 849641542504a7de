"""Tool policy: allow, deny or ask, by tool name and by trusted MCP tool annotations.

Configured under ``"policy"`` in the workspace's config (``codemode.policy.rules`` has the
order of evaluation), e.g. ``{"policy": {"read_only": "allow", "default": "ask"}}``.
"""

from __future__ import annotations

from .rules import HINTS, Action, Decision, Hints, Policy, PolicyConfig, Rule, hints

__all__ = ["HINTS", "Action", "Decision", "Hints", "Policy", "PolicyConfig", "Rule", "hints"]
