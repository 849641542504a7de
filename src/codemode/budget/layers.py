"""The ``budget`` stages: on the tool-call chain (calls, calls per tool, bytes received)
and on the run chain (running time, output size).

A tool call is counted before it runs, once every layer outside this one let it through,
so refused calls cost nothing; the bytes it returns are counted after. A limit on bytes
cannot know a result's size in advance: the call that crosses it still returns its result
(it ran), and the calls after it are refused. Running time does not count the time spent
waiting for a person (as the run's timeout does not); a run's timeout is cut to what its
wall-time budgets leave, and a run stopped there says which budget stopped it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from ..chain import NextRun, RunEvent, RunHook
from ..result import ErrorInfo, ExecutionResult
from ..tools.registry import Middleware, NextCall, ToolCall
from .ledger import RUN_LIMITS, Ledger, exceeded, spent_of


def tool_layer(ledger: Ledger) -> Middleware:
    async def layer(call: ToolCall, call_next: NextCall) -> Any:
        spec = call.spec
        names = spec.names
        usages = ledger.charge_call(call.context, names, server=spec.py_server, tool=spec.py_name)
        waited: float = call.notes.get("approval_wait") or 0.0
        run = ledger.run(call.context) if waited else None
        if run is not None:
            run.waited += waited
        try:
            return await call_next(call)
        finally:
            size = call.notes.get("bytes", 0)
            for usage in usages:
                usage.tool_bytes += size
            call.notes["budget"] = ledger.state(call.context)

    return layer


def run_hook(ledger: Ledger) -> RunHook:
    config = ledger.config

    async def hook(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        ctx = event.context
        session = ledger.session(ctx) if config.session.active else None
        limits = config.session
        spent = spent_of("session", session, limits, RUN_LIMITS) if session else None
        if spent is not None:
            return ExecutionResult(error=ErrorInfo("BudgetExceeded", str(spent)))
        cut: tuple[str, str, float] | None = None  # (scope, setting, seconds) that cut the timeout
        if config.run.wall_time is not None and config.run.wall_time < event.timeout:
            cut = ("run", "wall_time", config.run.wall_time)
            event.timeout = config.run.wall_time
        if session is not None and limits.wall_time is not None:
            left = limits.wall_time - session.wall_time
            if left < event.timeout:
                cut = ("session", "wall_time", limits.wall_time)
                event.timeout = left
        run = ledger.run(ctx)
        try:
            result = await call_next(event)
        finally:
            ledger.end_run(ctx)
        waited = run.waited if run is not None else 0.0
        running = max(result.duration_ms / 1000 - waited, 0.0)
        if cut is not None and result.timed_out:
            scope, setting, limit = cut
            stop = exceeded(
                scope,
                setting,
                "seconds of running code",
                limit,
                running + (session.wall_time if scope == "session" and session else 0),
            )
            result = replace(
                result,
                error=ErrorInfo(
                    "BudgetExceeded",
                    f"the run was stopped: {stop}",
                    traceback=result.error.traceback if result.error else "",
                ),
            )
        result, size = _cap_output(result, config.run.output_bytes)
        if session is not None:
            session.wall_time += running
            session.output_bytes += size
        return result

    return hook


def output_size(result: ExecutionResult) -> int:
    size = len(result.stdout.encode()) + len(result.stderr.encode())
    if result.has_value:
        value = result.value if result.value_is_repr else json.dumps(result.value, default=str)
        size += len(str(value).encode())
    return size


def _cap_output(result: ExecutionResult, limit: int | None) -> tuple[ExecutionResult, int]:
    """The result cut to ``limit`` bytes of output (with a BudgetExceeded error), and its
    size before the cut."""
    size = output_size(result)
    if limit is None or size <= limit:
        return result, size
    stop = exceeded("run", "output_bytes", "bytes of output", limit, size)
    stdout = _cut(result.stdout, limit)
    stderr = _cut(result.stderr, max(limit - len(stdout.encode()), 0))
    changes: dict[str, Any] = {
        "stdout": stdout,
        "stderr": stderr,
        "stdout_truncated": result.stdout_truncated or stdout != result.stdout,
        "stderr_truncated": result.stderr_truncated or stderr != result.stderr,
        "value": None,
        "has_value": False,
        "value_truncated": result.has_value,
    }
    message = f"the output was cut: {stop}"
    if result.error is None:
        changes["error"] = ErrorInfo("BudgetExceeded", message)
    else:
        changes["warnings"] = (*result.warnings, message)
    return replace(result, **changes), size


def _cut(text: str, limit: int) -> str:
    data = text.encode()
    return text if len(data) <= limit else data[:limit].decode(errors="ignore")


__all__ = ["output_size", "run_hook", "tool_layer"]
