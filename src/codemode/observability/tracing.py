"""OpenTelemetry traces of runs and tool calls (the ``otel`` extra).

A span per run (``codemode.run``) with a child span per tool call it makes
(``execute_tool server.tool``) and per memory operation (``codemode.memory state.set``).
Attributes follow the GenAI semantic conventions where they apply
(``gen_ai.operation.name``, ``gen_ai.tool.name``, ``error.type``); code, arguments and
results never go into a span: their SHA-256 and sizes do. A run started inside a remote
span (``remote_parent``, from the MCP request's ``_meta.traceparent``) joins that trace.

Why it is built this way: an SDK span costs tens of microseconds, as much as a tool call
through a warm worker, and a run with five calls paid it six times on its critical path.
So only the run's span is started while the run is live (it takes the sampling decision
and the parent), and the tracer's sampler is honoured before anything else: the calls of
an unsampled run cost one dict lookup. A sampled run's calls note their clock times and
sizes; the child spans are built with those explicit times, and the run's span is ended,
by one emitter thread after the run has returned. ``Tracing.flush()`` waits for it (tests,
shutdown). Tool calls are served on tasks of their own, so the run is found by the run id
the call carries, not by the ambient context.

Imports ``opentelemetry`` when a ``Tracing`` is built; ``install_hint`` says what to
install when it is missing.
"""

from __future__ import annotations

import atexit
import hmac
import logging
import queue
import secrets
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..chain import NextRun, RunEvent
from ..context import CallContext, current_context
from ..errors import ConfigError
from ..hostapi import for_methods
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall
from .metrics import args_json, is_memory_method, output_size, result_bytes, run_outcome, size_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

INSTALL_HINT = "tracing needs OpenTelemetry: pip install 'codemode[otel]'"
SCOPE = "codemode"
MAX_PENDING = 4096
"""Finished runs waiting for the emitter; past this, runs are not traced (counted in
``Tracing.dropped``) rather than holding memory without bound."""

log = logging.getLogger("codemode.tracing")
_now = time.time_ns  # the SDK's clock: explicit span times must come from it


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return trace


_DIGEST_KEY = secrets.token_bytes(32)


def digest(text: str) -> str:
    """HMAC-SHA256 of ``text`` under a key of this process: equal arguments (or code) match
    across its spans, but a tracing backend cannot confirm a guessed value (a card number,
    an id) by hashing it, as it could with a plain SHA-256 of a small space of candidates."""
    return hmac.digest(_DIGEST_KEY, text.encode("utf-8", "surrogatepass"), "sha256").hex()


@dataclass(slots=True)
class _Op:
    """A tool call (``method`` None) or memory operation of a run, noted cheaply: only
    immutable values, so the emitter thread can read them later."""

    server: str
    tool: str
    method: str | None
    run_id: str | None
    start: int
    args_text: str = ""  # canonical JSON of a tool call's arguments (hashed later)
    params_bytes: int = 0
    result_bytes: int | None = None
    end: int = 0
    error: str | None = None

    def name(self) -> str:
        if self.method is None:
            return f"execute_tool {self.server}.{self.tool}"
        return f"codemode.memory {self.method}"

    def attributes(self) -> dict[str, Any]:
        if self.method is None:
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": f"{self.server}.{self.tool}",
                "gen_ai.tool.type": "function",
                "codemode.tool.server": self.server,
                "codemode.tool.arguments.bytes": size_of(self.args_text),
                "codemode.tool.arguments.hmac": digest(self.args_text),
            }
            if self.result_bytes is not None:
                attrs["codemode.tool.result.bytes"] = self.result_bytes
        else:
            attrs = {
                "codemode.memory.method": self.method,
                "codemode.memory.area": self.method.partition(".")[0],
                "codemode.memory.params.bytes": self.params_bytes,
            }
            if self.result_bytes is not None:
                attrs["codemode.memory.result.bytes"] = self.result_bytes
        if self.run_id:
            attrs["codemode.run.id"] = self.run_id
        return attrs


