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
never waits for the child: the pipe is written by the emitter thread.

Frames, parent to child: 4-byte little-endian length, then ``marshal`` of
``("spans", [record, ...])`` or ``("flush", token, timeout_ms)``; the child answers a
flush with the token on a line of its stdout once its exporter has been flushed.
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
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from . import signals
from .spans import DIGEST_KEY, DIGEST_KEY_ENV, Record

log = logging.getLogger("codemode.tracing")

EXPORTERS = ("console", "otlp", "none")
"""``none`` builds the spans and drops them (benchmarks: the cost without an exporter's)."""
RESTART_AFTER = 5.0
"""Seconds after the child exited before another is started for a later batch."""
_HEADER = struct.Struct("<I")


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
        self._lock = threading.Lock()  # the pipe's writes, starts and stops
        self._replies = b""
        self._token = 0
        self.dropped = 0
        """Spans dropped because the child was not running."""
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
            if proc is not None and self._write(proc, frame):
                return True
        self.dropped += spans
        signals.spans_dropped(spans, "export_process")
        return False

    def flush(self, timeout: float) -> bool:
        """Wait until the child has exported what it was sent (False: timeout or gone)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            proc = self._running(restart=False)
            if proc is None:
                return self._exited_at == 0.0  # never started or closed: nothing held
            self._token += 1
            token = self._token
            if not self._write(proc, marshal.dumps(("flush", token, int(timeout * 1000)))):
                return False
            assert proc.stdout is not None
            return self._await_reply(proc.stdout, token, deadline)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the child after it exported what it holds (a later batch starts another)."""
        with self._lock:
            proc, self._proc = self._proc, None
            self._replies = b""
        if proc is None:
            return
        try:
            assert proc.stdin is not None
            proc.stdin.close()  # end of input: the child flushes, shuts down and exits
        except OSError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
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
        env[DIGEST_KEY_ENV] = DIGEST_KEY.hex()  # its digests match the server's
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
        self._proc = proc
        self._exited_at = 0.0
        self.starts += 1
        return proc

    def _write(self, proc: subprocess.Popen[bytes], payload: bytes) -> bool:
        assert proc.stdin is not None
        try:
            proc.stdin.write(_HEADER.pack(len(payload)) + payload)
            proc.stdin.flush()
        except (OSError, ValueError):  # broken pipe; closed
            self._gone(proc)
            return False
        return True

    def _gone(self, proc: subprocess.Popen[bytes]) -> None:
        if self._proc is not proc:
            return
        self._proc = None
        self._replies = b""
        self._exited_at = time.monotonic()
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

    def _await_reply(self, out: IO[bytes], token: int, deadline: float) -> bool:
        fd = out.fileno()
        want = f"{token}\n".encode()
        while True:
            lines = self._replies.split(b"\n")
            self._replies = lines[-1]
            if any(line + b"\n" == want for line in lines[:-1]):
                return True
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 4096)
            if not chunk:
                return False
            self._replies += chunk


# -- the child -------------------------------------------------------------------------


def _processor(exporter: str, service: str, endpoint: str | None) -> tuple[Any, Any, Any]:
    """The child's span processor with its exporter, the resource and the scope of the
    spans (as a ``TracerProvider`` with that service name would give them)."""
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

    if exporter == "console":
        # stderr, shared with the server: on `serve` (stdio) stdout carries MCP.
        processor = BatchSpanProcessor(
            ConsoleSpanExporter(out=sys.stderr), schedule_delay_millis=500
        )
    elif exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        otlp = OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()
        processor = BatchSpanProcessor(otlp)
    else:
        processor = BatchSpanProcessor(Drop())
    resource = Resource.create({"service.name": service})
    return processor, resource, InstrumentationScope("codemode")


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


def main(argv: list[str]) -> int:
    from .spans import readable_spans

    setting = json.loads(argv[0])
    processor, resource, scope = _processor(
        setting["exporter"], setting["service"], setting["endpoint"]
    )
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while (head := _read(stdin, _HEADER.size)) is not None:
        body = _read(stdin, _HEADER.unpack(head)[0])
        if body is None:
            break
        frame = marshal.loads(body)
        if frame[0] == "spans":
            for record in frame[1]:
                try:
                    spans = readable_spans(record, resource, scope)
                except Exception:  # one bad record must not stop the others
                    log.exception("could not build the spans of a run")
                    continue
                for span in spans:
                    processor.on_end(span)
        elif frame[0] == "flush":
            processor.force_flush(frame[2])
            stdout.write(f"{frame[1]}\n".encode())
            stdout.flush()
    processor.shutdown()
    return 0


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    sys.exit(main(sys.argv[1:]))
