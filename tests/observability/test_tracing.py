"""OpenTelemetry spans: a run with its tool calls as children, no raw values, remote parents."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode import Session, SubprocessExecutor, ToolRegistry
from codemode.observability.tracing import Tracing, digest, remote_parent

pytestmark = pytest.mark.anyio

SECRET = "4111-1111-1111-1111"


def lookup(card: str) -> dict[str, Any]:
    """The holder of a card."""
    return {"card": card, "holder": "Ada Lovelace"}


def down() -> None:
    """Always fails."""
    raise RuntimeError("backend down")


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def tracing(exporter: InMemorySpanExporter) -> Iterator[Tracing]:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider)
    provider.shutdown()


async def traced_session(tracing: Tracing) -> Session:
    reg = ToolRegistry()
    reg.register(lookup, server="bank")
    reg.register(down, server="bank")
    reg.use(tracing.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(tracing.run_hook, "observe")
    await s.start()
    return s


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
    spans = by_name(exporter.get_finished_spans())
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
    assert run.attributes["codemode.code.sha256"] == digest(code)
    assert run.attributes["codemode.run.outcome"] == "ok"


async def test_spans_hold_hashes_and_sizes_never_code_arguments_or_results(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    s = await traced_session(tracing)
    try:
        await s.run(f"print(tools.bank.lookup(card={SECRET!r}))")
    finally:
        await s.close()
    for span in exporter.get_finished_spans():
        shown = repr(dict(span.attributes or {})) + repr(span.status.description) + span.name
        assert SECRET not in shown and "Ada" not in shown and "print" not in shown
    call = by_name(exporter.get_finished_spans())["execute_tool bank.lookup"]
    assert call.attributes is not None
    assert call.attributes["codemode.tool.result.bytes"] > 20


async def test_a_failing_run_is_marked_with_its_error_type(
    tracing: Tracing, exporter: InMemorySpanExporter
) -> None:
    s = await traced_session(tracing)
    try:
        await s.run("{}['missing']")
    finally:
        await s.close()
    run = by_name(exporter.get_finished_spans())["codemode.run"]
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
    runs = [sp for sp in exporter.get_finished_spans() if sp.name == "codemode.run"]
    call = by_name(exporter.get_finished_spans())["execute_tool bank.lookup"]
    assert format(runs[0].context.trace_id, "032x") == trace_id
    assert runs[0].parent is not None and format(runs[0].parent.span_id, "016x") == parent_id
    assert call.context.trace_id == runs[0].context.trace_id
    assert format(runs[1].context.trace_id, "032x") != trace_id


def test_a_malformed_traceparent_is_ignored() -> None:
    with remote_parent({"traceparent": "not-a-traceparent"}):
        assert not trace.get_current_span().get_span_context().is_valid
    with remote_parent({"traceparent": 42}):
        pass
