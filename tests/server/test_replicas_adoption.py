"""Session adoption (``codemode.server.replicas``) when the shared directory is down: a
clear, retryable answer instead of an HTTP 500."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest
from mcp.server import MCPServer
from starlette.types import Receive, Scope, Send

from codemode.cluster import RayExecutor
from codemode.cluster.directory import SessionDirectory
from codemode.cluster.shared import SharedSessions
from codemode.server.replicas import UNAVAILABLE, SessionAdoption

sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
from redis_server import RedisServer

pytestmark = pytest.mark.anyio


async def never(scope: Scope, receive: Receive, send: Send) -> None:
    raise AssertionError("a request with an unknown session id went on while Redis was down")


async def test_adopting_a_session_while_redis_is_down_is_a_503_naming_the_directory() -> None:
    redis = RedisServer().start()
    redis.stop()  # the replica's Redis goes away; its address stays configured
    server = MCPServer("replica")
    server.streamable_http_app()  # the SDK builds its session manager here
    manager = server.session_manager
    directory = SessionDirectory(redis.url)
    layer = SessionAdoption(never, manager, SharedSessions(RayExecutor(), directory), "/mcp")
    headers = {"Mcp-Session-Id": "a" * 32, "Content-Type": "application/json"}
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/list"}
    try:
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=layer), base_url="http://replica"
        ) as client:
            r = await client.post("/mcp", json=call, headers=headers)
    finally:
        await directory.aclose()
    assert r.status_code == 503
    assert r.headers["retry-after"] == "5"
    error = r.json()["error"]
    assert error["code"] == UNAVAILABLE
    assert f"Redis at 127.0.0.1:{redis.port}" in error["message"]
    assert "cannot be reached" in error["message"]
