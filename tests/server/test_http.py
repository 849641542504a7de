"""``codemode serve --transport http``: auth, sessions per client, cap, expiry, shutdown."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx2
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from .conftest import HttpServer, http_client, make_workspace, serve_argv, start_http_server
from .test_stdio import CORE_TOOLS, _alive, text_of

pytestmark = pytest.mark.anyio


def test_healthz_answers_without_a_token(http_server: HttpServer) -> None:
    assert http_server.health()["status"] == "ok"


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "test-token-0123456789"])
def test_mcp_requests_without_the_right_bearer_token_are_refused(
    http_server: HttpServer, authorization: str | None
) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx2.post(http_server.url, json=body, headers=headers, timeout=10)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer") and 'error="invalid_token"' in challenge
    assert "resource_metadata" not in challenge  # no OAuth login for a client to start
    assert "access-control-allow-origin" not in response.headers


async def test_the_official_client_without_a_token_cannot_connect(
    http_server: HttpServer,
) -> None:
    with pytest.raises(Exception) as raised:
        async with http_client(http_server.url, token=None) as client:
            await client.list_tools()
    assert _leaves(raised.value, MCPError), raised.value


def _leaves(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether ``exc`` is, or its exception group holds, a ``kind``."""
    if isinstance(exc, BaseExceptionGroup):
        return any(_leaves(e, kind) for e in exc.exceptions)
    return isinstance(exc, kind) or (exc.__context__ is not None and _leaves(exc.__context__, kind))


async def test_an_http_client_runs_code_that_calls_a_real_tool(http_server: HttpServer) -> None:
    code = (
        f"names = tools.fs.list_directory(path={str(http_server.files)!r})['content']\n"
        "print(sorted(n.split()[-1] for n in names.splitlines() if n.endswith('.md')))"
    )
    async with http_client(http_server.url) as client:
        listed = {t.name for t in (await client.list_tools()).tools}
        result = await client.call_tool("run_code", {"code": code})
    assert listed >= CORE_TOOLS
    assert text_of(result) == "['todo.md']"


async def test_variables_persist_between_runs_of_one_http_client(http_server: HttpServer) -> None:
    async with http_client(http_server.url) as client:
        # A negotiating client is steered to the handshake, which gives it a session id.
        assert client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
        await client.call_tool("run_code", {"code": "seen = [1, 2]"})
        result = await client.call_tool("run_code", {"code": "seen + [3]"})
    assert result.structured_content is not None
    assert result.structured_content["value"] == [1, 2, 3]


async def test_two_http_clients_do_not_see_each_others_variables(http_server: HttpServer) -> None:
    async with http_client(http_server.url) as alice, http_client(http_server.url) as bob:
        await alice.call_tool("run_code", {"code": "secret = 'alice'"})
        await bob.call_tool("run_code", {"code": "secret = 'bob'"})
        a = await alice.call_tool("run_code", {"code": "secret"})
        b = await bob.call_tool("run_code", {"code": "secret"})
    assert (text_of(a), text_of(b)) == ("alice", "bob")


async def test_a_stateless_client_keeps_state_under_its_codemode_session_header(
    http_server: HttpServer,
) -> None:
    headers = {"Codemode-Session": "agent-7"}
    async with http_client(http_server.url, headers=headers, mode="2026-07-28") as client:
        await client.call_tool("run_code", {"code": "n = 7"})
        result = await client.call_tool("run_code", {"code": "n * 6"})
    assert text_of(result) == "42"


async def test_a_stateless_call_without_a_session_id_runs_in_a_fresh_session(
    http_server: HttpServer,
) -> None:
    async with http_client(http_server.url, mode="2026-07-28") as client:
        await client.call_tool("run_code", {"code": "lost = 1"})
        result = await client.call_tool("run_code", {"code": "lost"})
    assert result.is_error and "NameError" in text_of(result)
    assert result.structured_content is not None
    assert result.structured_content["session"] == "ephemeral"
    assert "nothing persists" in (result.structured_content["notice"] or "")


async def test_a_client_that_disconnects_has_its_session_closed(http_server: HttpServer) -> None:
    async with http_client(http_server.url) as client:
        await client.call_tool("run_code", {"code": "1"})
        during = http_server.health()["sessions"]
    http_server.wait_health("sessions", during - 1)


async def test_beyond_the_cap_and_its_queue_a_client_is_told_to_retry_later(
    tmp_path: Path,
) -> None:
    base, _ = make_workspace(tmp_path)
    argv = ("--max-sessions", "1", "--queue-size", "0", "--no-auth")
    server = start_http_server(base, *argv, token=None)
    try:
        async with http_client(server.url, token=None) as first:
            await first.call_tool("run_code", {"code": "1"})
            async with http_client(server.url, token=None) as second:
                refused = await second.call_tool("run_code", {"code": "1"})
        async with http_client(server.url, token=None) as third:
            admitted = await third.call_tool("run_code", {"code": "2"})
    finally:
        server.stop()
    assert refused.is_error
    assert "busy" in text_of(refused) and "limit of 1 concurrent sessions" in text_of(refused)
    assert refused.structured_content is not None
    retry = refused.structured_content["retry_after"]
    assert retry >= 1 and f"Retry after {retry} s" in text_of(refused)
    assert text_of(admitted) == "2"


async def test_an_idle_session_expires_and_the_next_run_says_so(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    server = start_http_server(base, "--idle-timeout", "0.5")
    try:
        async with http_client(server.url) as client:
            await client.call_tool("run_code", {"code": "x = 1"})
            server.wait_health("sessions", 0)
            result = await client.call_tool("run_code", {"code": "x"})
    finally:
        server.stop()
    assert result.is_error and "NameError" in text_of(result)
    assert "expired" in text_of(result)


async def test_sigterm_closes_sessions_and_their_workers(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    server = start_http_server(base)
    try:
        async with http_client(server.url) as client:
            result = await client.call_tool("run_code", {"code": "import os\nos.getpid()"})
            pid = int(text_of(result))
            assert _alive(pid)
            server.proc.send_signal(signal.SIGTERM)
            code = server.proc.wait(timeout=20)
    finally:
        server.stop()
    assert code == 0
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


def test_no_auth_is_refused_on_a_non_loopback_address(tmp_path: Path) -> None:
    argv = serve_argv(tmp_path / "ws", "--transport", "http", "--host", "0.0.0.0", "--no-auth")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "--no-auth is only allowed on a loopback address" in done.stderr


def test_a_generated_token_is_printed_when_none_is_set(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    server = start_http_server(base, token=None)
    try:
        printed = "".join(server.lines)
        assert "generated bearer token" in printed
        token = printed.split("generated bearer token", 1)[1].split(": ", 1)[1].split()[0]
        body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {"Accept": "application/json, text/event-stream"}
        refused = httpx2.post(server.url, json=body, headers=headers, timeout=10)
        headers["Authorization"] = f"Bearer {token}"
        allowed = httpx2.post(server.url, json=body, headers=headers, timeout=10)
    finally:
        server.stop()
    assert refused.status_code == 401
    assert allowed.status_code != 401


def test_a_default_sandbox_that_cannot_start_refuses_and_names_the_way_out(
    tmp_path: Path,
) -> None:
    env = {**os.environ, "CODEMODE_BWRAP": "/nonexistent/bwrap"}
    argv = [*serve_argv(tmp_path / "ws"), "--transport", "http", "--port", "0", "--no-auth"]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=env
    )
    assert done.returncode == 1
    assert "bubblewrap" in done.stderr and "apt-get install bubblewrap" in done.stderr
    assert "--executor subprocess" in done.stderr
