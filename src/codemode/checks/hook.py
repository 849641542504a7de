"""The ``checks`` stage of the run chain: the cell is scanned before it runs."""

from __future__ import annotations

from dataclasses import replace

from ..chain import NextRun, RunEvent, RunHook
from ..result import ErrorInfo, ExecutionResult
from .scan import Checker


def checks_hook(checker: Checker, mode: str) -> RunHook:
    async def hook(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        findings = checker.scan(event.code)
        if not findings:
            return await call_next(event)
        if mode == "reject":
            listing = "\n".join(f"  {f}" for f in findings)
            message = (
                "the code was not run: it breaks the workspace's code checks "
                f"(code_checks.mode is 'reject'):\n{listing}"
            )
            return ExecutionResult(
                error=ErrorInfo("CodeRejected", message, lineno=findings[0].lineno)
            )
        result = await call_next(event)
        notes = tuple(
            f"code check: {f} (code_checks.mode is 'warn', so the code ran)" for f in findings
        )
        return replace(result, warnings=(*notes, *result.warnings))

    return hook


__all__ = ["checks_hook"]
