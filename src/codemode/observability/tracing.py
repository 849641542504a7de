"""OpenTelemetry traces of runs and tool calls (the ``otel`` extra).

A span per run (``codemode.run``) with a child span per tool call it makes
(``execute_tool server.tool``) and per memory operation (``codemode.memory state.set``).
Tool calls are served on tasks of their own, so the parent is found by the run id the
call carries, not by the ambient context. Attributes
follow the GenAI semantic conventions where they apply (``gen_ai.operation.name``,
``gen_ai.tool.name``, ``error.type``); code, arguments and results never go into a span:
their SHA-256 and sizes do. A run started inside a remote span (``remote_parent``, from
the MCP request's ``_meta.traceparent``) joins that trace.

Imports ``opentelemetry`` when a ``Tracing`` is built; ``install_hint`` says what to
install when it is missing.
"""

from __future__ import annotations

import hashlib
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..chain import NextRun, RunEvent
from ..context import current_context
from ..errors import ConfigError
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall
from .metrics import is_memory_method, output_size, run_outcome, size_of

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

INSTALL_HINT = "tracing needs OpenTelemetry: pip install 'codemode[otel]'"
SCOPE = "codemode"


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:
        raise ConfigError(INSTALL_HINT) from exc
    return trace


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Tracing:
    """The run hook and tool-call layer that make spans (stage ``observe``)."""

    def __init__(self, provider: TracerProvider | None = None) -> None:
        trace = _otel()
        self._trace = trace
        self.tracer: Tracer = (
            provider.get_tracer(SCOPE) if provider is not None else trace.get_tracer(SCOPE)
        )
        self._runs: dict[str, Span] = {}
        self._lock = threading.Lock()

    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        ctx = event.context
        attrs: dict[str, Any] = {
            "codemode.run.id": ctx.run_id or "",
            "codemode.session.id": ctx.session_id or "",
            "codemode.tenant": ctx.tenant,
            "codemode.code.sha256": digest(event.code),
            "codemode.code.bytes": size_of(event.code),
            "codemode.run.timeout_s": event.timeout,
        }
        with self.tracer.start_as_current_span(
            "codemode.run", attributes=attrs, record_exception=False, set_status_on_exception=False
        ) as span:
            if ctx.run_id:
                with self._lock:
                    self._runs[ctx.run_id] = span
            try:
                result = await call_next(event)
            except BaseException as exc:
                self._failed(span, type(exc).__name__)
                raise
            finally:
                if ctx.run_id:
                    with self._lock:
                        self._runs.pop(ctx.run_id, None)
            span.set_attribute("codemode.run.outcome", run_outcome(result))
            span.set_attribute("codemode.output.bytes", output_size(result))
            if result.cpu_seconds is not None:
                span.set_attribute("codemode.run.cpu_s", result.cpu_seconds)
            if result.peak_memory_bytes is not None:
                span.set_attribute("codemode.worker.peak_memory_bytes", result.peak_memory_bytes)
            if result.error is not None:
                self._failed(span, result.error.type)
            return result

    async def tool_layer(self, call: ToolCall, call_next: NextCall) -> Any:
        name = f"{call.server}.{call.tool}"
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.type": "function",
            "codemode.tool.server": call.server,
            "codemode.tool.arguments.bytes": size_of(call.args),
            "codemode.tool.arguments.sha256": digest(_canonical(call.args)),
        }
        return await self._child(
            f"execute_tool {name}",
            call.context.run_id,
            attrs,
            "codemode.tool.result.bytes",
            lambda: call_next(call),
        )

    async def host_layer(
        self, method: str, params: dict[str, Any], call_next: Callable[[dict[str, Any]], Any]
    ) -> Any:
        """A span per memory operation (``codemode.memory state.set``...), a child of the
        run that made it; names and values stay out, their size goes in."""
        if not is_memory_method(method):
            return await call_next(params)
        attrs: dict[str, Any] = {
            "codemode.memory.method": method,
            "codemode.memory.area": method.partition(".")[0],
            "codemode.memory.params.bytes": size_of(params),
        }
        return await self._child(
            f"codemode.memory {method}",
            current_context.get().run_id,
            attrs,
            "codemode.memory.result.bytes",
            lambda: call_next(params),
        )

    async def _child(
        self,
        name: str,
        run_id: str | None,
        attrs: dict[str, Any],
        result_bytes: str,
        call: Callable[[], Awaitable[Any]],
    ) -> Any:
        """A span around ``call``, a child of run ``run_id``'s span when it is open (calls
        are served on tasks of their own: the ambient context is not the run's)."""
        trace = self._trace
        parent = None
        if run_id:
            attrs["codemode.run.id"] = run_id
            with self._lock:
                run_span = self._runs.get(run_id)
            if run_span is not None:
                parent = trace.set_span_in_context(run_span)
        with self.tracer.start_as_current_span(
            name,
            context=parent,
            kind=trace.SpanKind.INTERNAL,
            attributes=attrs,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                result = await call()
            except BaseException as exc:
                self._failed(span, type(exc).__name__)
                raise
            span.set_attribute(result_bytes, size_of(result))
            return result

    def _failed(self, span: Span, error_type: str) -> None:
        from opentelemetry.trace import Status, StatusCode

        span.set_attribute("error.type", error_type)
        span.set_status(Status(StatusCode.ERROR))  # no description: it may quote values


def _canonical(value: Any) -> str:
    import json

    try:
        return json.dumps(value, sort_keys=True, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


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


_providers: dict[tuple[str, str, str | None], Any] = {}
_providers_lock = threading.Lock()


def exporting_provider(exporter: str, service: str, endpoint: str | None) -> TracerProvider:
    """A process-wide SDK provider exporting to ``console`` (stderr) or ``otlp`` (HTTP)."""
    key = (exporter, service, endpoint)
    with _providers_lock:
        got = _providers.get(key)
        if got is not None:
            return got  # type: ignore[no-any-return]
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider as SdkProvider
            from opentelemetry.sdk.trace.export import (
                BatchSpanProcessor,
                ConsoleSpanExporter,
                SimpleSpanProcessor,
            )
        except ImportError as exc:
            raise ConfigError(INSTALL_HINT) from exc
        provider = SdkProvider(resource=Resource.create({"service.name": service}))
        if exporter == "console":
            # stderr: on `serve` (stdio) stdout carries the MCP protocol.
            provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
        else:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                    OTLPSpanExporter,
                )
            except ImportError as exc:
                raise ConfigError(INSTALL_HINT) from exc
            otlp = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
            provider.add_span_processor(BatchSpanProcessor(otlp))
        _providers[key] = provider
        return provider


__all__ = ["INSTALL_HINT", "Tracing", "digest", "exporting_provider", "remote_parent"]
