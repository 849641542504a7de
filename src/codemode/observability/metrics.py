"""Prometheus metrics of runs and tool calls: one ``Metrics`` object, two chain layers.

``Metrics`` owns its own ``CollectorRegistry`` (never the global one), so two instances
never collide and a test reads exact counts. The tool-call layer and the run hook sit at
the ``observe`` stage, outermost: they see refusals of policy, approvals and budgets as
well as what the tool or the code did. Labels never carry ids or values; server/tool
pairs are capped (``labels.Capped``) and error types come from a fixed vocabulary.

The context-efficiency figures compare, for runs that called tools, the bytes tools
returned into the sandbox with the bytes the run returned to the model.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from ..chain import NextRun, RunEvent, Watch
from ..execution.pool import pool_stats
from ..hostapi import for_methods
from ..result import ExecutionResult
from ..tools.registry import ToolCall
from .labels import OTHER, Capped, error_type
from .sizes import args_size, canonical, size_of
from .tally import FOLD_AT, Tally, TallyCollector, ToolSeries

_clock = time.perf_counter
MEMORY_BUCKETS = tuple(float(2**i * 1024 * 1024) for i in range(4, 14))  # 16 MiB .. 8 GiB
RUN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
TOOL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BYTES_PER_TOKEN = 4
"""Estimated tokens = bytes / 4 (the usual rule of thumb for English text and JSON)."""

RUN_OUTCOMES = ("ok", "error", "timeout", "crashed", "refused", "cancelled")
TOOL_OUTCOMES = (
    "ok",
    "error",
    "timeout",
    "denied",
    "not_found",
    "bad_arguments",
    "unavailable",
    "cancelled",
)
# Exception class name (anywhere in its MRO) -> tool-call outcome, most specific first.
_TOOL_ERROR_OUTCOMES = (
    ("ToolDenied", "denied"),
    ("ToolTimeout", "timeout"),
    ("ToolNotFound", "not_found"),
    ("ToolArgumentError", "bad_arguments"),
    ("ServerUnavailable", "unavailable"),
    ("TimeoutError", "timeout"),
)
DENIAL_REASONS = ("policy", "approval", "budget")


MEMORY_AREAS = ("skills.", "artifacts.", "state.", "deps.")


def is_memory_method(method: str) -> bool:
    """A worker -> host method of the memory (its names come from the fixed RPC table)."""
    return method.startswith(MEMORY_AREAS)


class Metrics:
    """The ``codemode_*`` metrics of one process (or one test)."""

    def __init__(self, *, max_tool_labels: int = 500, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        if process:
            ProcessCollector(registry=self.registry)
        r = self.registry
        self.tally = Tally(RUN_BUCKETS, MEMORY_BUCKETS, self._series_held)
        r.register(TallyCollector(self.tally, BYTES_PER_TOKEN))
        self.tool_labels = Capped(max_tool_labels)
        self._budgets = Capped(64)

        self.run_errors = Counter(
            "codemode_run_errors",
            "Runs that ended in an error, by error type (Python's and codemode's; others "
            "are _other).",
            ["error_type"],
            registry=r,
        )
        self.denials = Counter(
            "codemode_tool_denials",
            "Tool calls refused before reaching the tool, by what refused them.",
            ["reason"],
            registry=r,
        )
        self.budget_hits = Counter(
            "codemode_budget_hits",
            "Tool calls refused because a budget was spent, by budget.",
            ["budget"],
            registry=r,
        )
        self.entities = Capped(64)
        self.pii_tokenized = Counter(
            "codemode_pii_tokenized",
            "Personal data values replaced by tokens, by type (codemode.privacy).",
            ["entity"],
            registry=r,
        )
        self.pii_children: dict[str, Any] = {}
        """``pii_tokenized``'s child of each admitted type (``signals``: no ``labels``
        look-up, a lock and ~2 us, per type of each scan)."""
        self.approvals = Counter(
            "codemode_approvals",
            "Calls that needed a person's approval, by decision.",
            ["decision"],
            registry=r,
        )
        self.sessions_created = Counter(
            "codemode_sessions_created",
            "Sessions codemode serve opened (kept between calls; not the one-call sessions "
            "of stateless requests).",
            registry=r,
        )
        self.sessions_ended = Counter(
            "codemode_sessions_ended",
            "Sessions codemode serve closed, by reason: expired (idle), client_gone, "
            "closed (by its client), shutdown.",
            ["reason"],
            registry=r,
        )
        self.worker_acquire = Histogram(
            "codemode_worker_acquire_seconds",
            "Time a session waited for a ready worker, by source: the warm pool or a spawn.",
            ["source"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.memory_ops = Counter(
            "codemode_memory_operations",
            "Calls of runs to skills, artifacts, state and deps, by method and outcome.",
            ["method", "outcome"],
            registry=r,
        )
        self.memory_seconds = Histogram(
            "codemode_memory_operation_duration_seconds",
            "Wall time of a memory operation (skills, artifacts, state, deps), by method.",
            ["method"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.spans_dropped = Counter(
            "codemode_trace_spans_dropped",
            "Spans not exported, by reason: backlog (the tracing emitter was too far "
            "behind), export_process (the span export process was not running, or too far behind).",
            ["reason"],
            registry=r,
        )
        self.context_ratio = Gauge(
            "codemode_context_efficiency_ratio",
            "Share of the bytes tools returned that stayed in the sandbox (1 - model/tool "
            "bytes over runs that called tools; 0 before any).",
            registry=r,
        )
        self.context_ratio.set_function(self._ratio)
        self._run_bytes = self.tally.run_bytes
        self._gauges: dict[str, Gauge] = {}
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._lock = self.tally.lock
        self.tool_layer = CallCount(self)
        """The tool-call layer (stage ``observe``): a ``chain.Watch``, so outermost in the
        registry's chain it costs no frame of its own per call."""
        self.gauge_function(
            "codemode_pool_ready_workers",
            "Pre-started workers waiting in the warm pools.",
            lambda: pool_stats()[0],
        )
        self.gauge_function(
            "codemode_pool_target_workers",
            "Workers the warm pools aim to keep ready.",
            lambda: pool_stats()[1],
        )
        self.gauge_function(
            "codemode_gc_frozen_objects",
            "Objects this process froze out of the garbage collector's scans (gc.freeze): "
            "codemode serve freezes what it built at start.",
            gc.get_freeze_count,
        )

    # -- exposition ----------------------------------------------------------------
    content_type = CONTENT_TYPE_LATEST

    def exposition(self) -> bytes:
        """The text format a Prometheus server scrapes."""
        return generate_latest(self.registry)

    def gauge_function(self, name: str, help_: str, fn: Callable[[], float]) -> None:
        """A gauge read from ``fn`` at each scrape (e.g. the server's live sessions);
        a second call with the same name re-points it."""
        gauge = self._gauges.get(name)
        if gauge is None:
            gauge = self._gauges[name] = Gauge(name, help_, registry=self.registry)
        gauge.set_function(fn)

    def _ratio(self) -> float:
        with self._lock:
            self.tally.fold()  # runs noted since the last scrape
            tool, model = self.tally.context_tool, self.tally.context_model
        return max(0.0, 1.0 - model / tool) if tool > 0 else 0.0

    # -- the tool-call layer (stage "observe") ---------------------------------------
    def _count_call(
        self,
        series: ToolSeries,
        outcome: str,
        seconds: float,
        sent: int,
        received: int,
        run_id: str | None,
    ) -> None:
        with self.tally.lock:
            series.seconds.observe(seconds)
            series.calls[outcome] = series.calls.get(outcome, 0) + 1
            series.sent += sent
            series.received += received
            if run_id is not None and run_id in self._run_bytes:
                self._run_bytes[run_id] += received

    def _tool_series(self, server: str, tool: str) -> ToolSeries:
        """The tallies of one server/tool pair (``_other`` past the cap), kept so a call
        does not look them up again."""
        with self._lock:
            return self._series_held(server, tool)

    def _series_held(self, server: str, tool: str) -> ToolSeries:
        """``_tool_series`` when the tally's lock is held (its fold)."""
        series = self.tally.series.get((server, tool))
        if series is not None:
            return series
        if not self.tool_labels.admit((server, tool)):
            server = tool = OTHER
        series = self.tally.series.get((server, tool))
        if series is None:
            series = self.tally.series[(server, tool)] = ToolSeries(server, tool, TOOL_BUCKETS)
        return series

    def _tool_failure(self, exc: BaseException) -> str:
        names = {cls.__name__ for cls in type(exc).__mro__}
        if "CancelledError" in names:
            return "cancelled"
        outcome = next((o for name, o in _TOOL_ERROR_OUTCOMES if name in names), "error")
        if outcome == "denied":
            reason = getattr(exc, "reason", "")
            self.denials.labels(reason if reason in DENIAL_REASONS else OTHER).inc()
            budget = getattr(exc, "budget", "")
            if reason == "budget" and isinstance(budget, str) and budget:
                self.budget_hits.labels(budget if self._budgets.admit(budget) else OTHER).inc()
        return outcome

    # -- memory operations (a host layer) --------------------------------------------
    @for_methods(is_memory_method)
    async def host_layer(
        self, method: str, params: dict[str, Any], call_next: Callable[[dict[str, Any]], Any]
    ) -> Any:
        """Counts and times the run's calls to skills, artifacts, state and deps."""
        if not is_memory_method(method):
            return await call_next(params)
        start = time.perf_counter()
        outcome = "error"
        try:
            result = await call_next(params)
            outcome = "ok"
            return result
        finally:
            self._bound(self.memory_seconds, method).observe(time.perf_counter() - start)
            self._bound(self.memory_ops, method, outcome).inc()

    # -- the run hook (stage "observe") ----------------------------------------------
    def _bound(self, metric: Any, *labels: str) -> Any:
        """``metric.labels(*labels)``, looked up once: ``labels()`` takes a lock and
        builds its key at each call. Only for label values of a bounded set."""
        key = (id(metric), labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        run_id = event.context.run_id
        self.tally.calls.append((None, run_id))  # Tally.started, inline
        start = time.perf_counter()
        try:
            result = await call_next(event)
        except BaseException as exc:
            self._run_raised(exc, time.perf_counter() - start, run_id)
            raise
        self._end_run(run_outcome(result), time.perf_counter() - start, run_id, result)
        if result.error is not None:
            self._bound(self.run_errors, error_type(result.error.type)).inc()
        return result

    def _run_raised(
        self, exc: BaseException, seconds: float, run_id: str | None, ops: Any = None
    ) -> None:
        """A run that raised (refused by a layer, or cancelled) instead of returning."""
        cancelled = any(c.__name__ == "CancelledError" for c in type(exc).__mro__)
        self._end_run("cancelled" if cancelled else "refused", seconds, run_id, None, None, ops)
        if not cancelled:
            self.run_errors.labels(error_type(type(exc).__name__)).inc()

    def _end_run(
        self,
        outcome: str,
        seconds: float,
        run_id: str | None,
        result: ExecutionResult | None,
        out: int | None = None,
        ops: Any = None,
    ) -> None:
        """``out``: the run's ``output_size`` when the caller measured it already; ``ops``:
        its calls that noted nothing else (a traced run's, ``observe.Observe``). Noted
        for the next fold (``Tally.ended``, inline), no lock."""
        if result is None:
            note: tuple[Any, ...] = (outcome, seconds, None, None, None, run_id, ops)
        else:
            if out is None:
                out = output_size(result)
            note = (outcome, seconds, out, result.cpu_seconds, result.peak_memory_bytes, run_id,
                    ops)  # fmt: skip
        calls = self.tally.calls
        calls.append(note)
        if len(calls) >= FOLD_AT:
            with self._lock:
                self.tally.fold()


def run_outcome(result: ExecutionResult) -> str:
    if result.timed_out or (result.error is not None and result.error.type == "Timeout"):
        return "timeout"
    if result.state_lost:
        return "crashed"
    return "ok" if result.error is None else "error"


ARGS_JSON = "observe.args_json"
RESULT_BYTES = "observe.result_bytes"


def args_json(call: ToolCall) -> str:
    """The call's arguments as canonical JSON, computed once per call for the metrics and
    tracing layers (``call.notes``)."""
    text = call.notes.get(ARGS_JSON)
    if text is None:
        text = call.notes[ARGS_JSON] = canonical(call.args)
    return text


def args_bytes(call: ToolCall) -> int:
    """Bytes of the call's arguments as JSON in UTF-8 (sorting keys changes no length)."""
    return size_of(args_json(call))


def result_bytes(call: ToolCall, result: Any) -> int:
    """Bytes of what the tool returned: the registry's measure (``notes["bytes"]``, which
    budgets and the audit log use too) when it made one, else the result as JSON."""
    n = call.notes.get("bytes")
    if n is None:
        n = call.notes.get(RESULT_BYTES)
        if n is None:
            n = call.notes[RESULT_BYTES] = size_of(result)
    return int(n)


def output_size(result: ExecutionResult) -> int:
    """Bytes of what a run hands back to the model."""
    out, err = result.stdout, result.stderr  # size_of's str case, inline (most are ASCII)
    n = len(out) if out.isascii() else size_of(out)
    if err:
        n += len(err) if err.isascii() else size_of(err)
    error = result.error
    if error is not None:
        n += size_of(error.traceback or str(error))
    elif result.has_value:
        value = result.value
        n += len(value) if type(value) is str and value.isascii() else size_of(value)
    return n


_default: Metrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> Metrics:
    """The process's ``Metrics``: what the capability's layers count and /metrics shows."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Metrics()
    return _default


class CallCount(Watch[ToolCall, Any]):
    """``Metrics``' count of a tool call, in plain calls before and after the layers
    inside it (``chain.Watch``)."""

    __slots__ = ("metrics",)

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def start(self, call: ToolCall) -> Any:
        # The arguments as they arrive: inner layers replace them, never change them.
        return (call.args, _clock())

    def returned(self, state: Any, call: ToolCall, result: Any) -> None:
        elapsed = _clock() - state[1]
        metrics = self.metrics
        series = metrics.tally.series.get((call.server, call.tool))
        if series is None:
            series = metrics._tool_series(call.server, call.tool)
        # The common case inline (each call here is a few hundred ns of the loop's CPU):
        # the registry's measure of the result; the arguments are measured by the fold.
        received = call.notes.get("bytes")
        if received is None:
            received = result_bytes(call, result)
        calls = metrics.tally.calls  # Tally.note_call, inline
        calls.append((series, elapsed, state[0], received, call.context.run_id))
        if len(calls) >= FOLD_AT:
            with metrics._lock:
                metrics.tally.fold()

    def raised(self, state: Any, call: ToolCall, exc: BaseException) -> None:
        elapsed = _clock() - state[1]
        metrics = self.metrics
        series = metrics._tool_series(call.server, call.tool)
        outcome = metrics._tool_failure(exc)
        metrics._count_call(series, outcome, elapsed, args_size(state[0]), 0, None)


__all__ = [
    "BYTES_PER_TOKEN",
    "RUN_OUTCOMES",
    "TOOL_OUTCOMES",
    "CallCount",
    "Metrics",
    "args_bytes",
    "args_json",
    "args_size",
    "canonical",
    "default_metrics",
    "is_memory_method",
    "output_size",
    "result_bytes",
    "run_outcome",
    "size_of",
]
