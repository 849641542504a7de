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
shutdown). With ``Tracing.exporting`` (``codemode serve``'s default) the run's span is not
an SDK span either: its identity is decided live as the SDK would, and the emitter hands
plain values to a child process that builds and exports the spans (``export_process``),
so their CPU does not hold this process's GIL. Tool calls are served on tasks of their
own, so the run is found by the run id the call carries, not by the ambient context.

Imports ``opentelemetry`` when a ``Tracing`` is built; ``install_hint`` says what to
install when it is missing.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
import weakref
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from ..chain import NextRun, RunEvent
from ..context import CallContext, current_context
from ..errors import ConfigError
from ..hostapi import for_methods
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall
from . import signals
from .emitter import EMITTER_REST, EXPORT_REST, emit_loop, flush_all, live
from .labels import error_type
from .metrics import args_json, is_memory_method, result_bytes, size_of
from .spans import (
    Op,
    OpFields,
    Record,
    children,
    digest,
    failed,
    op_fields,
    random_id,
    run_attrs,
    run_summary,
    summary_attrs,
    texts,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext, Tracer, TracerProvider

    from .export_process import ExportProcess

INSTALL_HINT = "tracing needs OpenTelemetry: pip install 'codemode[otel]'"
SCOPE = "codemode"
MAX_PENDING = 4096
"""Finished runs waiting for the emitter; past this, runs are not traced (counted in
``Tracing.dropped``) rather than holding memory without bound."""

log = logging.getLogger("codemode.tracing")
_now = time.time_ns  # the SDK's clock: explicit span times must come from it
_bits = random.getrandbits  # the SDK's RandomIdGenerator draws its ids so


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return trace


class _Run:
    """A sampled run whose span is live, with its operations so far; or (``op`` set) a
    call outside any run, whose own span is live.

    A plain class, its defaults on the class: a run sets the few fields it has (an
    instance keeps them inline, no dict), where a dataclass's ``__init__`` stored all
    twelve on the event loop's thread at every sampled run's start."""

    facts: tuple[str, float, CallContext, ExecutionResult | None] | None = None
    """Code, timeout, context and result of a finished run (all immutable): the emitter
    turns them into the span's attributes, off the run's critical path."""
    summary: tuple[Any, ...] | None = None
    """Or (``observe.Observe``) what ``spans.run_summary`` takes besides the code: the
    timeout and context, then (a run that returned) its outcome, output bytes, CPU seconds
    and peak memory; all immutable, made into the attributes' values by the emitter."""
    code: str = ""
    end: int = 0
    error: str | None = None
    op: Op | None = None
    offset: int = 0
    """Set by ``observe.Observe``: the wall-clock ns of the run's start minus the
    ``perf_counter_ns`` then, so its calls' span times cost one monotonic read each."""
    start: int = 0
    parent: SpanContext | None = None
    """Start and parent of a span built by the export process (``span`` is then a
    non-recording span carrying the identity decided live)."""

    def __init__(
        self,
        span: Span,
        context: Any,
        start: int = 0,
        parent: SpanContext | None = None,
    ) -> None:
        self.span = span
        self.context = context
        """The OpenTelemetry context with ``span`` current."""
        self.ops: list[OpFields] = []
        if start:
            self.start = start
        if parent is not None:
            self.parent = parent

    def fields(self) -> tuple[Any, ...]:
        """What the export process needs besides the facts: ids, parent, the trace state
        the sampler gave the span (its parent's), and times."""
        span, p = self.span, self.parent
        ids = getattr(span, "ids", None)  # identity.Identity: its integers, no SpanContext
        if ids is not None:
            trace_id, span_id, trace_state = ids
        else:
            ctx = span.get_span_context()
            trace_id, span_id, trace_state = ctx.trace_id, ctx.span_id, ctx.trace_state
        state = trace_state.to_header() if trace_state else ""
        if p is None:
            return (trace_id, span_id, 0, False, 0, state, self.start, self.end)
        return (trace_id, span_id, p.span_id, p.is_remote, int(p.trace_flags), state,
                self.start, self.end)  # fmt: skip


_UNSAMPLED: Any = object()  # a run the sampler dropped: its calls make no spans
_ID_LIMIT = (1 << 64) - 1  # TraceIdRatioBased.TRACE_ID_LIMIT


def _context_var(otel_context: Any) -> ContextVar[Any] | None:
    """The ContextVar OpenTelemetry keeps the current context in, when its runtime context
    is its default (``contextvars``) one; None for another (then its API is used)."""
    try:
        from opentelemetry.context.contextvars_context import ContextVarsRuntimeContext
    except ImportError:
        return None
    runtime = getattr(otel_context, "_RUNTIME_CONTEXT", None)
    var = getattr(runtime, "_current_context", None)
    if type(runtime) is ContextVarsRuntimeContext and isinstance(var, ContextVar):
        return var
    return None


class Tracing:
    """The run hook, tool-call layer and host layer that make spans (stage ``observe``)."""

    def __init__(self, provider: TracerProvider | None = None, *, propagate: bool = True) -> None:
        trace = _otel()
        from opentelemetry import context as otel_context

        self._trace = trace
        self._context = otel_context
        self.provider = provider
        self.tracer: Tracer = (
            provider.get_tracer(SCOPE) if provider is not None else trace.get_tracer(SCOPE)
        )
        self._runs: dict[str | None, Any] = {}  # run id -> _Run, or _UNSAMPLED (never None)
        self.propagate = propagate
        """Whether a tool call runs with its run's span current, so the MCP SDK passes the
        trace on to upstream servers in the request's ``_meta``. Without, no trace is
        current in a run's calls, and the run's span is not current in its own task
        either (run hooks inside this one do not see it). Measured against an MCP
        SDK server over stdio: +28 µs of wall time per call, ~8 of them on this loop and
        the rest the server's own OpenTelemetry middleware reading the traceparent, on
        the run's critical path (2-4 % of a run with 5 such calls)."""
        self._pending: queue.SimpleQueue[_Run | threading.Event | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._wake = threading.Event()  # ends the emitter's rest early (flush, close)
        self.dropped = 0
        """Finished runs not traced because the emitter was ``MAX_PENDING`` behind."""
        self.emitter_cpu = 0.0
        """CPU seconds the emitter thread spent building and ending spans, or handing
        them to the export process (what tracing costs besides its share of each run's
        critical path)."""
        self.process: ExportProcess | None = None
        """Set by ``exporting``: the child process that builds and exports the spans."""
        self._bound = 0
        """Set by ``exporting``: the ratio sampler's bound on a root trace id's low 64 bits."""
        from .identity import SPAN_KEY, Identity, current_with, install_carrier  # imports otel

        self._identity = Identity
        self._current_with = current_with
        self._span_key = SPAN_KEY  # current_with for an empty context, inline in _begin
        self._new_context = otel_context.Context
        # Context changes straight on OpenTelemetry's ContextVar when it keeps the context
        # there (its default): its attach and detach are two Python calls more each, and
        # a run with five calls makes six of each.
        var = _context_var(otel_context)
        self._get_current: Callable[[], Any] = otel_context.get_current if var is None else var.get
        self._attach: Callable[[Any], Any] = otel_context.attach if var is None else var.set
        # (A token is reset in the coroutine that set it: reset cannot fail as
        # OpenTelemetry's detach guards against.)
        self._detach: Callable[[Any], Any] = otel_context.detach if var is None else var.reset
        self._empty = otel_context.Context()  # no span current (calls, without propagation)
        if propagate and var is not None:  # upstream calls send the run's identity (carrier)
            install_carrier(var)

    @classmethod
    def exporting(
        cls,
        exporter: str,
        service: str,
        endpoint: str | None,
        sample_ratio: float = 1.0,
        *,
        propagate: bool = True,
    ) -> Tracing:
        """Spans exported to ``console`` or ``otlp`` (``exporting_provider``'s settings),
        built by a child process (``export_process``): the server process only decides
        each span's identity live (the sampler and ids the SDK would use) and hands plain
        tuples over, so the SDK's CPU does not compete for its GIL."""
        from opentelemetry.sdk.trace.sampling import TraceIdRatioBased

        from .export_process import ExportProcess

        if exporter == "otlp":  # missing, the export process would only fail later
            try:
                import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401
            except ImportError as exc:
                raise ConfigError(INSTALL_HINT) from exc
        tracing = cls(None, propagate=propagate)
        tracing.process = ExportProcess(exporter, service, endpoint)
        # ParentBased(TraceIdRatioBased(ratio)), decided in _begin as the SDK's would.
        tracing._bound = TraceIdRatioBased(sample_ratio).bound  # checks the ratio
        # The child ends when its pipe does; this stops it (after an export) sooner. Not
        # at exit: _flush_all first hands it what is pending, then closes it.
        weakref.finalize(tracing, tracing.process.close, 1.0).atexit = False
        return tracing

    def _begin(self, name: str, start: int) -> _Run | None:
        """A live span for a run (or a call outside any run), None when unsampled: an
        SDK span, or the identity a span built by the export process will have."""
        trace = self._trace
        if self.process is None:
            span = self.tracer.start_span(
                name, start_time=start, record_exception=False, set_status_on_exception=False
            )
            if not span.is_recording():
                return None
            return _Run(span, trace.set_span_in_context(span))
        # The SDK's ParentBased(TraceIdRatioBased) sampler and random ids, without its
        # SamplingResult: a parent decides by its sampled flag and lends its trace state,
        # a root by its trace id (the same low 64 bits against the same bound).
        ctx = self._get_current()
        if not ctx:  # no client trace reached the run (the common case): a root
            trace_id = _bits(128) or random_id(128)
            if trace_id & _ID_LIMIT >= self._bound:
                return None
            # The identity as integers: its SpanContext is built only if something reads
            # it (an upstream request's traceparent, in-process code asking for the span);
            # current in a context of its own (identity.current_with, inline).
            span = self._identity(trace_id, _bits(64) or random_id(64), None)
            return _Run(span, self._new_context({self._span_key: span}), start)
        parent: SpanContext | None = trace.get_current_span(ctx).get_span_context()
        if parent is not None and parent.is_valid:
            if not parent.trace_flags & 1:
                return None
            trace_id, state = parent.trace_id, parent.trace_state
        else:
            parent, trace_id, state = None, _bits(128) or random_id(128), None
            if trace_id & _ID_LIMIT >= self._bound:
                return None
        span_id = _bits(64) or random_id(64)  # random_id's draw, inline; 0 draws again
        span = self._identity(trace_id, span_id, state)
        return _Run(span, self._current_with(span, ctx), start, parent)

    # -- the run hook ----------------------------------------------------------------
    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        run = self._begin("codemode.run", _now())
        run_id = event.context.run_id
        if run is None:
            if not run_id:
                return await call_next(event)
            self._runs[run_id] = _UNSAMPLED
            try:
                return await call_next(event)
            finally:
                self._runs.pop(run_id, None)
        run.code = event.code
        if run_id:
            self._runs[run_id] = run
        # Current in the run's own task, so spans of inner run hooks nest under it and
        # its calls, served in copies of its context, have it current (propagate).
        token = self._attach(run.context) if self.propagate else None
        result: ExecutionResult | None = None
        try:
            result = await call_next(event)
        except BaseException as exc:
            run.error = type(exc).__name__
            raise
        else:
            if result.error is not None:
                # The agent's code names its own exception classes (up to 512 characters
                # of anything): a span never carries the code's text, so those are _other.
                run.error = error_type(result.error.type)
            return result
        finally:
            run.end = _now()
            run.facts = (event.code, event.timeout, event.context, result)
            if token is not None:
                self._detach(token)
            if run_id:
                self._runs.pop(run_id, None)
            self._submit(run)

    # -- the tool-call layer ---------------------------------------------------------
    async def tool_layer(self, call: ToolCall, call_next: NextCall) -> Any:
        run_id = call.context.run_id
        run = self._runs.get(run_id) if run_id else None
        if run is _UNSAMPLED:
            return await call_next(call)
        if run is None:
            return await self._alone(call, call_next)
        # The arguments as they arrive, before inner layers may replace them (encoded
        # after the run, off its path: spans.texts).
        args = call.args
        begun = _now()
        ctx = self._call_context(run)
        token = None if ctx is None else self._attach(ctx)
        received = error = None
        try:
            result = await call_next(call)
        except BaseException as exc:
            error = type(exc).__name__
            raise
        else:
            received = call.notes.get("bytes")  # the registry's measure, as result_bytes
            if received is None:
                received = result_bytes(call, result)
            return result
        finally:
            if token is not None:
                self._detach(token)
            # op_fields of the call's Op, noted as one tuple.
            run.ops.append(
                (call.server, call.tool, None, run_id, begun, args, 0, received, _now(), error)
            )

    def _call_context(self, run: _Run) -> Any:
        """What to make current for a call of ``run`` (None: nothing, it already is).

        With propagation the run's span is current during its calls, so an upstream MCP
        client passes the run's trace on in the request's ``_meta``; without, no trace is
        (an upstream server then reads no ``traceparent``). Executors serve a run's calls
        in (a copy of) the run's context, where the run hook made its span current, or
        (without propagation) none: nothing is left to do per call, unless a client's
        trace is current there (``remote_parent``) and must not be passed on.
        ``observe.CallWatch.start`` does the same inline."""
        current = self._get_current()
        if self.propagate:
            return None if current is run.context else run.context
        return self._empty if current else None

    async def _alone(self, call: ToolCall, call_next: NextCall) -> Any:
        """A call outside any run: a span of its own in the ambient trace."""
        run_id = call.context.run_id
        op = Op(call.server, call.tool, None, run_id, _now(), args_text=args_json(call))
        run = self._own_span(op)
        if run is None:
            return await call_next(call)
        token = self._attach(run.context) if self.propagate else None
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
                self._detach(token)
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
        op = Op("", "", method, run_id, _now(), params_bytes=size_of(params))
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

    def _own_span(self, op: Op) -> _Run | None:
        """A call outside any run: a span of its own in the ambient trace (None when the
        sampler drops it)."""
        run = self._begin(op.name(), op.start)
        if run is not None:
            run.op = op
        return run

    def _done(self, run: _Run, op: Op) -> None:
        op.end = _now()
        if run.op is op:
            run.end = op.end
            self._submit(run)
        else:
            run.ops.append(op_fields(op))

    # -- the emitter -----------------------------------------------------------------
    def _submit(self, run: _Run) -> None:
        if self._thread is None:
            self._start()
        if self._pending.qsize() >= MAX_PENDING:
            self.dropped += 1
            signals.spans_dropped(1 + len(run.ops), "backlog")
            return
        self._pending.put(run)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=emit_loop,
                    args=(
                        weakref.ref(self),
                        self._pending,
                        EMITTER_REST if self.process is None else EXPORT_REST,
                        self._wake,
                    ),
                    name="codemode-tracing",
                    daemon=True,
                )
                self._thread.start()
                live.add(self)
                weakref.finalize(self, self._pending.put, None)  # collected: thread ends

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every finished run's spans are ended (so the span processor has
        them), then flush the provider; False when ``timeout`` ran out first."""
        deadline = time.monotonic() + timeout
        if self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            self._pending.put(done)
            self._wake.set()
            if not done.wait(timeout):
                return False
        if self.process is not None:
            return self.process.flush(max(0.0, deadline - time.monotonic()))
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
                self._wake.set()
                thread.join(5)
        if self.process is not None:
            self.process.close()
        live.discard(self)

    def _ship(self, runs: list[_Run]) -> None:
        """Hand finished runs to the export process (on the emitter thread)."""
        assert self.process is not None
        records: list[Record] = []
        spans = 0
        for run in runs:
            try:
                records.append(self._record(run))
            except Exception:
                log.exception("could not note the spans of a run")
                continue
            spans += 1 + len(run.ops)
        if records:
            try:
                self.process.send(records, spans)
            except Exception:  # the emitter thread must live on: later runs still export
                log.exception("could not hand %d spans to the export process", spans)
                signals.spans_dropped(spans, "export_process")

    def _record(self, run: _Run) -> Record:
        """A finished run as plain values (``spans.Record``) for the export process."""
        if run.op is not None:
            body: tuple[Any, ...] = ("op", op_fields(run.op))
        else:  # the attributes' values: the export process makes the dict (its CPU)
            summary = run.summary
            attrs: Any = (
                self._run_attrs(run) if summary is None else run_summary(run.code, *summary)
            )
            body = ("run", (run.code, attrs, run.error))
        return (*run.fields(), *body, texts(run.ops, run.offset))

    @staticmethod
    def _run_attrs(run: _Run) -> dict[str, Any]:
        if run.summary is not None:
            return summary_attrs(run_summary(run.code, *run.summary))
        return run_attrs(*run.facts) if run.facts is not None else {}

    def _emit(self, run: _Run) -> None:
        """End a finished run's span and build its children (on the emitter thread)."""
        span = run.span
        if run.op is not None:
            attrs = run.op.attributes()
            error = run.op.error
        else:
            attrs = self._run_attrs(run)
            attrs["codemode.code.hmac"] = digest(run.code)
            error = run.error
        span.set_attributes(attrs)
        if error is not None:
            failed(span, error)
        children(self.tracer, span, texts(run.ops, run.offset))
        span.end(end_time=run.end)


__all__ = [
    "INSTALL_HINT",
    "MAX_PENDING",
    "Tracing",
    "digest",
    "flush_all",
]
