"""Connections of a real ``codemode serve --transport http`` are bounded before auth: a
slow head is cut, and one address cannot hold every connection (slowloris)."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest
from serve_process import INITIALIZE

from .conftest import TOKEN, HttpServer, http_client, start_http_server

HEAD = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    base = tmp_path_factory.mktemp("guarded")
    limits = {
        "CODEMODE_HTTP_HEADER_TIMEOUT": "1.5",
        "CODEMODE_HTTP_MAX_CONNECTIONS": "60",
        "CODEMODE_HTTP_MAX_PER_CLIENT": "20",
    }
    server = start_http_server(base, env=limits)
    try:
        yield server
    finally:
        server.stop()


def _address(server: HttpServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _slow(server: HttpServer, source: str = "127.0.0.1") -> socket.socket:
    """A connection that sent the start of a head and will never finish it."""
    sock = socket.create_connection(_address(server), timeout=10, source_address=(source, 0))
    sock.sendall(HEAD)
    return sock


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    sock.settimeout(seconds)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_a_head_that_never_ends_is_cut_at_the_header_timeout(guarded: HttpServer) -> None:
    with _slow(guarded) as sock:
        began = time.monotonic()
        for _ in range(3):  # a byte now and then does not extend the deadline
            time.sleep(0.3)
            sock.sendall(b"X-Slow: 1\r\n")
        assert _closed_within(sock, 10)
        assert time.monotonic() - began < 8


def test_one_address_cannot_hold_every_connection(guarded: HttpServer) -> None:
    held = [_slow(guarded) for _ in range(30)]
    try:
        cut = sum(_closed_within(s, 0.5) for s in held[:10])
        assert cut == 10  # beyond the per-address cap, its longest idle ones made room
        # another address (127.0.0.2 is loopback too) is still served
        with socket.create_connection(
            _address(guarded), timeout=10, source_address=("127.0.0.2", 0)
        ) as other:
            other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            other.settimeout(10)
            assert other.recv(64).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()


def test_idle_connections_at_the_per_address_cap_do_not_keep_that_address_out(
    guarded: HttpServer,
) -> None:
    held = [_slow(guarded) for _ in range(20)]  # this address's cap, none with a request
    try:
        assert httpx2.get(guarded.health_url, timeout=10).status_code == 200
        assert _closed_within(held[0], 5)  # the longest idle one made room
    finally:
        for s in held:
            s.close()


def test_at_the_total_cap_a_new_client_takes_the_place_of_the_longest_idle(
    guarded: HttpServer,
) -> None:
    held = [_slow(guarded, f"127.0.0.{n}") for n in (1, 2, 3) for _ in range(20)]  # 60: full
    try:
        with socket.create_connection(
            _address(guarded), timeout=10, source_address=("127.0.0.4", 0)
        ) as other:
            other.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            other.settimeout(10)
            assert other.recv(64).startswith(b"HTTP/1.1 200")
        assert _closed_within(held[0], 5)  # the oldest one made room
    finally:
        for s in held:
            s.close()


def test_connections_are_served_again_once_the_slow_ones_are_cut(guarded: HttpServer) -> None:
    held = [_slow(guarded) for _ in range(20)]
    try:
        assert all(_closed_within(s, 10) for s in held)
        assert httpx2.get(guarded.health_url, timeout=10).status_code == 200
    finally:
        for s in held:
            s.close()


@pytest.mark.anyio
async def test_a_call_longer_than_the_header_timeout_is_not_cut(
    guarded: HttpServer, tmp_path: Path
) -> None:
    async with http_client(guarded.url, token=TOKEN) as client:
        result = await client.call_tool(
            "run_code", {"code": "import time\ntime.sleep(3)\nprint('done')"}
        )
        assert not result.is_error
        assert "done" in result.content[0].text  # type: ignore[union-attr]
        again = await client.call_tool("run_code", {"code": "print(6 * 7)"})
        assert "42" in again.content[0].text  # type: ignore[union-attr]


def test_mcp_session_ids_are_capped_and_an_ended_one_frees_a_place(tmp_path: Path) -> None:
    server = start_http_server(tmp_path, env={"CODEMODE_HTTP_MAX_MCP_SESSIONS": "5"})
    headers = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    try:
        with httpx2.Client(headers=headers, timeout=30) as http:
            answers = [http.post(server.url, json=INITIALIZE) for _ in range(7)]
            assert [a.status_code for a in answers] == [200] * 5 + [503] * 2
            sid = answers[0].headers["mcp-session-id"]
            assert http.delete(server.url, headers={"mcp-session-id": sid}).status_code == 200
            assert http.post(server.url, json=INITIALIZE).status_code == 200
    finally:
        server.stop()
