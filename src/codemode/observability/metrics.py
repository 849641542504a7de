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

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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

from ..chain import NextRun, RunEvent
from ..execution.pool import pool_stats
from ..hostapi import for_methods
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall
from .labels import OTHER, Capped, error_type

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


@dataclass(slots=True)
class _ToolSeries:
    server: str
    tool: str
    seconds: Any
    sent: Any
    received: Any
    calls: dict[str, Any]  # outcome -> counter child


class Metrics:
    """The ``codemode_*`` metrics of one process (or one test)."""

    def __init__(self, *, max_tool_labels: int = 500, process: bool = True) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        if process:
            ProcessCollector(registry=self.registry)
        r = self.registry
        self.tool_labels = Capped(max_tool_labels)
        self._budgets = Capped(64)

        self.runs = Counter("codemode_runs", "Runs by outcome.", ["outcome"], registry=r)
        self.run_errors = Counter(
            "codemode_run_errors",
            "Runs that ended in an error, by error type (Python's and codemode's; others "
            "are _other).",
            ["error_type"],
            registry=r,
        )
        self.run_seconds = Histogram(
            "codemode_run_duration_seconds",
            "Wall time of a run, its hooks included.",
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.run_cpu = Histogram(
            "codemode_run_cpu_seconds",
            "CPU time the worker spent on a run (all its threads; rusage).",
            buckets=RUN_BUCKETS,
            registry=r,
        )
        self.run_memory = Histogram(
            "codemode_worker_peak_memory_bytes",
            "The worker's peak resident memory at the end of each run (rusage).",
            buckets=MEMORY_BUCKETS,
            registry=r,
        )
        self.runs_active = Gauge("codemode_runs_in_progress", "Runs now running.", registry=r)
        self.output_bytes = Counter(
            "codemode_run_output_bytes",
            "Bytes runs returned to the model (stdout, stderr, value or error text).",
            registry=r,
        )
        self.output_tokens = Counter(
            "codemode_run_output_tokens_estimated",
            f"Estimated tokens runs returned to the model (bytes / {BYTES_PER_TOKEN}).",
            registry=r,
        )
        self.tool_calls = Counter(
            "codemode_tool_calls",
            "Tool calls by server, tool and outcome.",
            ["server", "tool", "outcome"],
            registry=r,
        )
        self.tool_seconds = Histogram(
            "codemode_tool_call_duration_seconds",
            "Wall time of a tool call, the layers inside observe included.",
            ["server", "tool"],
            buckets=TOOL_BUCKETS,
            registry=r,
        )
        self.tool_sent = Counter(
            "codemode_tool_call_sent_bytes",
            "Bytes of arguments sent to tools (JSON, UTF-8).",
            ["server", "tool"],
            registry=r,
        )
        self.tool_received = Counter(
            "codemode_tool_call_received_bytes",
            "Bytes of results tools returned into the sandbox (JSON, UTF-8).",
            ["server", "tool"],
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
        self.context_tool_bytes = Counter(
            "codemode_context_tool_bytes",
            "Bytes tools returned into runs that called tools.",
            registry=r,
        )
        self.context_model_bytes = Counter(
            "codemode_context_model_bytes",
            "Bytes those same runs returned to the model.",
            registry=r,
        )
        self.context_ratio = Gauge(
            "codemode_context_efficiency_ratio",
            "Share of the bytes tools returned that stayed in the sandbox (1 - model/tool "
            "bytes over runs that called tools; 0 before any).",
            registry=r,
        )
        self.context_ratio.set_function(self._ratio)
        self._run_bytes: dict[str, int] = {}
        self._context = (0, 0)  # tool bytes, model bytes (read together by the gauge)
        self._gauges: dict[str, Gauge] = {}
        self._series: dict[tuple[str, str], _ToolSeries] = {}
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}
        self._lock = threading.Lock()
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
        tool, model = self._context
        return max(0.0, 1.0 - model / tool) if tool > 0 else 0.0

    # -- the tool-call layer (stage "observe") ---------------------------------------
    async def tool_layer(self, call: ToolCall, call_next: NextCall) -> Any:
        series = self._series.get((call.server, call.tool))
        if series is None:
            series = self._tool_series(call.server, call.tool)
        start = time.perf_counter()
        outcome = "error"
        try:
            result = await call_next(call)
            outcome = "ok"
        except BaseException as exc:
            outcome = self._tool_failure(exc)
            raise
        finally:
            series.seconds.observe(time.perf_counter() - start)
            calls = series.calls.get(outcome)
            if calls is None:
                calls = series.calls[outcome] = self.tool_calls.labels(
                    series.server, series.tool, outcome
                )
            calls.inc()
            series.sent.inc(args_bytes(call))
        received = result_bytes(call, result)
        series.received.inc(received)
        run_id = call.context.run_id
        if run_id is not None and run_id in self._run_bytes:
            with self._lock:
                if run_id in self._run_bytes:
                    self._run_bytes[run_id] += received
        return result

    def _tool_series(self, server: str, tool: str) -> _ToolSeries:
        """The labelled children of one server/tool pair (``_other`` past the cap), kept so
        a call does not look them up again."""
        if not self.tool_labels.admit((server, tool)):
            got = self._series.get((OTHER, OTHER))
            if got is not None:
                return got
            server = tool = OTHER
        series = _ToolSeries(
            server,
            tool,
            self.tool_seconds.labels(server, tool),
            self.tool_sent.labels(server, tool),
            self.tool_received.labels(server, tool),
            {},
        )
        with self._lock:
            self._series[(server, tool)] = series
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
    def _run_counter(self, outcome: str) -> Any:
        """The ``codemode_runs_total`` child of ``outcome``."""
        return self._bound(self.runs, outcome)

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
        if run_id is not None:
            with self._lock:
                self._run_bytes[run_id] = 0
        self.runs_active.inc()
        start = time.perf_counter()
        try:
            result = await call_next(event)
        except BaseException as exc:
            cancelled = any(c.__name__ == "CancelledError" for c in type(exc).__mro__)
            self._run_counter("cancelled" if cancelled else "refused").inc()
            if not cancelled:
                self.run_errors.labels(error_type(type(exc).__name__)).inc()
            raise
        finally:
            self.run_seconds.observe(time.perf_counter() - start)
            self.runs_active.dec()
            if run_id is not None:
                with self._lock:
                    tool_bytes = self._run_bytes.pop(run_id, 0)
        self._run_counter(run_outcome(result)).inc()
        if result.error is not None:
            self.run_errors.labels(error_type(result.error.type)).inc()
        if result.cpu_seconds is not None:
            self.run_cpu.observe(result.cpu_seconds)
        if result.peak_memory_bytes is not None:
            self.run_memory.observe(result.peak_memory_bytes)
        out = output_size(result)
        self.output_bytes.inc(out)
        self.output_tokens.inc(out / BYTES_PER_TOKEN)
        if tool_bytes > 0:
            self.context_tool_bytes.inc(tool_bytes)
            self.context_model_bytes.inc(out)
            with self._lock:
                tool, model = self._context
                self._context = (tool + tool_bytes, model + out)
        return result


def run_outcome(result: ExecutionResult) -> str:
    if result.timed_out or (result.error is not None and result.error.type == "Timeout"):
        return "timeout"
    if result.state_lost:
        return "crashed"
    return "ok" if result.error is None else "error"


# Built once: json.dumps with options builds an encoder per call, a third of its cost.
_CANONICAL = json.JSONEncoder(sort_keys=True, default=str, ensure_ascii=False)
_PLAIN = json.JSONEncoder(default=str, ensure_ascii=False)


def size_of(value: Any) -> int:
    """Bytes of ``value`` as JSON in UTF-8 (bytes and strings as themselves)."""
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray | memoryview):
        return len(value)
    if isinstance(value, str):
        return len(value.encode("utf-8", "surrogatepass"))
    try:
        text = _PLAIN.encode(value)
    except (TypeError, ValueError):  # circular, or a default that failed
        text = repr(value)
    return len(text.encode("utf-8", "surrogatepass"))


ARGS_JSON = "observe.args_json"
RESULT_BYTES = "observe.result_bytes"


def args_json(call: ToolCall) -> str:
    """The call's arguments as canonical JSON (sorted keys), computed once per call for
    the metrics and tracing layers (``call.notes``)."""
    text = call.notes.get(ARGS_JSON)
    if text is None:
        try:
            text = _CANONICAL.encode(call.args)
        except (TypeError, ValueError):  # keys of mixed types, circular
            text = repr(call.args)
        call.notes[ARGS_JSON] = text
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
    n = size_of(result.stdout) + size_of(result.stderr)
    if result.error is not None:
        n += size_of(result.error.traceback or str(result.error))
    elif result.has_value:
        n += size_of(result.value)
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


__all__ = [
    "BYTES_PER_TOKEN",
    "RUN_OUTCOMES",
    "TOOL_OUTCOMES",
    "Metrics",
    "args_bytes",
    "args_json",
    "default_metrics",
    "is_memory_method",
    "output_size",
    "result_bytes",
    "run_outcome",
    "size_of",
]
