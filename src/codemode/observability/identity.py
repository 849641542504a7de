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

from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    NonRecordingSpan,
    SpanContext,
    TraceFlags,
    TraceState,
    set_span_in_context,
)

_SAMPLED = TraceFlags(TraceFlags.SAMPLED)
_SPAN_KEY = next(iter(set_span_in_context(INVALID_SPAN, Context())))
"""The key the API keeps the current span under (found through the public API)."""


class Identity(NonRecordingSpan):
    """A sampled span's identity (never recording): ``get_span_context`` builds the
    ``SpanContext`` once, on first read, from the integers."""

    def __init__(self, trace_id: int, span_id: int, state: TraceState | None) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.state = state
        self._context: SpanContext | None = None  # type: ignore[assignment]

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

    def __repr__(self) -> str:
        return f"NonRecordingSpan({self.get_span_context()!r})"


def current_with(span: Identity, ctx: Any) -> Context:
    """``set_span_in_context(span, ctx)``; for an empty ``ctx`` (a run no client trace
    reached, the common case) without copying it."""
    if not ctx:
        return Context({_SPAN_KEY: span})
    return set_span_in_context(span, ctx)


__all__ = ["Identity", "current_with"]
