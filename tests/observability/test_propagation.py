"""A run's trace reaches its tool calls through the context they are served in: the
executors serve a run's calls in the run's context, so no layer attaches the run's span
per call; a call a leftover thread makes between runs gets none of a finished run's."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode import InProcessExecutor, Session, SubprocessExecutor, ToolRegistry
from codemode.context import current_context
from codemode.observability import Metrics
from codemode.observability.observe import Observe
from codemode.observability.providers import remote_parent
from codemode.observability.tracing import Tracing

from .test_tracing import by_name, finished

pytestmark = pytest.mark.anyio

LAYERS = ["tracing", "metrics+tracing"]  # alone, and as one layer (codemode serve's default)


class Probe:
    """A tool that notes the span current where it runs, and the run it is counted in."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int, str | None]] = []
        self.called = anyio.Event()

    def span(self) -> str:
        """The current span."""
        ctx = trace.get_current_span().get_span_context()
        self.seen.append((ctx.trace_id, ctx.span_id, current_context.get().run_id))
        self.called.set()
        return "ok"


def session(tracing: Tracing, layers: str, probe: Probe, executor: Any = None) -> Session:
    """A session traced by ``tracing`` whose only tool is ``probe.span``; its worker starts
    in its first run (so its pipe's reader is set up inside that run's context)."""
    reg = ToolRegistry()
    reg.register(probe.span, server="probe", name="span")
    layer: Any = tracing if layers == "tracing" else Observe(Metrics(process=False), tracing)
    reg.use(layer.tool_layer, "observe")
    s = Session(executor or SubprocessExecutor(), tools=reg)
    s.use(layer.run_hook, "observe")
    return s


def counting_attaches(tracing: Tracing) -> list[Any]:
    """The contexts ``tracing`` makes current, as they are made so."""
    attached: list[Any] = []
    attach = tracing._attach

    def noted(ctx: Any) -> Any:
        attached.append(ctx)
        return attach(ctx)

    tracing._attach = noted
    return attached


@pytest.mark.parametrize("executor", [SubprocessExecutor, InProcessExecutor])
@pytest.mark.parametrize("layers", LAYERS)
async def test_a_runs_tool_calls_have_its_span_current_with_no_attach_per_call(
    tracing: Tracing, exporter: InMemorySpanExporter, layers: str, executor: Any
) -> None:
    probe = Probe()
    attached = counting_attaches(tracing)
    s = session(tracing, layers, probe, executor())
    try:
        for _ in range(2):
            result = await s.run("[tools.probe.span() for _ in range(3)]")
            assert result.value == ["ok"] * 3, result.to_text()
    finally:
        await s.close()
    runs = [x for x in finished(tracing, exporter) if x.name == "codemode.run"]
    assert len(runs) == 2 and len(probe.seen) == 6
    runs.sort(key=lambda x: x.start_time or 0)
    for run, seen in zip(runs, (probe.seen[:3], probe.seen[3:]), strict=True):
        assert {(t, s) for t, s, _ in seen} == {(run.context.trace_id, run.context.span_id)}
        assert len({r for _, _, r in seen}) == 1 and seen[0][2] is not None
    assert len(attached) == 2  # one per run (its own task), none per call


@pytest.mark.parametrize("layers", LAYERS)
async def test_a_call_from_a_thread_left_running_after_a_traced_run_is_not_in_its_trace(
    tracing: Tracing, exporter: InMemorySpanExporter, layers: str
) -> None:
    probe = Probe()
    code = (
        "import threading, time\n"
        "def later():\n"
        "    time.sleep(0.3)\n"  # the run has ended by then
        "    tools.probe.span()\n"
        "threading.Thread(target=later, daemon=True).start()"
    )
    s = session(tracing, layers, probe)
    try:
        result = await s.run(code)
        assert result.error is None, result.to_text()
        with anyio.fail_after(10):
            await probe.called.wait()
    finally:
        await s.close()
    spans = by_name(finished(tracing, exporter))
    run, own = spans["codemode.run"], spans["execute_tool probe.span"]
    ((trace_id, span_id, run_id),) = probe.seen
    assert run_id is None  # counted in no run
    assert trace_id != run.context.trace_id and span_id != run.context.span_id
    assert own.parent is None and own.context.trace_id != run.context.trace_id
    assert (trace_id, span_id) == (own.context.trace_id, own.context.span_id)  # its own


@pytest.mark.parametrize("layers", LAYERS)
async def test_without_propagation_no_trace_is_current_in_a_runs_calls_not_even_a_clients(
    exporter: InMemorySpanExporter, layers: str
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider, propagate=False)
    probe = Probe()
    client = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    s = session(tracing, layers, probe)
    try:
        with remote_parent({"traceparent": client}):
            assert (await s.run("tools.probe.span()")).value == "ok"
    finally:
        await s.close()
    run = by_name(finished(tracing, exporter))["codemode.run"]
    assert format(run.context.trace_id, "032x") == client.split("-")[1]  # joined it
    ((trace_id, span_id, _),) = probe.seen
    assert (trace_id, span_id) == (0, 0)  # nothing for an upstream request to pass on
    tracing.close()
    provider.shutdown()
