"""Metrics and tracing as one layer (``Observe``) count and trace what the two layers do."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

from codemode import Session, SubprocessExecutor, ToolRegistry
from codemode.errors import ToolError
from codemode.observability import Metrics, ObservabilityConfig
from codemode.observability.capability import _layers
from codemode.observability.observe import Observe
from codemode.observability.sizes import canonical, size_of
from codemode.observability.spans import digest
from codemode.observability.tracing import Tracing

from . import test_tracing
from .scrape import samples

pytestmark = pytest.mark.anyio

CODE = [
    "tools.bank.lookup(card='x')\ntools.bank.lookup(card='é' * 3)\n'ok'",
    "try:\n    tools.bank.down()\nexcept Exception:\n    pass",
    "try:\n    tools.bank.lookup(card=1)\nexcept Exception:\n    pass",  # bad arguments
    "tools.bank.lookup(card='y')\n1 / 0",
]
VARIES = (  # from run to run
    "codemode.run.id",
    "codemode.session.id",
    "codemode.run.cpu_s",
    "codemode.worker.peak_memory_bytes",
)


async def observed(ratio: float, layers: Callable[[Metrics, Tracing], list[Any]]) -> Any:
    """What the metrics and the spans say of ``CODE`` and a call outside any run."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    metrics, tracing = Metrics(process=False), Tracing(provider)
    reg = ToolRegistry()
    reg.register(test_tracing.lookup, server="bank")
    reg.register(test_tracing.down, server="bank")
    s = Session(SubprocessExecutor(), tools=reg)
    for each in layers(metrics, tracing):
        reg.use(each.tool_layer, "observe")
        s.use(each.run_hook, "observe")
    try:
        async with s:
            for code in CODE:
                await s.run(code)
        await reg.call("bank", "lookup", {"card": "z"})
        with pytest.raises(ToolError):
            await reg.call("bank", "down", {})
        assert tracing.flush()
    finally:
        tracing.close()
        provider.shutdown()
    counts = {
        k: v
        for k, v in samples(metrics.exposition().decode()).items()
        if not k[0].endswith(("_sum", "_bucket", "_created", "_ratio"))
        and not k[0].startswith("codemode_pool_")  # the warm pool's refills: timing, not us
    }
    return counts, sorted(map(_shape, exporter.get_finished_spans()))


def _shape(span: ReadableSpan) -> tuple[Any, ...]:
    attrs = {k: v for k, v in (span.attributes or {}).items() if k not in VARIES}
    return (span.name, span.parent is None, span.status.status_code.name, sorted(attrs.items()))


@pytest.mark.parametrize("ratio", [1.0, 0.0])
async def test_one_layer_counts_and_traces_what_the_two_layers_do(ratio: float) -> None:
    apart = await observed(ratio, lambda m, t: [m, t])
    together = await observed(ratio, lambda m, t: [Observe(m, t)])
    assert together == apart
    counts, spans = together
    ok = ("codemode_tool_calls_total", frozenset({("server", "bank"), ("tool", "lookup"),
                                                  ("outcome", "ok")}))  # fmt: skip
    assert counts[ok] == 4  # three in runs, one outside
    assert len(spans) == (11 if ratio else 0)  # 4 runs, their 5 calls, 2 calls outside


def test_serve_uses_one_layer_when_metrics_and_tracing_are_both_on() -> None:
    both = ObservabilityConfig(tracing="console", service_name="codemode-test-observe")
    (layer,) = _layers(both)
    assert isinstance(layer, Observe)
    only = ObservabilityConfig(metrics=False, tracing="console")
    assert [type(x).__name__ for x in _layers(only)] == ["Tracing"]


