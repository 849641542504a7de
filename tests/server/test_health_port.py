"""The health port (``--health-port``): answered by a process of its own, off the loop.

Real processes: a ``codemode serve`` with the flag, and a server built the same way
(``build_http_app(health=...)``) with one tool that blocks its event loop, so the test
knows the loop cannot answer while the health port must.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

from .conftest import http_client, start_http_server

pytestmark = pytest.mark.anyio

BLOCKING_SERVER = """
import sys, time
import anyio
from codemode.server.custom import create_server
from codemode.server.http import bind_socket, build_http_app, serve_http

async def block(seconds: float) -> str:
    "Hold the event loop (a blocking call where an await belonged)."
    time.sleep(seconds)
    return "unblocked"

async def main() -> None:
    server = create_server({"executor": "subprocess"}, base=sys.argv[1], custom_tools=[block])
    sock, health = bind_socket("127.0.0.1", 0), bind_socket("127.0.0.1", 0)
    ports = sock.getsockname()[1], health.getsockname()[1]
    app = build_http_app(server.mcp, server.context, token=None, health=health,
                         stall_after=float(sys.argv[2]),
                         on_ready=lambda: print("ports %d %d" % ports, flush=True))
    await serve_http(app, sock)

anyio.run(main)
"""


def _get(url: str) -> tuple[int, dict[str, Any]]:
    response = httpx2.get(url, timeout=30)
    return response.status_code, response.json()


@pytest.fixture
def blocking_server(tmp_path: Path) -> Any:
    script = tmp_path / "server.py"
    script.write_text(BLOCKING_SERVER)
    (tmp_path / "ws").mkdir()
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "ws"), "1.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.match(r"ports (\d+) (\d+)", line)
    if m is None:
        proc.kill()
        raise AssertionError(f"the server did not start: {line}{proc.communicate()[1][-2000:]}")
    try:
        yield int(m.group(1)), int(m.group(2))
    finally:
        proc.terminate()
        proc.communicate(timeout=60)  # waits, and closes the pipes


async def test_the_health_port_answers_while_the_event_loop_is_blocked_and_says_it_stalled(
    blocking_server: tuple[int, int],
) -> None:
    port, health_port = blocking_server
    health = f"http://127.0.0.1:{health_port}/healthz"
    assert _get(health)[0] == 200
    done = threading.Event()
    answers: list[tuple[int, dict[str, Any]]] = []

    def poll() -> None:
        while not done.is_set():
            answers.append(_get(health))
            time.sleep(0.05)

    async with http_client(f"http://127.0.0.1:{port}/mcp", token=None) as client:
        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        try:
            result = await client.call_tool("block", {"seconds": 4})
        finally:
            done.set()
            poller.join(timeout=30)
    assert "unblocked" in result.content[0].text  # type: ignore[union-attr]
    stalled = [body for status, body in answers if status == 503]
    assert stalled, f"the health port never said the loop stalled: {answers}"
    assert stalled[0]["status"] == "stalled" and stalled[0]["loop_lag_ms"] > 1000
    status, body = _get(health)  # the loop runs again: alive again
    assert (status, body["status"]) == (200, "ok")


async def test_serve_answers_health_and_readiness_on_its_health_port(tmp_path: Path) -> None:
    server = start_http_server(None, "--base", str(tmp_path / "ws"), "--health-port", "0")
    try:
        line = next(x for x in server.lines if "serving MCP on" in x)
        m = re.search(r"health on (\S+)/healthz", line)
        assert m is not None, line
        status, body = _get(m.group(1) + "/healthz")
        assert status == 200
        assert {
            "status": "ok",
            "sessions": 0,
            "calls": 0,
            "stopping": False,
        }.items() <= body.items()
        assert _get(m.group(1) + "/readyz")[1]["status"] == "ready"
        assert httpx2.get(m.group(1) + "/mcp", timeout=30).status_code == 404
        async with http_client(server.url) as client:
            await client.call_tool("run_code", {"code": "1"})
            deadline = time.monotonic() + 10  # the port's page is a heartbeat (0.1 s) old
            while _get(m.group(1) + "/healthz")[1]["sessions"] != 1:
                assert time.monotonic() < deadline, "the health port never saw the session"
                time.sleep(0.05)
    finally:
        assert server.stop() == 0


def test_health_port_needs_http(tmp_path: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "codemode",
        "serve",
        "--base",
        str(tmp_path),
        "--health-port",
        "0",
    ]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--health-port needs --transport http" in r.stderr


def test_connections_that_never_send_a_request_cannot_keep_probes_out(tmp_path: Path) -> None:
    import socket

    server = start_http_server(None, "--base", str(tmp_path / "ws"), "--health-port", "0")
    held: list[socket.socket] = []
    try:
        line = next(x for x in server.lines if "serving MCP on" in x)
        m = re.search(r"health on http://127.0.0.1:(\d+)/healthz", line)
        assert m is not None, line
        port = int(m.group(1))
        for _ in range(100):  # more than the port's 64 waiting places, none finished
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            sock.sendall(b"GET /healthz HTTP/1.1\r\n")
            held.append(sock)
        for _ in range(3):  # a probe still gets its answer, again and again
            assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    finally:
        for sock in held:
            sock.close()
        assert server.stop() == 0


def test_a_connection_dropped_for_a_newcomer_and_readable_in_the_same_wake_is_skipped() -> None:
    """At the cap, accepting a newcomer drops the oldest connection; when that one had
    sent bytes in the same wake of the selector, its event must be skipped (it was
    looked up after its drop, and the KeyError ended the process: every probe failed)."""
    import os
    import signal
    import socket

    from codemode.server.health import HealthPort
    from codemode.server.health_child import MAX_CONNECTIONS

    sock = socket.create_server(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    facts = {"/healthz": (200, {"status": "ok"})}
    health = HealthPort(sock, facts.get, ("/healthz",))
    health.start()
    assert health._child is not None
    pid = health._child.pid
    fds = Path(f"/proc/{pid}/fd")
    held: list[socket.socket] = []
    try:
        assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200  # started and serving
        idle = _settled_count(fds)  # the probe's own connection closed (on a busy machine, later)
        for _ in range(MAX_CONNECTIONS):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
        deadline = time.monotonic() + 30
        while len(list(fds.iterdir())) < idle + MAX_CONNECTIONS:  # every one accepted
            assert time.monotonic() < deadline, "the health process did not accept them"
            time.sleep(0.01)
        os.kill(pid, signal.SIGSTOP)  # both events below reach it in one wake
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=10))
            held[0].sendall(b"GET /healthz HTTP/1.1\r\n")  # the oldest, dropped for it
        finally:
            os.kill(pid, signal.SIGCONT)
        for _ in range(3):
            assert _get(f"http://127.0.0.1:{port}/healthz")[0] == 200
        assert health._child.poll() is None
    finally:
        for s in held:
            s.close()
        health.close()


def _settled_count(fds: Path) -> int:
    """How many descriptors the process holds once the count stops changing (0.3 s)."""
    last, same, deadline = -1, 0, time.monotonic() + 30
    while same < 6 and time.monotonic() < deadline:
        count = len(list(fds.iterdir()))
        same = same + 1 if count == last else 0
        last = count
        time.sleep(0.05)
    return last
