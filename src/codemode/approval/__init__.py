"""Approval: a person says yes or no before a call the policy marked ``ask`` runs.

See ``codemode.approval.layer`` for the tool layer and ``codemode.approval.types`` for the
approver seam (SDK callback, terminal, MCP elicitation in ``codemode serve``).
"""

from __future__ import annotations

from .types import Approval, ApprovalRequest, Approver, current_approver

__all__ = ["Approval", "ApprovalRequest", "Approver", "current_approver"]