@asynccontextmanager
async def _bank_session() -> AsyncIterator[tuple[Session, Observe, InMemorySpanExporter]]:
    """A session whose ``bank`` tools pass through one ``Observe`` layer exporting in
    memory; every span is flushed when the block ends."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    observe = Observe(Metrics(process=False), Tracing(provider))
    reg = ToolRegistry()
    reg.register(test_tracing.lookup, server="bank")
    reg.use(observe.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(observe.run_hook, "observe")
    try:
        async with s:
            yield s, observe, exporter
        assert observe.tracing.flush()
    finally:
        observe.tracing.close()
        provider.shutdown()


async def test_a_runs_call_spans_lie_within_its_span_on_the_wall_clock() -> None:
    """Observe times calls with one monotonic clock from the run's wall-clock start."""
    async with _bank_session() as (s, _, exporter):
        before = time.time_ns()
        assert (await s.run(CODE[0])).value == "ok"
        after = time.time_ns()
    spans = exporter.get_finished_spans()
    (run,) = [x for x in spans if x.name == "codemode.run"]
    calls = [x for x in spans if x.name == "execute_tool bank.lookup"]
    assert len(calls) == 2
    assert run.start_time is not None and run.end_time is not None
    assert before <= run.start_time and run.end_time <= after
    for call in calls:
        assert call.parent is not None and call.parent.span_id == run.context.span_id
        assert call.start_time is not None and call.end_time is not None
        assert run.start_time <= call.start_time < call.end_time <= run.end_time
    first, second = sorted(calls, key=lambda x: x.start_time or 0)
    assert (first.end_time or 0) <= (second.start_time or 0)  # one after the other


async def test_a_call_that_outlives_its_traced_run_is_counted_once() -> None:
    """A traced run's calls are counted with the run; one still running when the run ends
    (a timeout) is counted when it returns, alone."""
    done = anyio.Event()

    async def nap() -> str:
        """Sleeps past its run's timeout."""
        try:
            await anyio.sleep(1.0)
            return "late"
        finally:
            done.set()

    metrics = Metrics(process=False)
    tracing = Tracing.exporting("none", "test", None)
    reg = ToolRegistry()
    reg.register(nap, server="slow")
    layer = Observe(metrics, tracing)
    reg.use(layer.tool_layer, "observe")
    s = Session(SubprocessExecutor(), tools=reg)
    s.use(layer.run_hook, "observe")
    try:
        async with s:
            result = await s.run("tools.slow.nap()", timeout=0.3)
            assert result.timed_out or result.error is not None
            with anyio.fail_after(5):
                await done.wait()
            await anyio.sleep(0.05)  # the layer's own bookkeeping after the tool returned
    finally:
        tracing.close()
    got = samples(metrics.exposition().decode())
    calls = {k: v for k, v in got.items() if k[0] == "codemode_tool_calls_total"}
    assert sum(calls.values()) == 1, calls


async def test_a_traced_runs_calls_read_alike_whether_metrics_or_spans_read_them_first() -> None:
    """A traced run's calls note the call itself (``spans.CallNote``); a scrape right after
    the run reads them before the emitter has: sizes, digests and ids come out the same."""
    async with _bank_session() as (s, observe, exporter):
        assert (await s.run(CODE[0])).value == "ok"
        scraped = samples(observe.metrics.exposition().decode())  # folds the notes now
    args = [canonical({"card": "x"}), canonical({"card": "é" * 3})]
    pair = frozenset({("server", "bank"), ("tool", "lookup")})
    assert scraped[("codemode_tool_call_sent_bytes_total", pair)] == sum(map(size_of, args))
    spans = exporter.get_finished_spans()
    (run,) = [x for x in spans if x.name == "codemode.run"]
    assert run.attributes is not None
    calls = [dict(x.attributes or {}) for x in spans if x.name == "execute_tool bank.lookup"]
    got = sorted((str(a["codemode.tool.arguments.hmac"]), a["codemode.tool.arguments.bytes"])
                 for a in calls)  # fmt: skip
    assert got == sorted((digest(text), size_of(text)) for text in args)
    assert {a["codemode.run.id"] for a in calls} == {run.attributes["codemode.run.id"]}
    received = [a["codemode.tool.result.bytes"] for a in calls]
    assert all(isinstance(n, int) and n > 0 for n in received), received
