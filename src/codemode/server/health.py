"""``/healthz`` and ``/readyz`` answered off the event loop, on a port of their own.

Why: the main port's health endpoints are answered by the outermost ASGI layer, but on
the event loop: when hundreds of sessions saturate it, their answer waits behind
everything else (hundreds of ms, seconds), and a liveness probe kills a server that is
merely busy. ``--health-port`` adds a listener served by one thread of its own, which
answers in a few ms whatever the loop does, from counters the loop keeps (plain reads:
never a lock the loop holds, never a task).

It still tells the truth about the loop: a heartbeat task ticks on it every
``HEARTBEAT`` seconds, and when the loop has not ticked for ``stall_after`` seconds
(deadlocked, or stuck in a blocking call) ``/healthz`` answers ``503 "stalled"``. A busy
loop keeps ticking (a tick waits its turn, hundreds of ms at worst), so it stays alive.

The thread needs the GIL for a few hundred microseconds per answer: code that holds the
GIL for seconds (a long C call) delays it as it delays everything else.
"""

from __future__ import annotations

import contextlib
import json
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import anyio

HEARTBEAT = 0.1
"""Seconds between two ticks of the loop's heartbeat."""
DEFAULT_STALL_AFTER = 10.0
"""Seconds without a tick after which the loop counts as stalled."""
MAX_CONNECTIONS = 64
REQUEST_TIMEOUT = 5.0
"""A connection that has not sent its request line and headers by then is closed."""
MAX_REQUEST = 8192

Answer = tuple[int, dict[str, Any]]
Facts = Callable[[str], Answer | None]
"""``facts(path) -> (status, body)`` for a health path, None for any other path. Called on
the health thread: it must only read plain attributes."""

__all__ = ["DEFAULT_STALL_AFTER", "HEARTBEAT", "HealthServer", "Heartbeat"]


class Heartbeat:
    """When the event loop last ran a tick (``run`` is a task on that loop)."""

    def __init__(self, stall_after: float = DEFAULT_STALL_AFTER) -> None:
        self.stall_after = stall_after
        self.last = time.monotonic()

    async def run(self) -> None:
        while True:
            self.last = time.monotonic()
            await anyio.sleep(HEARTBEAT)

    def lag(self) -> float:
        """Seconds the loop is late for its next tick (0 when on time)."""
        return max(0.0, time.monotonic() - self.last - HEARTBEAT)

    @property
    def stalled(self) -> bool:
        return self.lag() > self.stall_after


class HealthServer:
    """One thread serving ``facts`` over HTTP/1.1 on ``sock`` (one answer per connection)."""

    def __init__(self, sock: socket.socket, facts: Facts) -> None:
        self._sock = sock
        self._facts = facts
        self._wake_r, self._wake_w = socket.socketpair()
        self._thread = threading.Thread(target=self._serve, name="codemode-health", daemon=True)

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        self._sock.setblocking(False)
        self._thread.start()

    def close(self) -> None:
        """Stop the thread and close the listener (safe to call twice)."""
        if self._thread.is_alive():
            with contextlib.suppress(OSError):
                self._wake_w.send(b"x")
            self._thread.join(timeout=5)
        for s in (self._sock, self._wake_r, self._wake_w):
            s.close()

    def _serve(self) -> None:
        sel = selectors.DefaultSelector()
        sel.register(self._sock, selectors.EVENT_READ, None)
        sel.register(self._wake_r, selectors.EVENT_READ, None)
        pending: dict[socket.socket, tuple[bytearray, float]] = {}
        try:
            while True:
                for key, _ in sel.select(timeout=1.0):
                    sock = key.fileobj
                    if sock is self._wake_r:
                        return
                    if sock is self._sock:
                        self._accept(sel, pending)
                    else:
                        assert isinstance(sock, socket.socket)
                        self._read(sel, pending, sock)
                now = time.monotonic()
                for conn in [
                    c for c, (_, since) in pending.items() if now - since > REQUEST_TIMEOUT
                ]:
                    self._drop(sel, pending, conn)
        finally:
            for conn in list(pending):
                self._drop(sel, pending, conn)
            sel.close()

    def _accept(self, sel: selectors.BaseSelector, pending: dict[Any, Any]) -> None:
        try:
            conn, _ = self._sock.accept()
        except OSError:  # the client gave up already, or no fd left: try the next one
            return
        if len(pending) >= MAX_CONNECTIONS:
            conn.close()
            return
        conn.setblocking(False)
        sel.register(conn, selectors.EVENT_READ, None)
        pending[conn] = (bytearray(), time.monotonic())

    def _read(
        self,
        sel: selectors.BaseSelector,
        pending: dict[socket.socket, tuple[bytearray, float]],
        conn: socket.socket,
    ) -> None:
        buf, _ = pending[conn]
        try:
            data = conn.recv(MAX_REQUEST)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        buf += data
        if data and b"\r\n\r\n" not in buf and len(buf) < MAX_REQUEST:
            return  # the rest of the headers is on its way
        self._drop(sel, pending, conn, self._answer(bytes(buf)) if data else None)

    def _drop(
        self,
        sel: selectors.BaseSelector,
        pending: dict[socket.socket, Any],
        conn: socket.socket,
        reply: bytes | None = None,
    ) -> None:
        sel.unregister(conn)
        del pending[conn]
        try:
            if reply:
                conn.setblocking(True)
                conn.settimeout(1.0)  # an answer is < 1 KB: the socket buffer takes it
                conn.sendall(reply)
        except OSError:
            pass
        finally:
            conn.close()

    def _answer(self, request: bytes) -> bytes:
        line = request.split(b"\r\n", 1)[0].split()
        method = line[0] if line else b""
        target = line[1].decode("latin-1").split("?", 1)[0] if len(line) > 1 else ""
        found = self._facts(target) if method in (b"GET", b"HEAD") else None
        if found is None:
            status, body = (404, {"error": "not found"}) if method in (b"GET", b"HEAD") else (
                405, {"error": "method not allowed"})  # fmt: skip
        else:
            status, body = found
        payload = json.dumps(body).encode()
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            "content-type: application/json\r\n"
            f"content-length: {len(payload)}\r\n"
            "cache-control: no-store\r\n"
            "connection: close\r\n\r\n"
        ).encode()
        return head if method == b"HEAD" else head + payload


_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