@dataclass(slots=True)
class _Run:
    """A sampled run whose span is live, with its operations so far; or (``op`` set) a
    call outside any run, whose own span is live."""

    span: Span
    facts: tuple[str, float, CallContext, ExecutionResult | None] | None = None
    """Code, timeout, context and result of a finished run (all immutable): the emitter
    turns them into the span's attributes, off the run's critical path."""
    code: str = ""
    end: int = 0
    error: str | None = None
    ops: list[_Op] = field(default_factory=list)
    op: _Op | None = None
    context: Any = None
    """The OpenTelemetry context with ``span`` current."""


_UNSAMPLED: Any = object()  # a run the sampler dropped: its calls make no spans


class Tracing:
    """The run hook, tool-call layer and host layer that make spans (stage ``observe``)."""

    def __init__(self, provider: TracerProvider | None = None, *, propagate: bool = True) -> None:
        trace = _otel()
        from opentelemetry import context as otel_context
        from opentelemetry.trace import Status, StatusCode

        self._trace = trace
        self._context = otel_context
        self._error_status = Status(StatusCode.ERROR)  # no description: it may quote values
        self.provider = provider
        self.tracer: Tracer = (
            provider.get_tracer(SCOPE) if provider is not None else trace.get_tracer(SCOPE)
        )
        self._runs: dict[str, Any] = {}  # run id -> _Run, or _UNSAMPLED
        self.propagate = propagate
        """Whether a tool call runs with its run's span current, so the MCP SDK passes the
        trace on to upstream servers in the request's ``_meta`` (about 20 µs of the loop's
        CPU per upstream call, and the upstream server's work to read it)."""
        self._pending: queue.SimpleQueue[_Run | threading.Event | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.dropped = 0
        """Finished runs not traced because the emitter was ``MAX_PENDING`` behind."""
        self.emitter_cpu = 0.0
        """CPU seconds the emitter thread spent building and ending spans (what tracing
        costs besides its share of each run's critical path)."""

    # -- the run hook ----------------------------------------------------------------
    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        span = self.tracer.start_span(
            "codemode.run", record_exception=False, set_status_on_exception=False
        )
        run_id = event.context.run_id
        if not span.is_recording():
            if not run_id:
                return await call_next(event)
            self._runs[run_id] = _UNSAMPLED
            try:
                return await call_next(event)
            finally:
                self._runs.pop(run_id, None)
        run = _Run(span, code=event.code, context=self._trace.set_span_in_context(span))
        if run_id:
            self._runs[run_id] = run
        # Current in the run's own task, so spans of inner run hooks nest under it.
        token = self._context.attach(run.context)
        result: ExecutionResult | None = None
        try:
            result = await call_next(event)
        except BaseException as exc:
            run.error = type(exc).__name__
            raise
        else:
            if result.error is not None:
                run.error = result.error.type
            return result
        finally:
            run.end = _now()
            run.facts = (event.code, event.timeout, event.context, result)
            self._context.detach(token)
            if run_id:
                self._runs.pop(run_id, None)
            self._submit(run)

    # -- the tool-call layer ---------------------------------------------------------
    async def tool_layer(self, call: ToolCall, call_next: NextCall) -> Any:
        run_id = call.context.run_id
        run = self._runs.get(run_id) if run_id else None
        if run is _UNSAMPLED:
            return await call_next(call)
        # The arguments as they arrive, before inner layers may rewrite them.
        op = _Op(call.server, call.tool, None, run_id, _now(), args_text=args_json(call))
        if run is None and (run := self._own_span(op)) is None:
            return await call_next(call)
        # The run's span is current during the call (calls are served on tasks of their
        # own), so an upstream MCP client passes the run's trace on in the request _meta.
        token = self._context.attach(run.context) if self.propagate else None
        try:
            result = await call_next(call)
        except BaseException as exc:
            op.error = type(exc).__name__
            raise
        else:
            op.result_bytes = result_bytes(call, result)
            return result
        finally:
            if token is not None:
                self._context.detach(token)
            self._done(run, op)

    # -- memory operations (a host layer) --------------------------------------------
    @for_methods(is_memory_method)
    async def host_layer(
        self, method: str, params: dict[str, Any], call_next: Callable[[dict[str, Any]], Any]
    ) -> Any:
        """A span per memory operation (``codemode.memory state.set``...), a child of the
        run that made it; names and values stay out, their size goes in."""
        if not is_memory_method(method):
            return await call_next(params)
        run_id = current_context.get().run_id
        run = self._runs.get(run_id) if run_id else None
        if run is _UNSAMPLED:
            return await call_next(params)
        op = _Op("", "", method, run_id, _now(), params_bytes=size_of(params))
        if run is None and (run := self._own_span(op)) is None:
            return await call_next(params)
        try:
            result = await call_next(params)
        except BaseException as exc:
            op.error = type(exc).__name__
            raise
        else:
            op.result_bytes = size_of(result)  # now: the value may change once returned
            return result
        finally:
            self._done(run, op)

    def _own_span(self, op: _Op) -> _Run | None:
        """A call outside any run: a span of its own in the ambient trace (None when the
        sampler drops it)."""
        span = self.tracer.start_span(
            op.name(),
            kind=self._trace.SpanKind.INTERNAL,
            start_time=op.start,
            record_exception=False,
            set_status_on_exception=False,
        )
        if not span.is_recording():
            return None
        return _Run(span, op=op, context=self._trace.set_span_in_context(span))

    def _done(self, run: _Run, op: _Op) -> None:
        op.end = _now()
        if run.op is op:
            run.end = op.end
            self._submit(run)
        else:
            run.ops.append(op)

    # -- the emitter -----------------------------------------------------------------
    def _submit(self, run: _Run) -> None:
        if self._thread is None:
            self._start()
        if self._pending.qsize() >= MAX_PENDING:
            self.dropped += 1
            return
        self._pending.put(run)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=_emit_loop,
                    args=(weakref.ref(self), self._pending),
                    name="codemode-tracing",
                    daemon=True,
                )
                self._thread.start()
                _live.add(self)
                weakref.finalize(self, self._pending.put, None)  # collected: thread ends

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every finished run's spans are ended (so the span processor has
        them), then flush the provider; False when ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        if self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            self._pending.put(done)
            if not done.wait(timeout):
                return False
        force = getattr(self.provider, "force_flush", None)
        if force is None:
            return True
        left = max(0.0, deadline - time.monotonic())
        return bool(force(int(left * 1000)))

    def close(self) -> None:
        """Emit what is pending and stop the emitter thread (a later run starts another)."""
        self.flush()
        with self._start_lock:
            thread, self._thread = self._thread, None
            if thread is not None and thread.is_alive():
                self._pending.put(None)
                thread.join(5)
        _live.discard(self)

    def _emit(self, run: _Run) -> None:
        """End a finished run's span and build its children (on the emitter thread)."""
        span = run.span
        if run.op is not None:
            attrs = run.op.attributes()
            error = run.op.error
        else:
            attrs = _run_attrs(*run.facts) if run.facts is not None else {}
            attrs["codemode.code.hmac"] = digest(run.code)
            error = run.error
        span.set_attributes(attrs)
        if error is not None:
            self._failed(span, error)
        if run.ops:
            parent = self._trace.set_span_in_context(span)
            kind = self._trace.SpanKind.INTERNAL
            for op in run.ops:
                child = self.tracer.start_span(
                    op.name(),
                    context=parent,
                    kind=kind,
                    attributes=op.attributes(),
                    start_time=op.start,
                    record_exception=False,
                    set_status_on_exception=False,
                )
                if op.error is not None:
                    self._failed(child, op.error)
                child.end(end_time=op.end)
        span.end(end_time=run.end)

    def _failed(self, span: Span, error_type: str) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(self._error_status)


