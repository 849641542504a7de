"""Workflow errors, inside codemode's one tree (``CodemodeError``)."""

from __future__ import annotations

from ..errors import CodemodeError


class WorkflowError(CodemodeError):
    """A workflow file, expression or run went wrong; the message names where."""


class StepFailed(WorkflowError):
    """A step failed after its retries; ``step`` is its path in the workflow."""

    def __init__(self, message: str, *, step: str, uncertain: bool = False) -> None:
        super().__init__(message)
        self.step = step
        self.uncertain = uncertain
        """True when the step may have had its effect (a timeout, a lost connection)."""


class NeedsDecision(WorkflowError):
    """Resume reached a step that started but never finished and is not idempotent."""

    def __init__(self, message: str, *, step: str) -> None:
        super().__init__(message)
        self.step = step


class Stopped(WorkflowError):
    """A person declined (or cancelled) a question the workflow asked."""

    def __init__(self, message: str, *, step: str) -> None:
        super().__init__(message)
        self.step = step


__all__ = ["NeedsDecision", "StepFailed", "Stopped", "WorkflowError"]
