"""Metrics and tracing as one layer of each chain, when both are on (``codemode serve``'s
default).

Why: each layer of the tool-call chain costs a frame resumed at every await of every
call, and the two layers each read the clock, the run, the call's notes and the
arguments' JSON. With five calls a run, that was half of what observability added to a
run on the event loop's thread. Here the tool layer is a ``chain.Watch`` (``CallWatch``):
plain calls before and after the chain, from the chain's own frame, for the common case,
a call of a run (sampled or not); a call outside any run goes through the two layers as
they are. What is counted and what is traced is the same either way
(``tests/observability/test_observe``).

The run hook is one frame; memory operations keep the two layers.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..chain import AROUND, NextRun, RunEvent, Watch
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
)
from .tally import FOLD_AT
from .tracing import _UNSAMPLED, MAX_PENDING, Tracing, _Run

_clock_ns = time.perf_counter_ns
_now = time.time_ns  # the SDK's clock, as tracing's: a run's start, its spans' origin


class Observe:
    """``metrics`` outermost, then ``tracing``, as the two layers at stage ``observe``."""

    def __init__(self, metrics: Metrics, tracing: Tracing) -> None:
        self.metrics = metrics
        self.tracing = tracing
        self.tool_layer = CallWatch(metrics, tracing)
        """A ``Watch``: outermost in the registry's chain, no frame of its own per call."""
        # Looked up once: the tally's notes and tracing's run table are never replaced,
        # and each run reads them twice on the event loop's thread.
        self._notes = metrics.tally.calls
        self._runs = tracing._runs

    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        """``Metrics.run_hook`` around ``Tracing.run_hook``, in one frame: the run's output
        is measured once for both, and a traced run keeps what its span's attributes are
        made of (``spans.run_summary``'s arguments), made into them by the emitter."""
        tracing, notes, runs = self.tracing, self._notes, self._runs
        run_id = event.context.run_id
        notes.append((None, run_id))  # Tally.started, inline
        begun = _now()
        start = _clock_ns()
        run = tracing._begin("codemode.run", begun)
        token = None
        if run is not None:
            run.code = event.code
            run.offset = begun - start
            if tracing.propagate:  # inner run hooks' spans, and its calls, have it current
                token = tracing._attach(run.context)
        if run_id:
            runs[run_id] = _UNSAMPLED if run is None else run
        try:
            result = await call_next(event)
        except BaseException as exc:
            end = _clock_ns()
            if run is not None:
                run.error = type(exc).__name__
                run.end = run.offset + end
                run.summary = (event.timeout, event.context)
            self._run_over(run, run_id, token)
            ops = None if run is None else run.ops
            self.metrics._run_raised(exc, (end - start) * 1e-9, run_id, ops)
            raise
        end = _clock_ns()
        if token is not None:
            tracing._detach(token)
        if run_id:
            runs.pop(run_id, None)
        out = output_size(result)
        error = result.error
        # run_outcome, inline.
        if result.timed_out or (error is not None and error.type == "Timeout"):
            outcome = "timeout"
        elif result.state_lost:
            outcome = "crashed"
        else:
            outcome = "ok" if error is None else "error"
        cpu, peak = result.cpu_seconds, result.peak_memory_bytes
        ops = None
        if run is not None:
            if error is not None:
                run.error = error_type(error.type)  # as Tracing.run_hook: no code text
            run.end = run.offset + end
            run.summary = (event.timeout, event.context, outcome, out, cpu, peak)
            ops = run.ops  # its calls, counted with it
            pending = tracing._pending  # Tracing._submit, inline for the common case
            if tracing._thread is not None and pending.qsize() < MAX_PENDING:
                pending.put(run)
            else:
                tracing._submit(run)
        # Metrics._end_run, inline: noted for the next fold, no lock.
        notes.append((outcome, (end - start) * 1e-9, out, cpu, peak, run_id, ops))
        if len(notes) >= FOLD_AT:
            with self.metrics._lock:
                self.metrics.tally.fold()
        if error is not None:
            self.metrics._bound(self.metrics.run_errors, error_type(error.type)).inc()
        return result

    def _run_over(self, run: _Run | None, run_id: str | None, token: Any) -> None:
        tracing = self.tracing
        if token is not None:
            tracing._detach(token)
        if run_id:
            self._runs.pop(run_id, None)
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


