"""What a real upstream MCP server (stdio) receives in a tool call's ``_meta`` from a run
traced as ``codemode serve`` traces by default (span identities decided in this process,
spans built by the export process): the W3C trace context of the run's span, with the
client's tracestate and any baggage of the run's context; nothing without propagation.
The same whether the run's identity formats it (``observability.carrier``) or the MCP
SDK's propagator does (carrier off; and always when the context holds baggage)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import baggage, trace
from opentelemetry import context as otel_context

from codemode import Session, SubprocessExecutor, ToolRegistry
from codemode.config import parse_servers
from codemode.observability import Metrics, carrier
from codemode.observability.observe import Observe
from codemode.observability.providers import remote_parent
from codemode.observability.tracing import Tracing
from codemode.tools.sources.mcp import MCPSource

pytestmark = pytest.mark.anyio

EDGE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"
TRACE_ID, PARENT_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
CODE = "p = tools.probe.current_span()\n[p, tools.edge.trace_context(), tools.edge.trace_context()]"


def current_span() -> list[str]:
    """The trace and span id current where an in-process tool runs."""
    ctx = trace.get_current_span().get_span_context()
    return [format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")]


class Formatter:
    """Who formats the header (``name``), and how many calls the carrier formatted."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.carried = 0

    def carried_all(self, calls: int) -> bool:
        return self.carried == (calls if self.name == "carrier" else 0)


@pytest.fixture(params=["carrier", "sdk"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Formatter:
    """The run's identity formats the header, or (carrier off) the MCP SDK does."""
    Tracing.exporting("none", "codemode-test", None).close()  # installs the carrier
    carry = carrier.carry
    assert carry is not None
    got = Formatter(request.param)

    def counted() -> Any:
        out = carry()
        got.carried += out is not None
        return out

    monkeypatch.setattr(carrier, "carry", counted if got.name == "carrier" else None)
    return got


async def run(propagate: bool = True) -> tuple[list[str], list[dict[str, Any]]]:
    """The span current in the run's in-process call, and the trace context each of its
    two calls to the edge server (stdio) received."""
    raw = {"command": sys.executable, "args": [str(EDGE_SERVER)]}
    source = MCPSource("edge", parse_servers({"mcpServers": {"edge": raw}}, env={})["edge"])
    reg = ToolRegistry([source])
    reg.register(current_span, server="probe")
    tracing = Tracing.exporting("none", "codemode-test", None, propagate=propagate)
    layer = Observe(Metrics(process=False), tracing)
    reg.use(layer.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(layer.run_hook, "observe")
    try:
        async with s:
            result = await s.run(CODE)
    finally:
        tracing.close()
        await source.aclose()
    assert result.error is None, result.error
    span, *received = result.value
    return span, received


async def test_an_upstream_server_receives_the_runs_span_as_its_traceparent(
    path: Formatter,
) -> None:
    (trace_id, span_id), received = await run()
    expected = {"traceparent": f"00-{trace_id}-{span_id}-01", "tracestate": None, "baggage": None}
    assert received == [expected, expected]
    assert path.carried_all(2)
    assert trace.get_current_span() is trace.INVALID_SPAN  # nothing left current


async def test_a_run_in_a_clients_trace_passes_on_its_trace_id_and_tracestate(
    path: Formatter,
) -> None:
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=abc"}
    with remote_parent(meta):
        (trace_id, span_id), received = await run()
    assert trace_id == TRACE_ID and span_id != PARENT_ID
    expected = {"traceparent": f"00-{TRACE_ID}-{span_id}-01", "tracestate": "vendor=abc"}
    assert received == [{**expected, "baggage": None}] * 2
    assert path.carried_all(2)


async def test_without_propagation_an_upstream_server_receives_no_trace(path: Formatter) -> None:
    _, received = await run(propagate=False)
    assert received == [{"traceparent": None, "tracestate": None, "baggage": None}] * 2
    assert path.carried == 0


async def test_baggage_in_the_runs_context_is_passed_on_with_its_trace(path: Formatter) -> None:
    token = otel_context.attach(baggage.set_baggage("tenant", "acme"))
    try:
        (trace_id, span_id), received = await run()
    finally:
        otel_context.detach(token)
    expected = {"traceparent": f"00-{trace_id}-{span_id}-01", "tracestate": None}
    assert received == [{**expected, "baggage": "tenant=acme"}] * 2
    assert path.carried == 0  # the SDK's propagator passes the baggage on
