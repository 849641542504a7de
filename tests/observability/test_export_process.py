"""Spans built by the export process reach a real OTLP/HTTP receiver with the identity the
server decided; its death costs spans (counted), never runs."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from codemode import Session
from codemode.observability import export_process, spans
from codemode.observability.capability import _tracing
from codemode.observability.config import ObservabilityConfig
from codemode.observability.metrics import default_metrics
from codemode.observability.providers import remote_parent
from codemode.observability.tracing import Tracing, digest

from . import test_tracing

pytestmark = pytest.mark.anyio

SECRET = "4111-1111-1111-1111"
TRACE_ID, PARENT_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


class Collector:
    """An OTLP/HTTP traces endpoint: the spans it was sent, as protobuf messages."""

    def __init__(self, delay: float = 0.0) -> None:
        """``delay``: seconds it takes to answer each export (a slow backend)."""
        self.spans: list[Any] = []
        self.services: set[str] = set()
        got = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                time.sleep(delay)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest.FromString(body)
                for rs in request.resource_spans:
                    for attr in rs.resource.attributes:
                        if attr.key == "service.name":
                            got.services.add(attr.value.string_value)
                    for ss in rs.scope_spans:
                        got.spans.extend(ss.spans)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def named(self, name: str) -> list[Any]:
        return [s for s in self.spans if s.name == name]

    def wait_for(self, name: str, n: int, timeout: float = 15.0) -> list[Any]:
        deadline = time.monotonic() + timeout
        while len(self.named(name)) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.named(name)


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.server.shutdown()
    c.server.server_close()


@pytest.fixture
def tracing(collector: Collector) -> Iterator[Tracing]:
    t = Tracing.exporting("otlp", "codemode-test", collector.url)
    yield t
    t.close()


def current_span() -> list[str]:
    """The trace and span id current where the tool runs (what an MCP client sends)."""
    ctx = trace.get_current_span().get_span_context()
    return [format(ctx.trace_id, "032x"), format(ctx.span_id, "016x")]


async def traced_session(tracing: Tracing) -> Session:
    return await test_tracing.traced_session(tracing, current_span)


def dropped() -> float:
    value = default_metrics().registry.get_sample_value(
        "codemode_trace_spans_dropped_total", {"reason": "export_process"}
    )
    return value or 0.0


async def test_a_runs_spans_reach_an_otlp_receiver_from_another_process(
    tracing: Tracing, collector: Collector
) -> None:
    code = f"tools.bank.lookup(card={SECRET!r})\ntools.bank.lookup(card='y')\n'ok'"
    async with await traced_session(tracing) as s:
        assert (await s.run(code)).value == "ok"
    assert tracing.flush()
    assert tracing.process is not None and tracing.process.pid not in (None, os.getpid())
    (run,) = collector.named("codemode.run")
    calls = collector.named("execute_tool bank.lookup")
    assert len(calls) == 2 and collector.services == {"codemode-test"}
    assert run.parent_span_id == b""  # a root
    for call in calls:
        assert call.trace_id == run.trace_id and call.parent_span_id == run.span_id
        assert run.start_time_unix_nano <= call.start_time_unix_nano
        assert call.start_time_unix_nano < call.end_time_unix_nano <= run.end_time_unix_nano
    attrs = {a.key: a.value for a in run.attributes}
    assert attrs["codemode.code.hmac"].string_value == digest(code)
    assert attrs["codemode.run.outcome"].string_value == "ok"
    assert SECRET not in str(collector.spans)  # hashes and sizes, never values


async def test_a_tool_call_sees_the_identity_the_exported_run_span_has(
    tracing: Tracing, collector: Collector
) -> None:
    async with await traced_session(tracing) as s:
        seen = (await s.run("tools.probe.current_span()")).value
    assert tracing.flush()
    (run,) = collector.named("codemode.run")
    assert seen == [run.trace_id.hex(), run.span_id.hex()]


class Seconds(float):
    """A float subclass (like numpy.float64), which marshal refuses."""


async def test_a_run_whose_facts_are_subclassed_numbers_is_exported_all_the_same(
    tracing: Tracing, collector: Collector
) -> None:
    async with await traced_session(tracing) as s:
        assert (await s.run("1", timeout=Seconds(30))).value == 1
        assert (await s.run("2")).value == 2  # and the emitter goes on
    assert tracing.flush()
    assert len(collector.named("codemode.run")) == 2


async def test_a_failing_call_and_its_run_are_marked_with_their_error_type(
    tracing: Tracing, collector: Collector
) -> None:
    async with await traced_session(tracing) as s:
        result = await s.run("tools.bank.down()")
    assert result.error is not None
    assert tracing.flush()
    (run,) = collector.named("codemode.run")
    (call,) = collector.named("execute_tool bank.down")
    error = 2  # STATUS_CODE_ERROR
    assert run.status.code == error and call.status.code == error
    attrs = {a.key: a.value.string_value for a in call.attributes}
    assert attrs["error.type"] == "ToolError"
    assert {a.key: a.value.string_value for a in run.attributes}["error.type"] == result.error.type


async def test_a_run_inside_a_remote_traceparent_joins_that_trace_with_its_tracestate(
    tracing: Tracing, collector: Collector
) -> None:
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "vendor=abc"}
    async with await traced_session(tracing) as s:
        with remote_parent(meta):
            await s.run("tools.bank.lookup(card='x')")
    assert tracing.flush()
    (run,) = collector.named("codemode.run")
    (call,) = collector.named("execute_tool bank.lookup")
    assert run.trace_id.hex() == TRACE_ID and run.parent_span_id.hex() == PARENT_ID
    assert run.trace_state == "vendor=abc"
    assert call.trace_id.hex() == TRACE_ID and call.parent_span_id == run.span_id


async def test_an_unsampled_run_sends_nothing_to_the_export_process(
    collector: Collector,
) -> None:
    tracing = Tracing.exporting("otlp", "codemode-test", collector.url, 0.0)
    try:
        async with await traced_session(tracing) as s:
            assert (await s.run("tools.bank.lookup(card='x')\n1")).value == 1
        assert tracing.flush()
        assert tracing.process is not None and tracing.process.starts == 0
    finally:
        tracing.close()


async def exporting(s: Session, tracing: Tracing) -> export_process.ExportProcess:
    """``tracing``'s export process, running and caught up after one traced run of ``s``."""
    await s.run("tools.bank.lookup(card='x')")
    assert tracing.flush()
    process = tracing.process
    assert process is not None and process.pid is not None
    return process