def _run_attrs(
    code: str, timeout: float, ctx: CallContext, result: ExecutionResult | None
) -> dict[str, Any]:
    """The run span's attributes (``result`` None: the run raised, e.g. a refusal)."""
    attrs: dict[str, Any] = {
        "codemode.run.id": ctx.run_id or "",
        "codemode.session.id": ctx.session_id or "",
        "codemode.tenant": ctx.tenant,
        "codemode.code.bytes": size_of(code),
        "codemode.run.timeout_s": timeout,
    }
    if result is None:
        return attrs
    attrs["codemode.run.outcome"] = run_outcome(result)
    attrs["codemode.output.bytes"] = output_size(result)
    if result.cpu_seconds is not None:
        attrs["codemode.run.cpu_s"] = result.cpu_seconds
    if result.peak_memory_bytes is not None:
        attrs["codemode.worker.peak_memory_bytes"] = result.peak_memory_bytes
    return attrs


EMITTER_REST = 0.01
"""Seconds the emitter rests after catching up: runs finished meanwhile are queued
without waking it, so a busy loop hands it the GIL once per batch, not once per run."""


def _emit_loop(
    owner: weakref.ref[Tracing], pending: queue.SimpleQueue[_Run | threading.Event | None]
) -> None:
    while True:
        try:
            item = pending.get_nowait()
        except queue.Empty:
            time.sleep(EMITTER_REST)
            item = pending.get()
        if item is None:
            return
        if isinstance(item, threading.Event):
            item.set()
            continue
        tracing = owner()
        if tracing is None:
            return
        start = time.thread_time()
        try:
            tracing._emit(item)
        except Exception:  # a broken exporter must not stop the traces after it
            log.exception("could not emit the spans of a run")
        tracing.emitter_cpu += time.thread_time() - start
        del tracing
        # Hand the GIL to the event loop's thread if it waits: once per run, not per
        # span (each hand-off is two context switches, and a run's spans take ~0.1 ms).
        time.sleep(0)


