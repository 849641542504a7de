"""Spans built and exported by a child process, off the server's GIL.

Why: building a run's SDK spans (the run and ~5 calls) costs 130-170 µs of CPU, and on an
emitter thread of the server process that CPU holds the GIL the event loop needs: it
showed as 5-12 % of a run with 5 tool calls. Here the server's emitter thread only turns
each finished run into plain tuples (ids, times, sizes; ``marshal`` encodes a run in a few
µs) and writes a batch to a pipe; this module, run as ``python -m`` in a child process,
builds real OpenTelemetry spans with the identity the server decided live (same trace
and span ids, parent, times, attributes) and exports them (console, OTLP) through a
``BatchSpanProcessor``. On a machine with two cores it runs beside the event loop. It
makes the finished spans directly (``spans.readable_spans``), which costs a tenth of
what live SDK spans do.

Only for exporters configured by name (``observability.tracing = console | otlp``): an
in-process ``TracerProvider`` (a user's span processor, a test's in-memory exporter) is
used in process by ``Tracing(provider)``, as before.

When the child is gone, a batch is dropped: counted (``dropped``, and
``codemode_trace_spans_dropped{reason="export_process"}``) and logged once per exit; a
new child starts for a later batch, at most once per ``RESTART_AFTER`` seconds. A run
never waits for the child: the pipe is written by the emitter thread, and never blocks:
its end is non-blocking, what the child has not read yet waits in a buffer of at most
``MAX_BUFFERED`` bytes, and a batch that does not fit is dropped (counted, reason
``export_process``). So a stopped or stuck child cannot hold the emitter, a flush or the
server's exit beyond their timeouts; ``close`` kills a child that does not end in time.
The child's own processor never drops (``_Paced``): a backlog comes back to that buffer.
What stays buffered goes out with the next batch, a flush or ``close``.

Frames, parent to child: 4-byte little-endian length, then ``marshal`` of
``("key", digest_key)`` (the first frame: the HMAC key of ``spans.digest``, on the pipe
rather than in the child's environment, which other processes of the user can read in
``/proc/PID/environ``), ``("spans", [record, ...])`` or ``("flush", token, timeout_ms)``;
the child answers a flush with the token on a line of its stdout once its exporter has
been flushed.
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from . import signals, spans
from .spans import Record

log = logging.getLogger("codemode.tracing")

EXPORTERS = ("console", "otlp", "none")
"""``none`` builds the spans and drops them (benchmarks: the cost without an exporter's)."""
RESTART_AFTER = 5.0
"""Seconds after the child exited before another is started for a later batch."""
MAX_BUFFERED = 8 << 20
"""Bytes kept for a child that is not reading (a batch past this is dropped); a batch
larger than this alone is still kept when nothing else waits."""
_HEADER = struct.Struct("<I")
NICENESS = 10
"""How much lower the child's CPU priority is than the server's: its work is never urgent
(spans are batched for seconds anyway), while the event loop, the workers and upstream
servers are each on some run's critical path. On a busy machine the child then waits for
them instead of taking their core."""


class ExportProcess:
    """The server's side of the child process: started at the first batch."""

    def __init__(self, exporter: str, service: str, endpoint: str | None) -> None:
        if exporter not in EXPORTERS:
            raise ValueError(f"exporter must be one of {EXPORTERS}, not {exporter!r}")
        setting = json.dumps({"exporter": exporter, "service": service, "endpoint": endpoint})
        # -P: not the working directory first on sys.path (a json.py there is not ours).
        self.argv = [sys.executable, "-P", "-m", __name__, setting]
        self._proc: subprocess.Popen[bytes] | None = None
        self._exited_at = 0.0
        self._lock = threading.Lock()  # the pipe's writes, starts and stops (none blocks)
        self._replies = b""
        self._token = 0
        self._buffer = bytearray()  # written to the pipe as the child reads
        self._frames: deque[list[int]] = deque()  # [bytes still buffered, spans] a frame
        self.dropped = 0
        """Spans dropped because the child was not running or not reading."""
        self.starts = 0

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def send(self, records: Sequence[Record], spans: int) -> bool:
        """Hand ``records`` (``spans`` spans in all) to the child; False: dropped."""
        try:
            frame = marshal.dumps(("spans", list(records)))
        except ValueError:  # a subclass of str, int or float (an enum, numpy.float64...)
            frame = marshal.dumps(("spans", _plain(list(records))))
        with self._lock:
            proc = self._running(restart=True)
            if proc is not None and self._queue(proc, frame, spans):
                return True
        self._drop(spans)
        return False

    def _drop(self, spans: int) -> None:
        if spans:
            self.dropped += spans
            signals.spans_dropped(spans, "export_process")

    def flush(self, timeout: float) -> bool:
        """Wait until the child has exported what it was sent (False: timeout or gone)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            proc = self._running(restart=False)
            if proc is None:
                return self._exited_at == 0.0  # never started or closed: nothing held
            self._token += 1
            token = self._token
            if not self._queue(proc, marshal.dumps(("flush", token, int(timeout * 1000))), 0):
                return False
            return self._await_reply(proc, token, deadline)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the child after it exported what it holds (a later batch starts another);
        within ``timeout`` seconds in all, or it is killed (what it held is lost)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            proc = self._proc
            if proc is not None and proc.poll() is None:
                self._drain(proc, deadline)
            proc, self._proc = self._proc, None
            self._replies = b""
            self._forget()
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()  # end of input: the child flushes, shuts down and exits
        except OSError:
            pass
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning("the span export process did not end in %g s: killed", timeout)
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def _running(self, *, restart: bool) -> subprocess.Popen[bytes] | None:
        proc = self._proc
        if proc is not None:
            if proc.poll() is None:
                return proc
            self._gone(proc)
        if not restart:
            return None
        if self._exited_at and time.monotonic() - self._exited_at < RESTART_AFTER:
            return None
        return self._start()

    def _start(self) -> subprocess.Popen[bytes] | None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # so -m finds this package
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        try:
            # Its own session: a terminal's Ctrl-C reaches the server, which flushes the
            # child at exit; the child ends when its stdin does.
            proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            log.warning("could not start the span export process (%s): spans are dropped", exc)
            self._exited_at = time.monotonic()
            return None
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)  # written by _pump only
        self._proc = proc
        self._exited_at = 0.0
        self.starts += 1
        # First: the key, so its digests match the server's (see the module docstring).
        self._queue(proc, marshal.dumps(("key", spans.DIGEST_KEY)), 0)
        return proc

    def _queue(self, proc: subprocess.Popen[bytes], payload: bytes, spans: int) -> bool:
        """Buffer a frame and write what the pipe takes now; False: no room (dropped by
        the caller) or the child is gone."""
        if self._buffer and len(self._buffer) + len(payload) > MAX_BUFFERED:
            self._pump(proc)  # perhaps the child read meanwhile
            if self._proc is not proc:
                return False
            if self._buffer and len(self._buffer) + len(payload) > MAX_BUFFERED:
                return False
        self._buffer += _HEADER.pack(len(payload))
        self._buffer += payload
        self._frames.append([_HEADER.size + len(payload), spans])
        self._pump(proc)
        return self._proc is proc

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        """Write what the pipe takes without waiting (the child gone: ``_gone``)."""
        assert proc.stdin is not None
        while self._buffer:
            try:
                n = os.write(proc.stdin.fileno(), self._buffer)
            except BlockingIOError:
                return
            except (OSError, ValueError):  # broken pipe; closed
                self._gone(proc)
                return
            del self._buffer[:n]
            while n and self._frames:
                frame = self._frames[0]
                took = min(n, frame[0])
                frame[0] -= took
                n -= took
                if frame[0] == 0:
                    self._frames.popleft()

    def _drain(self, proc: subprocess.Popen[bytes], deadline: float) -> bool:
        """Write the buffer out, waiting for the child to read until ``deadline``."""
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        while True:
            self._pump(proc)
            if not self._buffer or self._proc is not proc:
                return not self._buffer
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            select.select([], [fd], [], left)

    def _forget(self) -> None:
        """Drop what is buffered for a child that is gone (its spans counted)."""
        lost = sum(spans for _, spans in self._frames)
        self._buffer.clear()
        self._frames.clear()
        self._drop(lost)

    def _gone(self, proc: subprocess.Popen[bytes]) -> None:
        if self._proc is not proc:
            return
        self._proc = None
        self._replies = b""
        self._exited_at = time.monotonic()
        self._forget()
        code = proc.poll()
        for pipe in (proc.stdin, proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:  # unwritten bytes: the pipe is closed all the same
                pass
        log.warning(
            "the span export process exited (code %s): spans are dropped (counted in "
            "codemode_trace_spans_dropped) until another starts in %g s",
            code,
            RESTART_AFTER,
        )

    def _await_reply(self, proc: subprocess.Popen[bytes], token: int, deadline: float) -> bool:
        """Write out what is buffered (the flush frame last) and read the child's replies
        until ``token`` comes back or ``deadline`` passes."""
        assert proc.stdout is not None and proc.stdin is not None
        fd, to_child = proc.stdout.fileno(), proc.stdin.fileno()
        want = f"{token}\n".encode()
        while True:
            lines = self._replies.split(b"\n")
            self._replies = lines[-1]
            if any(line + b"\n" == want for line in lines[:-1]):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or self._proc is not proc:
                return False
            writable = [to_child] if self._buffer else []
            readable, ready, _ = select.select([fd], writable, [], left)
            if ready:
                self._pump(proc)
            if not readable:
                continue
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            self._replies += chunk


# -- the child -------------------------------------------------------------------------


class _Paced:
    """The child's span processor, never asked to hold more than its queue: its
    ``BatchSpanProcessor`` drops a span that finds the queue full (a warning line each,
    counted nowhere the server sees). When it is full, the child exports it right away
    and reads nothing from the pipe meanwhile; the pipe and the server's buffer then
    fill, and what does not fit is dropped there, counted (``export_process``)."""

    def __init__(self, processor: Any, counted: Any, room: int) -> None:
        self.processor = processor
        self._counted = counted  # the exporter, counting the spans it was handed
        self._room = room
        self._handed = 0

    def on_end(self, span: Any) -> None:
        if self._handed - self._counted.taken >= self._room:
            self.processor.force_flush()  # exports all it holds (this thread adds none)
            self._handed = self._counted.taken
        self.processor.on_end(span)
        self._handed += 1


def _processor(exporter: str, service: str, endpoint: str | None) -> tuple[_Paced, Any, Any]:
    """The child's span processor with its exporter, the resource and the scope of the
    spans (as a ``TracerProvider`` with that service name would give them)."""
    from opentelemetry.sdk.environment_variables import OTEL_BSP_MAX_QUEUE_SIZE
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SpanExporter,
        SpanExportResult,
    )
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    class Drop(SpanExporter):
        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    class Counted(SpanExporter):
        """``inner``, counting the spans the processor took out of its queue (its
        exports are never concurrent: it holds a lock around each)."""

        def __init__(self, inner: SpanExporter) -> None:
            self.inner = inner
            self.taken = 0

        def export(self, spans: Sequence[Any]) -> SpanExportResult:
            self.taken += len(spans)
            return self.inner.export(spans)

        def shutdown(self) -> None:
            self.inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return self.inner.force_flush(timeout_millis)

    delay: dict[str, Any] = {}
    inner: SpanExporter
    if exporter == "console":
        # stderr, shared with the server: on `serve` (stdio) stdout carries MCP.
        inner, delay = ConsoleSpanExporter(out=sys.stderr), {"schedule_delay_millis": 500}
    elif exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        inner = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
    else:
        inner = Drop()
    try:  # the SDK's default and setting, made explicit: the pace is kept to it
        room = int(os.environ.get(OTEL_BSP_MAX_QUEUE_SIZE) or 2048)
    except ValueError:
        room = 2048
    counted = Counted(inner)
    processor = BatchSpanProcessor(counted, max_queue_size=room, **delay)
    resource = Resource.create({"service.name": service})
    return _Paced(processor, counted, room), resource, InstrumentationScope("codemode")


_EXACT = (str, int, float, bool, bytes, type(None))


def _plain(value: Any) -> Any:
    """``value`` with every container and scalar of the exact builtin types marshal takes
    (subclasses become their base type's value; anything else its ``repr``)."""
    if type(value) in _EXACT:
        return value
    if isinstance(value, tuple):
        return tuple(map(_plain, value))
    if isinstance(value, list):
        return list(map(_plain, value))
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, str):
        return str.__str__(value)  # the characters, not an enum's "Kind.A"
    if isinstance(value, bool | int):
        return bool(value) if isinstance(value, bool) else int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, bytes):
        return bytes(value)
    return repr(value)