async def test_when_the_export_process_dies_runs_go_on_and_its_spans_are_counted(
    tracing: Tracing,
    collector: Collector,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s = await traced_session(tracing)
    try:
        process = await exporting(s, tracing)
        assert process.pid is not None
        os.kill(process.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while process.pid is not None and time.monotonic() < deadline:
            time.sleep(0.01)  # what reached the pipe before it died is lost uncounted
        before = dropped()
        with caplog.at_level(logging.WARNING, "codemode.tracing"):
            for _ in range(2):
                assert (await s.run("tools.bank.lookup(card='y')\n2")).value == 2
            assert not tracing.flush()  # the two runs' spans are gone
        assert dropped() - before == 4  # each run and its call
        assert "span export process exited" in caplog.text
        monkeypatch.setattr(export_process, "RESTART_AFTER", 0.0)
        await s.run("tools.bank.lookup(card='z')")
        assert tracing.flush()  # a new export process took the next batch
        assert process.starts == 2
        assert len(collector.named("codemode.run")) == 2
    finally:
        await s.close()


async def test_close_exports_what_is_pending_and_a_later_run_starts_another_process(
    tracing: Tracing, collector: Collector
) -> None:
    async with await traced_session(tracing) as s:
        await s.run("tools.bank.lookup(card='x')")
        tracing.close()  # no flush before
        assert len(collector.named("codemode.run")) == 1
        assert tracing.process is not None and tracing.process.pid is None
        await s.run("tools.bank.lookup(card='y')")
    assert tracing.flush()
    assert len(collector.named("codemode.run")) == 2


SERVER = """
import asyncio, os, signal, sys, time
from codemode import ToolRegistry
from codemode.chain import RUN_STAGES, Chain, RunEvent
from codemode.context import CallContext, current_context
from codemode.observability.tracing import Tracing
from codemode.result import ExecutionResult

async def ping() -> str:
    '''Pong.'''
    return "pong"

async def main() -> None:
    tracing = Tracing.exporting("otlp", "codemode-test", sys.argv[1])
    reg = ToolRegistry()
    reg.register(ping, server="t")
    reg.use(tracing.tool_layer, "observe")

    async def terminal(event: RunEvent) -> ExecutionResult:
        current_context.set(event.context)
        await reg.call("t", "ping", {})
        return ExecutionResult(value=1)

    chain = Chain("run", RUN_STAGES, terminal)
    chain.use(tracing.run_hook, "observe")
    for _ in range(3):
        await chain(RunEvent("1", 5.0, CallContext(session_id="s").for_run()))
    if sys.argv[2] == "wait":
        assert tracing.flush() and tracing.process is not None
        print(tracing.process.pid, flush=True)
        time.sleep(60)
    elif sys.argv[2] == "stop":  # the child stops reading; the server then exits
        from codemode.observability import export_process, spans
        export_process.MAX_BUFFERED = 256 << 10
        assert tracing.flush() and tracing.process is not None
        pid = tracing.process.pid
        os.kill(pid, signal.SIGSTOP)
        for _ in range(4):  # in several batches: the first fills the pipe and the buffer
            for _ in range(50):
                await chain(RunEvent("#" * 10_000, 5.0, CallContext(session_id="s").for_run()))
            assert not tracing.flush(0.5)
        deadline = time.monotonic() + 30  # on a loaded machine the emitter may still be
        while not tracing.process.dropped and time.monotonic() < deadline:  # handing over
            time.sleep(0.05)
        print(pid, tracing.process.dropped, flush=True)

asyncio.run(main())
"""


def serve(tmp_path: Path, url: str, mode: str) -> subprocess.Popen[str]:
    script = tmp_path / "server.py"
    script.write_text(textwrap.dedent(SERVER))
    return subprocess.Popen(
        [sys.executable, str(script), url, mode], stdout=subprocess.PIPE, text=True
    )


def test_spans_still_pending_at_exit_are_exported(tmp_path: Path, collector: Collector) -> None:
    server = serve(tmp_path, collector.url, "exit")
    server.communicate(timeout=30)
    assert server.returncode == 0
    assert len(collector.named("codemode.run")) == 3  # no flush or close in the script
    assert len(collector.named("execute_tool t.ping")) == 3


def test_the_export_process_ends_with_a_killed_server(tmp_path: Path, collector: Collector) -> None:
    server = serve(tmp_path, collector.url, "wait")
    try:
        assert server.stdout is not None
        pid = int(server.stdout.readline())
        assert len(collector.named("codemode.run")) == 3
    finally:
        server.kill()
        server.communicate()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_a_stopped_export_process_does_not_hold_up_the_servers_exit(
    tmp_path: Path, collector: Collector
) -> None:
    server = serve(tmp_path, collector.url, "stop")
    try:
        out, _ = server.communicate(timeout=60)  # before: blocked in a pipe write for ever
    finally:
        server.kill()
    pid, lost = map(int, out.split())
    assert server.returncode == 0
    assert lost > 0  # the runs that did not fit were counted, not waited for
    assert not alive(pid)  # killed at exit, not left stopped


async def test_a_stopped_export_process_costs_spans_never_a_wait(
    tracing: Tracing, collector: Collector, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(export_process, "MAX_BUFFERED", 64 << 10)
    s = await traced_session(tracing)
    try:
        process = await exporting(s, tracing)
        assert process.pid is not None
        pid = process.pid
        os.kill(pid, signal.SIGSTOP)
        before = dropped()
        started = time.monotonic()
        for _ in range(2):  # two batches of 200 kB: past the pipe (64 kB) and the buffer
            for _ in range(20):
                assert (await s.run("#" * 10_000 + "\n2")).value == 2
            assert not tracing.flush(0.5)
        assert dropped() - before >= 20 and process.dropped >= 20  # the second batch
        process.close(1.0)
        assert time.monotonic() - started < 10  # bounded by the timeouts, not the child
        assert not alive(pid)
    finally:
        await s.close()


async def test_the_export_process_is_handed_its_key_on_stdin_not_in_its_environment(
    tracing: Tracing, collector: Collector
) -> None:
    code = "tools.bank.lookup(card='x')\n'ok'"
    async with await traced_session(tracing) as s:
        assert (await s.run(code)).value == "ok"
    assert tracing.flush()
    assert tracing.process is not None and tracing.process.pid is not None
    pid = tracing.process.pid
    with open(f"/proc/{pid}/environ", "rb") as f:
        environ = f.read()
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        cmdline = f.read()
    for secret in (spans.DIGEST_KEY, spans.DIGEST_KEY.hex().encode()):
        assert secret not in environ and secret not in cmdline
    assert b"DIGEST_KEY" not in environ
    (run,) = collector.named("codemode.run")
    (call,) = collector.named("execute_tool bank.lookup")
    attrs = {a.key: a.value.string_value for a in run.attributes}
    assert attrs["codemode.code.hmac"] == digest(code)  # the child has the same key
    attrs = {a.key: a.value.string_value for a in call.attributes}
    assert attrs["codemode.tool.arguments.hmac"] == digest('{"card": "x"}')


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_serve_exports_from_a_process_unless_configured_in_process() -> None:
    on = ObservabilityConfig(tracing="console", service_name="codemode-test-process")
    off = ObservabilityConfig(
        tracing="console", service_name="codemode-test-process", trace_export_process=False
    )
    assert _tracing(on).process is not None and _tracing(on).provider is None
    assert _tracing(off).process is None and _tracing(off).provider is not None


def niceness(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[16])  # field 19 of proc(5)


async def test_the_export_process_runs_at_a_lower_cpu_priority_than_the_server(
    tracing: Tracing, collector: Collector
) -> None:
    async with await traced_session(tracing) as s:
        assert (await s.run("1")).value == 1
    assert tracing.flush()
    assert tracing.process is not None and tracing.process.pid is not None
    want = min(19, os.nice(0) + export_process.NICENESS)
    assert niceness(tracing.process.pid) == want
    assert len(collector.named("codemode.run")) == 1  # and it exports all the same


def lone_call(i: int) -> spans.Record:
    """A call outside any run as the server hands it to the export process: one span."""
    now = time.time_ns()
    op = ("crm", "rows", None, None, now, f'{{"i": {i}}}', 0, 100, now + 1000, None)
    return (spans.random_id(128), spans.random_id(64), 0, False, 1, "", now, now + 1000,
            "op", op, [])  # fmt: skip


def test_spans_a_slow_backend_cannot_take_in_time_are_counted_where_they_are_dropped() -> None:
    """The child's span processor holds 2048 spans and dropped any span past that, counted
    nowhere the server sees (only a warning line each): behind a slow backend, a burst lost
    most of its spans while ``codemode_trace_spans_dropped`` said 0. Now the child stops
    reading when its processor is full, and what the server cannot buffer is counted."""
    slow = Collector(delay=0.3)
    process = export_process.ExportProcess("otlp", "codemode-test", slow.url)
    try:
        sent = 0
        for batch in range(6):
            records = [lone_call(batch * 1000 + i) for i in range(1000)]
            process.send(records, len(records))
            sent += len(records)
        assert process.flush(90)
        assert len(slow.spans) + process.dropped == sent
    finally:
        process.close()
        slow.server.shutdown()
        slow.server.server_close()