_live: weakref.WeakSet[Tracing] = weakref.WeakSet()


def _flush_all() -> None:
    """Emit the runs still pending, before a provider shuts its exporters down."""
    for tracing in list(_live):
        tracing.flush(2.0)


atexit.register(_flush_all)  # for providers the SDK user shuts down themselves


@contextmanager
def remote_parent(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """Within the block, new spans join the trace of ``meta``'s ``traceparent`` (W3C).

    A no-op without a ``traceparent`` or without OpenTelemetry installed.
    """
    carrier = {k: v for k, v in (meta or {}).items() if k in ("traceparent", "tracestate")}
    if "traceparent" not in carrier or not isinstance(carrier["traceparent"], str):
        yield
        return
    try:
        from opentelemetry import context as otel_context
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        yield
        return
    ctx = TraceContextTextMapPropagator().extract({k: str(v) for k, v in carrier.items()})
    token = otel_context.attach(ctx)
    try:
        yield
    finally:
        otel_context.detach(token)


_providers: dict[tuple[str, str, str | None, float], Any] = {}
_providers_lock = threading.Lock()


def exporting_provider(
    exporter: str, service: str, endpoint: str | None, sample_ratio: float = 1.0
) -> TracerProvider:
    """A process-wide SDK provider exporting to ``console`` (stderr) or ``otlp`` (HTTP)
    through a batch processor, sampling ``sample_ratio`` of the traces that start here
    (a client's ``traceparent`` decides for the runs that join its trace)."""
    key = (exporter, service, endpoint, sample_ratio)
    with _providers_lock:
        got = _providers.get(key)
        if got is not None:
            return got  # type: ignore[no-any-return]
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider as SdkProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter
            from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        provider = SdkProvider(
            resource=Resource.create({"service.name": service}),
            sampler=ParentBased(TraceIdRatioBased(sample_ratio)),
            shutdown_on_exit=False,  # ours below: pending runs first, then the processor
        )
        if exporter == "console":
            # stderr: on `serve` (stdio) stdout carries the MCP protocol.
            console = ConsoleSpanExporter(out=sys.stderr)
            provider.add_span_processor(BatchSpanProcessor(console, schedule_delay_millis=500))
        else:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError as exc:
                raise ConfigError(INSTALL_HINT) from exc
            otlp = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
            provider.add_span_processor(BatchSpanProcessor(otlp))

        def shutdown() -> None:
            _flush_all()
            provider.shutdown()

        atexit.register(shutdown)
        _providers[key] = provider
        return provider


__all__ = [
    "INSTALL_HINT",
    "MAX_PENDING",
    "Tracing",
    "digest",
    "exporting_provider",
    "remote_parent",
]
