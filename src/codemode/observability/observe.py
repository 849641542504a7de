"""Metrics and tracing as one layer of each chain, when both are on (``codemode serve``'s
default).

Why: each layer of the tool-call chain costs a frame, and the two layers each read the
clock, the run, the call's notes and the arguments' JSON. With five calls a run, that
was half of what observability added to a run on the event loop's thread. Here one
frame does both for the common case, a call of a run (sampled or not) that returns or
raises; a call outside any run goes through the two layers as they are. What is
counted and what is traced is the same either way (``tests/observability/test_observe``).

Run hooks and memory operations keep the two layers (one each per run, not per call).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from ..chain import NextRun, RunEvent
from ..hostapi import for_methods
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall
from .metrics import ARGS_JSON, Metrics, args_bytes, args_json, is_memory_method, result_bytes
from .tracing import _UNSAMPLED, Tracing

_clock = time.perf_counter
_now = time.time_ns  # the SDK's clock, as tracing's


class Observe:
    """``metrics`` outermost, then ``tracing``, as the two layers at stage ``observe``."""

    def __init__(self, metrics: Metrics, tracing: Tracing) -> None:
        self.metrics = metrics
        self.tracing = tracing

    async def tool_layer(self, call: ToolCall, call_next: NextCall) -> Any:
        metrics, tracing = self.metrics, self.tracing
        run_id = call.context.run_id
        run = tracing._runs.get(run_id) if run_id else None
        if run is None:  # outside any run: its own span, rare
            return await metrics.tool_layer(call, lambda c: tracing.tool_layer(c, call_next))
        series = metrics.tally.series.get((call.server, call.tool))
        if series is None:
            series = metrics._tool_series(call.server, call.tool)
        notes = call.notes
        traced = run is not _UNSAMPLED
        token = received = error = None
        if traced:
            # The arguments as they arrive, before inner layers may rewrite them.
            args = notes.get(ARGS_JSON) or args_json(call)
            begun = _now()
            if tracing.propagate:  # the run's trace goes on to upstream MCP servers
                token = tracing._attach(run.context)
        start = _clock()
        try:
            result = await call_next(call)
        except BaseException as exc:
            elapsed = _clock() - start
            error = type(exc).__name__
            outcome = metrics._tool_failure(exc)
            metrics._count_call(series, outcome, elapsed, args_bytes(call), 0, None)
            raise
        else:
            elapsed = _clock() - start
            received = notes.get("bytes")  # the registry's measure, as result_bytes
            if received is None:
                received = result_bytes(call, result)
            text = notes.get(ARGS_JSON)
            sent = len(text) if text is not None and text.isascii() else args_bytes(call)
            hist = series.seconds
            with metrics._lock:  # Metrics._count_call, inline
                hist.counts[bisect_left(hist.bounds, elapsed)] += 1
                hist.total += elapsed
                counts = series.calls
                counts["ok"] = counts.get("ok", 0) + 1
                series.sent += sent
                series.received += received
                if run_id in metrics._run_bytes:
                    metrics._run_bytes[run_id] += received
            return result
        finally:
            if token is not None:
                tracing._detach(token)
            if traced:  # the call's Op as its fields (spans.op_fields), one tuple
                run.ops.append(
                    (call.server, call.tool, None, run_id, begun, args, 0, received, _now(), error)
                )

    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        tracing = self.tracing
        return await self.metrics.run_hook(event, lambda e: tracing.run_hook(e, call_next))

    @for_methods(is_memory_method)
    async def host_layer(
        self, method: str, params: dict[str, Any], call_next: Callable[[dict[str, Any]], Any]
    ) -> Any:
        tracing = self.tracing
        return await self.metrics.host_layer(
            method, params, lambda p: tracing.host_layer(method, p, call_next)
        )


__all__ = ["Observe"]
