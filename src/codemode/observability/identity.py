"""A sampled run's span identity as plain integers, an OpenTelemetry span only when read.

Why: with spans built by the export process, a run's span in the server is nothing but
its identity (trace id, span id, its parent's trace state), current while the run is
live so that in-process code and the MCP SDK (``traceparent`` in an upstream request's
``_meta``) see the run's trace. Building it as the API's ``SpanContext`` inside a
``NonRecordingSpan`` cost each sampled run a validating tuple, a span and a copied
context on the event loop's thread, though most runs never read it: here the span keeps
the integers and makes its ``SpanContext`` the first time something asks for it.

Imports ``opentelemetry`` (the ``otel`` extra); ``tracing`` imports it only when tracing
is on.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

from opentelemetry import propagate as otel_propagate
from opentelemetry import trace as otel_trace
from opentelemetry.context import Context
from opentelemetry.propagate import get_global_textmap
from opentelemetry.trace import (
    INVALID_SPAN,
    NonRecordingSpan,
    ProxyTracerProvider,
    SpanContext,
    TraceFlags,
    TraceState,
    get_tracer_provider,
    set_span_in_context,
)

from . import carrier

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
SPAN_KEY = next(iter(set_span_in_context(INVALID_SPAN, Context())))
"""The key the API keeps the current span under (found through the public API)."""


class Identity(NonRecordingSpan):
    """A sampled span's identity (never recording): ``get_span_context`` builds the
    ``SpanContext`` once, on first read, from the integers."""

    _context: SpanContext | None = None  # type: ignore[assignment]
    _meta: dict[str, str] | None = None
    """Both made on first read (class defaults: a run's start stores three values)."""

    def __init__(self, trace_id: int, span_id: int, state: TraceState | None) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.state = state

    @property
    def ids(self) -> tuple[int, int, TraceState | None]:
        """Trace id, span id and trace state, as the export process is handed them."""
        return (self.trace_id, self.span_id, self.state)

    def get_span_context(self) -> SpanContext:
        ctx = self._context
        if ctx is None:  # two threads may both build it: equal values, either one kept
            ctx = self._context = SpanContext(
                self.trace_id, self.span_id, False, _SAMPLED, self.state
            )
        return ctx

    def meta(self) -> dict[str, str]:
        """What OpenTelemetry's default propagator injects for this span: its W3C
        ``traceparent`` and, when its trace state has entries, ``tracestate`` (a copy each
        time, of a dict formatted once: each call of a run sends it)."""
        meta = self._meta
        if meta is None:
            meta = self._meta = {"traceparent": f"00-{self.trace_id:032x}-{self.span_id:016x}-01"}
            if self.state:
                meta["tracestate"] = self.state.to_header()
        return meta.copy()

    def __repr__(self) -> str:
        return f"NonRecordingSpan({self.get_span_context()!r})"


def current_with(span: Identity, ctx: Any) -> Context:
    """``set_span_in_context(span, ctx)``; for an empty ``ctx`` (a run no client trace
    reached, the common case) without copying it."""
    if not ctx:
        return Context({SPAN_KEY: span})
    return set_span_in_context(span, ctx)


def install_carrier(var: ContextVar[Any]) -> None:
    """Set ``carrier.carry`` (once), when OpenTelemetry's context lives in ``var`` and the
    global propagator injects what ``Identity.meta`` says (its default, tracecontext and
    baggage: checked on a probe). Per call it stands in only while that propagator is still
    the global one, no global tracer provider is set (else the SDK's own client span would
    be the parent named) and the current context holds the run's identity and nothing else
    (no baggage to pass on); otherwise the SDK propagates as before."""
    if carrier.carry is not None:
        return
    textmap, proxy = get_global_textmap(), get_tracer_provider()
    if not isinstance(proxy, ProxyTracerProvider) or not hasattr(otel_trace, "_TRACER_PROVIDER"):
        return
    if getattr(otel_propagate, "_HTTP_TEXT_FORMAT", None) is not textmap:
        return  # read per call instead of get_global_textmap(): one Python call less
    probe = Identity(1, 2, TraceState([("k", "v")]))
    for span in (probe, Identity(1, 2, None)):
        injected: dict[str, str] = {}
        textmap.inject(injected, Context({SPAN_KEY: span}))
        if injected != span.meta():
            return
    key, empty, get, set_ = SPAN_KEY, Context(), var.get, var.set

    def carry() -> tuple[dict[str, str], Any] | None:
        ctx = get()
        if len(ctx) != 1:
            return None
        span = ctx.get(key)
        if type(span) is not Identity:
            return None
        if (
            otel_propagate._HTTP_TEXT_FORMAT is not textmap
            or otel_trace._TRACER_PROVIDER is not None
        ):
            return None  # (the private globals: get_tracer_provider reads the environment)
        meta = span._meta  # span.meta(), inline once the run's first call formatted it
        return (span.meta() if meta is None else meta.copy()), set_(empty)

    carrier.restore = var.reset
    carrier.carry = carry


__all__ = ["SPAN_KEY", "Identity", "current_with", "install_carrier"]