class CallWatch(Watch[ToolCall, Any]):
    """A tool call as both layers see it, in plain calls before and after the chain
    (``chain.Watch``): a call of a traced run notes one tuple, for its span (the run's end
    hands its calls to the tally with the run, ``Tally._ops``); a call of an unsampled run
    is counted as the metrics layer counts; a call outside any run goes through the two
    layers as they are (its own span, rare)."""

    __slots__ = ("get_current", "metrics", "propagate", "runs_get", "tracing")

    def __init__(self, metrics: Metrics, tracing: Tracing) -> None:
        self.metrics = metrics
        self.tracing = tracing
        # Looked up once (tracing's run table, context getter and setting never change).
        self.runs_get = tracing._runs.get
        self.get_current = tracing._get_current
        self.propagate = tracing.propagate

    def start(self, call: ToolCall) -> Any:
        run = self.runs_get(call.context.run_id)  # None is never a key: no run, no entry
        if run is None:
            return AROUND
        # The arguments as they arrive (inner layers replace them, never change them):
        # encoding them as JSON, to hash for the span and measure for the metrics, is
        # left to the tracing emitter and the tally's fold, in batches off the call's path.
        if run is _UNSAMPLED:
            return (None, call.args, None, _clock_ns())
        # Tracing._call_context, inline: with propagation, the run's span is current in
        # its calls already (the executor serves them in the run's context).
        current = self.get_current()
        if self.propagate:
            if current is run.context:  # the common case
                return (run, call.args, None, _clock_ns())
            token = self.tracing._attach(run.context)
        elif current:  # a client's trace, not to be passed on
            token = self.tracing._attach(self.tracing._empty)
        else:
            token = None
        # One clock for both: the span's times are the run's wall-clock start plus
        # monotonic offsets (_Run.offset), added after the run (spans.CallNote).
        return (run, call.args, token, _clock_ns())

    def returned(self, state: Any, call: ToolCall, result: Any) -> None:
        end = _clock_ns()
        run, args, token, start = state
        if token is not None:
            self.tracing._detach(token)
        received = call.notes.get("bytes")  # the registry's measure, as result_bytes
        if received is None:
            received = result_bytes(call, result)
        if run is not None and not run.end:
            # The call as a short note (spans.CallNote): its fields are read off the
            # call after the run, by the emitter or the tally's fold, not here.
            run.ops.append((call, args, start, end, received))
            return
        # Unsampled, or returned after its run ended: counted alone.
        metrics = self.metrics
        series = metrics.tally.series.get((call.server, call.tool))
        if series is None:
            series = metrics._tool_series(call.server, call.tool)
        calls = metrics.tally.calls  # Tally.note_call, inline
        calls.append((series, (end - start) * 1e-9, args, received,
                      None if run is not None else call.context.run_id))  # fmt: skip
        if len(calls) >= FOLD_AT:
            with metrics._lock:
                metrics.tally.fold()

    def raised(self, state: Any, call: ToolCall, exc: BaseException) -> None:
        end = _clock_ns()
        run, args, token, start = state
        if token is not None:
            self.tracing._detach(token)
        metrics = self.metrics
        series = metrics._tool_series(call.server, call.tool)
        outcome = metrics._tool_failure(exc)
        metrics._count_call(series, outcome, (end - start) * 1e-9, args_size(args), 0, None)
        if run is not None and not run.end:
            offset = run.offset
            run.ops.append((call.server, call.tool, None, call.context.run_id, offset + start,
                            args, 0, None, offset + end, type(exc).__name__))  # fmt: skip

    def around(self, call: ToolCall, call_next: NextCall) -> Awaitable[Any]:
        tracing = self.tracing
        return self.metrics.tool_layer(call, lambda c: tracing.tool_layer(c, call_next))


__all__ = ["CallWatch", "Observe"]
