"""OpenTelemetry spans: a run with its tool calls as children, no raw values, remote parents."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from pydantic import ValidationError

from codemode import Session, SubprocessExecutor, ToolRegistry
from codemode.chain import NextRun, RunEvent
from codemode.errors import ToolError
from codemode.observability.config import ObservabilityConfig
from codemode.observability.metrics import ARGS_JSON
from codemode.observability.providers import exporting_provider, remote_parent
from codemode.observability.tracing import Tracing, digest
from codemode.result import ExecutionResult
from codemode.tools.registry import NextCall, ToolCall

pytestmark = pytest.mark.anyio

SECRET = "4111-1111-1111-1111"


def lookup(card: str) -> dict[str, Any]:
    """The holder of a card."""
    return {"card": card, "holder": "Ada Lovelace"}


def down() -> None:
    """Always fails."""
    raise RuntimeError("backend down")


async def traced_session(tracing: Tracing, *probes: Callable[..., Any]) -> Session:
    """A session whose tools are ``bank.lookup``, ``bank.down`` and ``probe.<each probe>``,
    traced by ``tracing``."""
    reg = ToolRegistry()
    reg.register(lookup, server="bank")
    reg.register(down, server="bank")
    for probe in probes:
        reg.register(probe, server="probe")
    reg.use(tracing.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(tracing.run_hook, "observe")
    await s.start()
    return s


def finished(tracing: Tracing, exporter: InMemorySpanExporter) -> tuple[ReadableSpan, ...]:
    """The spans of the runs so far: they are built after each run, so flush first."""
    assert tracing.flush()
    return exporter.get_finished_spans()


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    return {s.name: s for s in spans}


async def test_a_run_with_two_tool_calls_is_a_span_with_two_children(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    code = (
        f"a = tools.bank.lookup(card={SECRET!r})\n"
        "try:\n    tools.bank.down()\nexcept Exception:\n    pass\n"
        "a['holder']"
    )
    s = await traced_session(tracing)
    try:
        result = await s.run(code)
    finally:
        await s.close()
    assert result.value == "Ada Lovelace"
    spans = by_name(finished(tracing, exporter))
    run = spans["codemode.run"]
    ok, failed = spans["execute_tool bank.lookup"], spans["execute_tool bank.down"]
    assert run.parent is None
    assert ok.parent is not None and ok.parent.span_id == run.context.span_id
    assert failed.parent is not None and failed.parent.span_id == run.context.span_id
    assert ok.context.trace_id == failed.context.trace_id == run.context.trace_id
    assert ok.attributes is not None and failed.attributes is not None
    assert ok.attributes["gen_ai.operation.name"] == "execute_tool"
    assert ok.attributes["gen_ai.tool.name"] == "bank.lookup"
    assert failed.attributes["error.type"] == "ToolError"
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert run.attributes is not None
    assert run.attributes["codemode.code.hmac"] == digest(code)
    assert run.attributes["codemode.run.outcome"] == "ok"


async def test_spans_hold_hashes_and_sizes_never_code_arguments_or_results(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    s = await traced_session(tracing)
    try:
        await s.run(f"print(tools.bank.lookup(card={SECRET!r}))")
    finally:
        await s.close()
    for span in finished(tracing, exporter):
        shown = repr(dict(span.attributes or {})) + repr(span.status.description) + span.name
        assert SECRET not in shown and "Ada" not in shown and "print" not in shown
    call = by_name(finished(tracing, exporter))["execute_tool bank.lookup"]
    assert call.attributes is not None
    size = call.attributes["codemode.tool.result.bytes"]
    assert isinstance(size, int) and size > 20


async def test_a_failing_run_is_marked_with_its_error_type(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    s = await traced_session(tracing)
    try:
        await s.run("{}['missing']")
    finally:
        await s.close()
    run = by_name(finished(tracing, exporter))["codemode.run"]
    assert run.attributes is not None and run.attributes["error.type"] == "KeyError"
    assert run.status.status_code == trace.StatusCode.ERROR


async def test_a_run_inside_a_remote_traceparent_joins_that_trace(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    trace_id, parent_id = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
    s = await traced_session(tracing)
    try:
        with remote_parent({"traceparent": f"00-{trace_id}-{parent_id}-01"}):
            await s.run("tools.bank.lookup(card='x')")
        await s.run("1")  # outside: a trace of its own
    finally:
        await s.close()
    runs = [sp for sp in finished(tracing, exporter) if sp.name == "codemode.run"]
    call = by_name(finished(tracing, exporter))["execute_tool bank.lookup"]
    assert format(runs[0].context.trace_id, "032x") == trace_id
    assert runs[0].parent is not None and format(runs[0].parent.span_id, "016x") == parent_id
    assert call.context.trace_id == runs[0].context.trace_id
    assert format(runs[1].context.trace_id, "032x") != trace_id


def test_a_malformed_traceparent_is_ignored() -> None:
    with remote_parent({"traceparent": "not-a-traceparent"}):
        assert not trace.get_current_span().get_span_context().is_valid
    with remote_parent({"traceparent": 42}):
        pass


async def slow(ms: int) -> str:
    """Answers after ``ms`` milliseconds."""
    await asyncio.sleep(ms / 1000)
    return "done"


async def test_child_spans_carry_the_times_the_calls_really_took(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    reg = ToolRegistry()
    reg.register(slow, server="clock")
    reg.use(tracing.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(tracing.run_hook, "observe")
    async with s:
        await s.run("tools.clock.slow(ms=5)\ntools.clock.slow(ms=120)\n'x'")
    spans = finished(tracing, exporter)
    run = by_name(spans)["codemode.run"]
    calls = sorted((sp for sp in spans if sp.name == "execute_tool clock.slow"), key=start_of)
    assert [c.parent.span_id for c in calls if c.parent] == [run.context.span_id] * 2
    assert run.start_time is not None and run.end_time is not None
    first, second = calls
    assert run.start_time <= start_of(first) and end_of(first) <= start_of(second)
    assert end_of(second) <= run.end_time
    assert 120e6 <= end_of(second) - start_of(second) < 10e9  # ns: the call's own wait
    assert end_of(first) - start_of(first) < end_of(second) - start_of(second)


def start_of(span: ReadableSpan) -> int:
    assert span.start_time is not None
    return span.start_time


def end_of(span: ReadableSpan) -> int:
    assert span.end_time is not None
    return span.end_time


async def test_a_tool_call_outside_any_run_is_a_span_of_its_own(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    reg = ToolRegistry()
    reg.register(lookup, server="bank")
    reg.register(down, server="bank")
    reg.use(tracing.tool_layer, "observe")
    assert (await reg.call("bank", "lookup", {"card": SECRET}))["holder"] == "Ada Lovelace"
    with pytest.raises(ToolError):
        await reg.call("bank", "down")
    spans = by_name(finished(tracing, exporter))
    ok, failed = spans["execute_tool bank.lookup"], spans["execute_tool bank.down"]
    assert ok.parent is None and ok.attributes is not None
    args = json.dumps({"card": SECRET})
    assert ok.attributes["codemode.tool.arguments.hmac"] == digest(args)
    # Keyed: whoever reads the spans cannot confirm a guessed card number by hashing it.
    assert hashlib.sha256(args.encode()).hexdigest() not in str(dict(ok.attributes))
    assert failed.attributes is not None and failed.attributes["error.type"] == "ToolError"


def sampled_tracing(ratio: float, exporter: InMemorySpanExporter) -> tuple[Tracing, Any]:
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider), provider


async def test_an_unsampled_run_makes_no_spans_and_notes_nothing_of_its_calls(
    exporter: InMemorySpanExporter,
) -> None:
    tracing, provider = sampled_tracing(0.0, exporter)
    s = await traced_session(tracing)
    calls: list[ToolCall] = []

    async def spy(call: ToolCall, call_next: NextCall) -> Any:
        calls.append(call)
        return await call_next(call)

    s.tools.use(spy, "audit")  # inside observe: sees the notes tracing leaves
    try:
        for _ in range(3):
            assert (await s.run(f"tools.bank.lookup(card={SECRET!r})['holder']")).is_ok
    finally:
        await s.close()
    assert finished(tracing, exporter) == ()
    assert len(calls) == 3 and all(ARGS_JSON not in c.notes for c in calls)
    tracing.close()
    provider.shutdown()


async def test_a_clients_sampled_traceparent_is_traced_even_at_ratio_zero(
    exporter: InMemorySpanExporter,
) -> None:
    tracing, provider = sampled_tracing(0.0, exporter)
    trace_id = "0af7651916cd43dd8448eb211c80319c"
    s = await traced_session(tracing)
    try:
        with remote_parent({"traceparent": f"00-{trace_id}-b7ad6b7169203331-01"}):
            await s.run("tools.bank.lookup(card='x')")
        with remote_parent({"traceparent": f"00-{trace_id}-b7ad6b7169203331-00"}):
            await s.run("tools.bank.lookup(card='y')")  # the client did not sample it
    finally:
        await s.close()
    spans = finished(tracing, exporter)
    assert sorted(sp.name for sp in spans) == ["codemode.run", "execute_tool bank.lookup"]
    assert {format(sp.context.trace_id, "032x") for sp in spans} == {trace_id}
    tracing.close()
    provider.shutdown()


async def test_half_the_runs_are_traced_at_ratio_one_half(
    exporter: InMemorySpanExporter,
) -> None:
    tracing, provider = sampled_tracing(0.5, exporter)
    s = await traced_session(tracing)
    try:
        for _ in range(60):
            await s.run("tools.bank.lookup(card='x')")
    finally:
        await s.close()
    spans = finished(tracing, exporter)
    runs = [sp for sp in spans if sp.name == "codemode.run"]
    assert 10 <= len(runs) <= 50  # binomial(60, 0.5): outside this, 1 in ~10^6
    assert len(spans) == 2 * len(runs)  # each traced run with its call, no orphan call
    tracing.close()
    provider.shutdown()


def test_the_sample_ratio_is_a_checked_setting_that_reaches_the_sampler() -> None:
    assert ObservabilityConfig(trace_sample_ratio=0.25).trace_sample_ratio == 0.25
    with pytest.raises(ValidationError, match="trace_sample_ratio"):
        ObservabilityConfig(trace_sample_ratio=1.5)
    never = exporting_provider("console", "codemode-test", None, 0.0).get_tracer("t")
    always = exporting_provider("console", "codemode-test", None, 1.0).get_tracer("t")
    assert not never.start_span("run").is_recording()
    assert always.start_span("run").is_recording()  # never ended: never exported


def test_the_propagation_setting_reaches_the_tracing_layers() -> None:
    from codemode.observability.capability import _tracing

    on = ObservabilityConfig(tracing="console", service_name="codemode-test")
    off = ObservabilityConfig(
        tracing="console", service_name="codemode-test", trace_propagation=False
    )
    assert _tracing(on).propagate and not _tracing(off).propagate


async def test_the_emitter_thread_ends_with_its_tracing(exporter: InMemorySpanExporter) -> None:
    tracing, provider = sampled_tracing(1.0, exporter)
    s = await traced_session(tracing)
    async with s:
        await s.run("tools.bank.lookup(card='x')")
    assert len(finished(tracing, exporter)) == 2
    thread = tracing._thread
    assert thread is not None and thread.is_alive()
    del tracing, s
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()
    provider.shutdown()


def current_trace() -> str:
    """The trace id current where the tool runs (what an MCP client puts in _meta)."""
    return format(trace.get_current_span().get_span_context().trace_id, "032x")


async def _trace_seen_by_a_tool(tracing: Tracing) -> Any:
    """The trace id a tool call sees as current, in a session traced by ``tracing``."""
    reg = ToolRegistry()
    reg.register(current_trace, server="probe")
    reg.use(tracing.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(tracing.run_hook, "observe")
    async with s:
        return (await s.run("tools.probe.current_trace()")).value


async def test_a_tool_call_runs_in_its_runs_trace_so_upstream_requests_carry_it(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    seen = await _trace_seen_by_a_tool(tracing)
    run = by_name(finished(tracing, exporter))["codemode.run"]
    assert seen == format(run.context.trace_id, "032x")


async def test_without_propagation_a_tool_call_runs_outside_its_runs_trace(
    exporter: InMemorySpanExporter,
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider, propagate=False)
    seen = await _trace_seen_by_a_tool(tracing)
    spans = by_name(finished(tracing, exporter))
    tracing.close()
    assert seen == "0" * 32  # no span current: an MCP client sends no traceparent
    assert spans["execute_tool probe.current_trace"].parent is not None  # still a child


async def test_runs_after_close_are_still_traced(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    s = await traced_session(tracing)
    try:
        await s.run("tools.bank.lookup(card='x')")
        tracing.close()
        await s.run("tools.bank.lookup(card='y')")
    finally:
        await s.close()
    assert [sp.name for sp in finished(tracing, exporter)].count("codemode.run") == 2


async def test_a_run_refused_inside_observe_keeps_its_identity_and_error(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    class Refused(Exception):
        pass

    async def refuse(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        raise Refused("not now")

    s = await traced_session(tracing)
    s.use(refuse, "checks")
    try:
        with pytest.raises(Refused):
            await s.run("1")
    finally:
        await s.close()
    run = by_name(finished(tracing, exporter))["codemode.run"]
    assert run.attributes is not None
    assert run.attributes["error.type"] == "Refused"
    assert run.attributes["codemode.session.id"] == s.context.session_id
    assert run.attributes["codemode.code.bytes"] == 1
    assert "codemode.run.outcome" not in run.attributes


async def test_runs_past_the_emitters_backlog_are_counted_as_dropped_spans(
    tracing: Tracing, exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.observability import tracing as tracing_module
    from codemode.observability.metrics import default_metrics

    def dropped() -> float:
        got = default_metrics().registry.get_sample_value(
            "codemode_trace_spans_dropped_total", {"reason": "backlog"}
        )
        return got or 0.0

    before = dropped()
    monkeypatch.setattr(tracing_module, "MAX_PENDING", 0)  # every run finds it full
    s = await traced_session(tracing)
    async with s:
        assert (await s.run("tools.bank.lookup(card='x')\n1")).value == 1
    assert finished(tracing, exporter) == ()
    assert tracing.dropped == 1 and dropped() - before == 2  # the run and its call


@pytest.mark.parametrize("combined", [False, True])
async def test_a_run_span_names_an_exception_class_the_code_defined_as_other(
    tracing: Tracing, exporter: InMemorySpanExporter, combined: bool
) -> None:
    """The code names its own classes: ``type(value, (Exception,), {})`` would carry any
    text it holds into the span, which never holds the code's text (its HMAC only)."""
    from codemode.observability.metrics import Metrics
    from codemode.observability.observe import Observe

    reg = ToolRegistry()
    layer: Any = Observe(Metrics(process=False), tracing) if combined else tracing
    reg.use(layer.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(layer.run_hook, "observe")
    try:
        own = await s.run(f"raise type('card_{SECRET.replace('-', '_')}', (Exception,), {{}})()")
        known = await s.run("1 / 0")
    finally:
        await s.close()
    assert own.error is not None and SECRET.replace("-", "_") in own.error.type
    runs = [x for x in finished(tracing, exporter) if x.name == "codemode.run"]
    runs.sort(key=lambda x: x.start_time or 0)
    assert [dict(r.attributes or {})["error.type"] for r in runs] == ["_other", "ZeroDivisionError"]
    assert known.error is not None
