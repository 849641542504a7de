"""Metrics and tracing as one layer of each chain, when both are on (``codemode serve``'s
default).

Why: each layer of the tool-call chain costs a frame, and the two layers each read the
clock, the run, the call's notes and the arguments' JSON. With five calls a run, that
was half of what observability added to a run on the event loop's thread. Here one
frame does both for the common case, a call of a run (sampled or not) that returns or
raises; a call outside any run goes through the two layers as they are. What is
counted and what is traced is the same either way (``tests/observability/test_observe``).

The run hook is one frame too; memory operations keep the two layers.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..chain import NextRun, RunEvent
from ..hostapi import for_methods
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall
from .labels import error_type
from .metrics import (
    Metrics,
    args_size,
    is_memory_method,
    output_size,
    result_bytes,
    run_outcome,
)
from .spans import run_summary
from .tracing import _UNSAMPLED, Tracing, _Run

_clock_ns = time.perf_counter_ns
_now = time.time_ns  # the SDK's clock, as tracing's: a run's start, its spans' origin


class Observe:
    """``metrics`` outermost, then ``tracing``, as the two layers at stage ``observe``."""

    def __init__(self, metrics: Metrics, tracing: Tracing) -> None:
        self.metrics = metrics
        self.tracing = tracing

    def tool_layer(self, call: ToolCall, call_next: NextCall) -> Awaitable[Any]:
        tracing = self.tracing
        run_id = call.context.run_id
        run = tracing._runs.get(run_id) if run_id else None
        if run is None:  # outside any run: its own span, rare
            metrics = self.metrics
            return metrics.tool_layer(call, lambda c: tracing.tool_layer(c, call_next))
        if run is _UNSAMPLED:  # no span: counted as the metrics layer counts
            return self.metrics.tool_layer(call, call_next)
        return self._traced(call, call_next, run)

    async def _traced(self, call: ToolCall, call_next: NextCall, run: _Run) -> Any:
        """A call of a traced run notes one tuple, for its span: the run's end hands its
        calls to the tally with the run (``Tally._ops``), so no per-call note is made."""
        tracing = self.tracing
        # The arguments as they arrive (inner layers replace them, never change them):
        # encoding them as JSON, to hash for the span and measure for the metrics, is
        # left to the tracing emitter and the tally's fold, in batches off the call's path.
        args = call.args
        token = tracing._attach(run.context) if tracing.propagate else None  # to upstreams
        received = error = None
        # One clock for both: the span's times are the run's wall-clock start plus
        # monotonic offsets (_Run.offset).
        start = _clock_ns()
        try:
            result = await call_next(call)
        except BaseException as exc:
            end = _clock_ns()
            error = type(exc).__name__
            metrics = self.metrics
            series = metrics._tool_series(call.server, call.tool)
            outcome = metrics._tool_failure(exc)
            metrics._count_call(series, outcome, (end - start) * 1e-9, args_size(args), 0, None)
            raise
        else:
            end = _clock_ns()
            received = call.notes.get("bytes")  # the registry's measure, as result_bytes
            if received is None:
                received = result_bytes(call, result)
            return result
        finally:
            if token is not None:
                tracing._detach(token)
            offset = run.offset
            fields = (call.server, call.tool, None, call.context.run_id, offset + start, args, 0,
                      received, offset + end, error)  # fmt: skip
            if not run.end:  # the call's Op as its fields (spans.op_fields)
                run.ops.append(fields)
            elif error is None:  # returned after its run ended: counted alone
                self.metrics.tally.note_call(
                    self.metrics._tool_series(call.server, call.tool),
                    (end - start) * 1e-9, args, received or 0, None,
                )  # fmt: skip

    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        """``Metrics.run_hook`` around ``Tracing.run_hook``, in one frame: the run's output
        is measured once for both, and a traced run keeps a few scalars for its span's
        attributes (``spans.run_summary``) instead of its context and result."""
        metrics, tracing = self.metrics, self.tracing
        run_id = event.context.run_id
        metrics.tally.calls.append((None, run_id))  # Tally.started, inline
        begun = _now()
        start = _clock_ns()
        run = tracing._begin("codemode.run", begun)
        token = None
        if run is not None:
            run.code = event.code
            run.offset = begun - start
            token = tracing._attach(run.context)  # inner run hooks' spans nest under it
        if run_id:
            tracing._runs[run_id] = _UNSAMPLED if run is None else run
        try:
            result = await call_next(event)
        except BaseException as exc:
            end = _clock_ns()
            if run is not None:
                run.error = type(exc).__name__
                run.end = run.offset + end
                run.summary = run_summary(event.code, event.timeout, event.context, None, "", 0)
            self._run_over(run, run_id, token)
            ops = None if run is None else run.ops
            metrics._run_raised(exc, (end - start) * 1e-9, run_id, ops)
            raise
        end = _clock_ns()
        out = output_size(result)
        outcome = run_outcome(result)
        if run is not None:
            if result.error is not None:
                run.error = result.error.type
            run.end = run.offset + end
            run.summary = run_summary(
                event.code, event.timeout, event.context, result, outcome, out
            )
        self._run_over(run, run_id, token)
        ops = None if run is None else run.ops  # its calls, counted with it
        metrics._end_run(outcome, (end - start) * 1e-9, run_id, result, out, ops)
        if result.error is not None:
            metrics._bound(metrics.run_errors, error_type(result.error.type)).inc()
        return result

    def _run_over(self, run: _Run | None, run_id: str | None, token: Any) -> None:
        tracing = self.tracing
        if token is not None:
            tracing._detach(token)
        if run_id:
            tracing._runs.pop(run_id, None)
        if run is not None:
            tracing._submit(run)

    @for_methods(is_memory_method)
    async def host_layer(
        self, method: str, params: dict[str, Any], call_next: Callable[[dict[str, Any]], Any]
    ) -> Any:
        tracing = self.tracing
        return await self.metrics.host_layer(
            method, params, lambda p: tracing.host_layer(method, p, call_next)
        )


__all__ = ["Observe"]
