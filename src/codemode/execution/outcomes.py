"""What a run on a worker process comes to, as the caller sees it: its result, a timeout,
or a crash that took the session's state with it. Kept apart from the worker's pipe
handling (:mod:`.subprocess`), which only says which of these happened."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from ..result import ErrorInfo, ExecutionResult, timeout_error

_TAIL = 1500
"""Characters of a crashed worker's stderr quoted in its error."""


def finished(
    payload: Any,
    output: tuple[bytearray, bytearray] | None,
    *,
    timed_out: bool,
    timeout: float,
    start: float,
    max_output: int,
    memory_limit_mb: int | None,
) -> ExecutionResult:
    """The worker answered: its result, with the fd-level ``output`` the host read during
    the run appended, and the timeout or memory limit named when one stopped it."""
    if not isinstance(payload, dict):
        if timed_out:
            return timed_out_result(timeout, start, state_lost=False)
        return ExecutionResult(
            error=ErrorInfo("WorkerError", "the worker returned no result"),
            duration_ms=(time.perf_counter() - start) * 1000,
        )
    res = ExecutionResult.from_payload(payload, (time.perf_counter() - start) * 1000)
    changes: dict[str, Any] = {}
    if output is not None:
        for name, data in zip(("stdout", "stderr"), output, strict=True):
            if data:
                changes[name] = getattr(res, name) + data.decode("utf-8", "replace")
                if len(data) >= max_output:
                    changes[f"{name}_truncated"] = True
    error = res.error
    if timed_out:
        changes["timed_out"] = True
        changes["error"] = timeout_error(
            timeout,
            traceback=error.traceback if error else "",
            lineno=error.lineno if error else None,
        )
    elif error is not None and error.type == "MemoryError" and memory_limit_mb:
        limit = f"the worker's memory limit ({memory_limit_mb} MB) was reached"
        changes["error"] = replace(
            error, message=limit + (f": {error.message}" if error.message else "")
        )
    return replace(res, **changes) if changes else res


def timed_out_result(timeout: float, start: float, *, state_lost: bool) -> ExecutionResult:
    return ExecutionResult(
        error=timeout_error(timeout, state_lost=state_lost),
        timed_out=True,
        state_lost=state_lost,
        duration_ms=(time.perf_counter() - start) * 1000,
    )


def crashed(info: str, tail: str, start: float) -> ExecutionResult:
    """The worker died: ``info`` says how, ``tail`` is the end of its stderr."""
    msg = info + "; the session's state was lost and the next run starts a fresh worker"
    if len(tail) > _TAIL:
        # The interpreter's own verdict ("Fatal Python error: ...") heads its dump: keep it.
        fatal = next((ln for ln in tail.splitlines() if ln.startswith("Fatal Python")), "")
        if fatal and fatal not in tail[-_TAIL:]:
            msg += f"\n{fatal}"
        msg += f"\nthe last 1,500 characters of the worker's stderr:\n{tail[-_TAIL:]}"
    elif tail:
        msg += f"\nthe worker's stderr ended with:\n{tail}"
    return ExecutionResult(
        error=ErrorInfo("WorkerCrashed", msg),
        state_lost=True,
        duration_ms=(time.perf_counter() - start) * 1000,
    )
