"""Counters other packages report through ``codemode.observability.signals``, and the
memory operations of runs (counted and traced) in real sessions."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codemode import Session, SubprocessExecutor
from codemode.approval import Approval
from codemode.memory import Memory
from codemode.observability import Metrics, default_metrics, signals
from codemode.observability.tracing import Tracing

from .scrape import value

pytestmark = pytest.mark.anyio

SECRET = "sk-live-0123456789"


def now(name: str, **labels: str) -> float:
    return value(default_metrics().exposition().decode(), name, **labels)


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


async def test_memory_operations_of_a_run_are_counted_by_method_and_outcome(
    tmp_path: Path,
) -> None:
    metrics = Metrics(process=False)
    s = Session(SubprocessExecutor(), memory=Memory.from_workspace(tmp_path))
    s.host.use(metrics.host_layer)
    async with s:
        result = await s.run(
            "state.set('step', 1)\nstate.get('step')\n"
            "try:\n    artifacts.load('missing')\nexcept Exception:\n    pass\n'done'"
        )
    assert result.value == "done", result
    text = metrics.exposition().decode()
    assert value(text, "codemode_memory_operations_total", method="state.set", outcome="ok") == 1
    assert value(text, "codemode_memory_operations_total", method="state.get", outcome="ok") == 1
    assert (
        value(text, "codemode_memory_operations_total", method="artifacts.load", outcome="error")
        == 1
    )
    count = "codemode_memory_operation_duration_seconds_count"
    assert value(text, count, method="state.set") == 1


async def test_a_runs_memory_operations_are_child_spans_without_names_or_values(
    tmp_path: Path, exporter: InMemorySpanExporter
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)
    s = Session(SubprocessExecutor(), memory=Memory.from_workspace(tmp_path))
    s.use(tracing.run_hook, "observe")
    s.host.use(tracing.host_layer)
    async with s:
        await s.run(f"state.set('api_key', {SECRET!r})\nartifacts.save('report', 'x' * 100)")
    tracing.close()  # the spans are built after the run, on the emitter thread
    provider.shutdown()
    spans = {span.name: span for span in exporter.get_finished_spans()}
    run = spans["codemode.run"]
    for name in ("codemode.memory state.set", "codemode.memory artifacts.save"):
        child = spans[name]
        assert child.parent is not None and child.parent.span_id == run.context.span_id
        assert child.context.trace_id == run.context.trace_id
    attrs = dict(spans["codemode.memory state.set"].attributes or {})
    assert attrs["codemode.memory.area"] == "state"
    size = attrs["codemode.memory.params.bytes"]
    assert isinstance(size, int) and size > len(SECRET)
    shown = repr([dict(sp.attributes or {}) for sp in exporter.get_finished_spans()])
    assert SECRET not in shown and "api_key" not in shown


async def test_a_session_that_takes_a_warm_worker_reports_a_pool_acquire() -> None:
    executor = SubprocessExecutor(pool_size=1)
    await executor.warm()
    before = now("codemode_worker_acquire_seconds_count", source="pool")
    async with Session(executor) as s:
        await s.run("1")
    assert now("codemode_worker_acquire_seconds_count", source="pool") == before + 1


async def test_an_approval_decision_is_counted_by_the_approval_layer(
    notes_ws: Any, open_notes: Any
) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    granted = now("codemode_approvals_total", decision="granted")
    refused = now("codemode_approvals_total", decision="refused")
    answers = iter([Approval(True), Approval(False, reason="no")])

    async def approve(request: Any) -> Approval:
        return next(answers)

    async with open_notes(notes_ws, approve=approve) as s:
        await s.run("tools.notes.delete_note(name='a')")
        await s.run("try:\n    tools.notes.delete_note(name='b')\nexcept ToolDenied:\n    pass")
    assert now("codemode_approvals_total", decision="granted") == granted + 1
    assert now("codemode_approvals_total", decision="refused") == refused + 1


def test_label_values_of_signals_are_bounded() -> None:
    before = now("codemode_approvals_total", decision="_other")
    signals.approval("a decision nobody defined")
    signals.session_ended("some reason")
    assert now("codemode_approvals_total", decision="_other") == before + 1
    assert now("codemode_sessions_ended_total", reason="_other") >= 1
