"""Where spans go: the process-wide OpenTelemetry provider that exports them, and the
remote parent a client's ``traceparent`` names. Apart from ``tracing.py`` so the hot path
stays one module and this setup code, run once, another."""

from __future__ import annotations

import atexit
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError
from .emitter import flush_all
from .tracing import INSTALL_HINT

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider


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
            flush_all()
            provider.shutdown()

        atexit.register(shutdown)
        _providers[key] = provider
        return provider


__all__ = ["exporting_provider", "remote_parent"]