def _read(stream: IO[bytes], n: int) -> bytes | None:
    data = stream.read(n)
    return data if len(data) == n else None


def _frame(stream: IO[bytes]) -> Any:
    head = _read(stream, _HEADER.size)
    body = None if head is None else _read(stream, _HEADER.unpack(head)[0])
    return None if body is None else marshal.loads(body)


def _yield_cpu() -> None:
    """Lower this process's CPU priority by ``NICENESS`` (best effort: a kernel or
    sandbox that refuses leaves it as it is)."""
    try:
        os.nice(NICENESS)
    except OSError as exc:
        log.debug("the span export process keeps its priority: %s", exc)


def main(argv: list[str]) -> int:
    from .spans import readable_spans

    _yield_cpu()
    setting = json.loads(argv[0])
    paced, resource, scope = _processor(
        setting["exporter"], setting["service"], setting["endpoint"]
    )
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    first = _frame(stdin)
    if first is None or first[0] != "key" or not isinstance(first[1], bytes):
        log.error("the span export process needs its key as the first frame")
        return 2
    spans.DIGEST_KEY = first[1]  # so its digests match the server's
    while (frame := _frame(stdin)) is not None:
        if frame[0] == "spans":
            for record in frame[1]:
                try:
                    built = readable_spans(record, resource, scope)
                except Exception:  # one bad record must not stop the others
                    log.exception("could not build the spans of a run")
                    continue
                for span in built:
                    paced.on_end(span)
        elif frame[0] == "flush":
            paced.processor.force_flush(frame[2])
            stdout.write(f"{frame[1]}\n".encode())
            stdout.flush()
    paced.processor.shutdown()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv[1:]))
