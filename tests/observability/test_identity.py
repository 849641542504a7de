"""A sampled run's identity (integers) reads as the OpenTelemetry span it stands for."""

from __future__ import annotations

from opentelemetry import baggage, trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
from opentelemetry.trace.span import TraceState

from codemode.observability.identity import Identity, current_with

TRACE_ID, SPAN_ID = 0x0AF7651916CD43DD8448EB211C80319C, 0xB7AD6B7169203331


def test_an_identity_made_current_is_what_a_client_passes_on_as_its_traceparent() -> None:
    ctx = current_with(Identity(TRACE_ID, SPAN_ID, TraceState([("vendor", "abc")])), Context())
    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, ctx)
    assert carrier == {
        "traceparent": f"00-{TRACE_ID:032x}-{SPAN_ID:016x}-01",
        "tracestate": "vendor=abc",
    }


def test_an_identity_reads_as_one_sampled_non_recording_span_context() -> None:
    span = Identity(TRACE_ID, SPAN_ID, None)
    got = trace.get_current_span(current_with(span, Context())).get_span_context()
    assert got is span.get_span_context()  # built once
    assert (got.trace_id, got.span_id, got.is_remote, got.is_valid) == (
        TRACE_ID,
        SPAN_ID,
        False,
        True,
    )
    assert got.trace_flags.sampled and not span.is_recording()
    assert span.ids == (TRACE_ID, SPAN_ID, None)


def test_an_identity_made_current_keeps_what_the_context_held() -> None:
    held = baggage.set_baggage("tenant", "acme", Context())
    ctx = current_with(Identity(TRACE_ID, SPAN_ID, None), held)
    assert baggage.get_baggage("tenant", ctx) == "acme"
    assert trace.get_current_span(ctx).get_span_context().trace_id == TRACE_ID
