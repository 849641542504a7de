"""The health port's process: answers ``/healthz`` and ``/readyz`` from shared memory.

Run by path (``python -I -S health_child.py SOCK_FD MEM_FD STALL_AFTER PARENT_PID``),
standard library only: it must start fast and share nothing with the server but a page
of memory, so neither the server's event loop nor its GIL can delay an answer.

The server writes the page every heartbeat (:mod:`codemode.server.health`): a sequence
number (odd while it writes), the time of the tick (``CLOCK_MONOTONIC``, the same in
every process) and the two answers as JSON. The process adds how late the loop is, and
answers ``503 "stalled"`` once it is later than ``STALL_AFTER`` seconds. It exits when its
parent is gone. A request must arrive within ``REQUEST_TIMEOUT``; beyond ``MAX_CONNECTIONS``
waiting connections, the oldest is dropped.
"""

from __future__ import annotations

import json
import mmap
import os
import selectors
import socket
import struct
import sys
import time

HEAD = struct.Struct("<QdI")
"""Sequence number, tick time, length of the JSON that follows."""
SIZE = 1 << 16
HEARTBEAT = 0.1
MAX_CONNECTIONS = 64
REQUEST_TIMEOUT = 5.0
MAX_REQUEST = 8192
REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def read(page: mmap.mmap) -> tuple[float, dict[str, list[object]]]:
    """The last tick's time and answers (retries while the server writes)."""
    for _ in range(1000):
        seq, tick, size = HEAD.unpack_from(page, 0)
        if seq % 2 == 0 and size:
            data = bytes(page[HEAD.size : HEAD.size + size])
            if HEAD.unpack_from(page, 0)[0] == seq:
                return tick, json.loads(data)
        time.sleep(0.0001)
    return 0.0, {}


def answer(request: bytes, page: mmap.mmap, stall_after: float) -> bytes:
    line = request.split(b"\r\n", 1)[0].split()
    method = line[0] if line else b""
    target = line[1].decode("latin-1").split("?", 1)[0] if len(line) > 1 else ""
    status: int = 404
    body: dict[str, object] = {"error": "not found"}
    if method not in (b"GET", b"HEAD"):
        status, body = 405, {"error": "method not allowed"}
    else:
        tick, answers = read(page)
        found = answers.get(target)
        if found is not None:
            code, data = found
            assert isinstance(code, int) and isinstance(data, dict)
            status, body = code, dict(data)
            lag = max(0.0, time.monotonic() - tick - HEARTBEAT)
            body["loop_lag_ms"] = round(lag * 1000, 1)
            if lag > stall_after:
                status, body["status"] = 503, "stalled"
    payload = json.dumps(body).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Error')}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(payload)}\r\n"
        "cache-control: no-store\r\n"
        "connection: close\r\n\r\n"
    ).encode()
    return head if method == b"HEAD" else head + payload


def serve(sock: socket.socket, page: mmap.mmap, stall_after: float, parent: int) -> None:
    sock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    pending: dict[socket.socket, tuple[bytearray, float]] = {}

    def drop(conn: socket.socket, reply: bytes | None = None) -> None:
        sel.unregister(conn)
        del pending[conn]
        try:
            if reply:
                conn.settimeout(1.0)  # an answer is < 1 KB: the socket buffer takes it
                conn.sendall(reply)
        except OSError:
            pass
        finally:
            conn.close()

    while os.getppid() == parent:
        for key, _ in sel.select(timeout=1.0):
            if key.fileobj is sock:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    continue
                if len(pending) >= MAX_CONNECTIONS:
                    # The oldest goes, not the newcomer: a probe sends its request at once
                    # and is answered within ms, so connections that hold a place without
                    # finishing one (slowloris, no token needed) cannot keep probes out.
                    drop(min(pending, key=lambda c: pending[c][1]))
                conn.setblocking(False)
                sel.register(conn, selectors.EVENT_READ)
                pending[conn] = (bytearray(), time.monotonic())
                continue
            conn = key.fileobj  # type: ignore[assignment]
            if conn not in pending:  # dropped for a newcomer earlier in this same wake
                continue
            buf = pending[conn][0]
            try:
                data = conn.recv(MAX_REQUEST)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            buf += data
            if data and b"\r\n\r\n" not in buf and len(buf) < MAX_REQUEST:
                continue
            drop(conn, answer(bytes(buf), page, stall_after) if data else None)
        now = time.monotonic()
        for conn in [c for c, (_, since) in pending.items() if now - since > REQUEST_TIMEOUT]:
            drop(conn)


def main(argv: list[str]) -> None:
    sock_fd, mem_fd, stall_after, parent = int(argv[0]), int(argv[1]), float(argv[2]), int(argv[3])
    sock = socket.socket(fileno=sock_fd)
    page = mmap.mmap(mem_fd, SIZE, prot=mmap.PROT_READ)
    serve(sock, page, stall_after, parent)


if __name__ == "__main__":
    main(sys.argv[1:])
