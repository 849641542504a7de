"""An upstream server's tools change while codemode is connected: the listing follows.

On the 2025 protocols the server sends ``notifications/tools/list_changed``; on the stateless
2026-07-28 protocol such notices come only on a ``subscriptions/listen`` stream, which
codemode did not open: a tool added upstream stayed unknown to ``list``/``search`` until a
call named it. Each connection now listens, and both feed the same coalesced re-listing.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode.config import parse_servers
from codemode.tools.registry import ToolRegistry
from codemode.tools.sources.mcp import MCPSource

pytestmark = pytest.mark.anyio

EDGE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"
WAIT = 15.0


def edge(protocol: str) -> tuple[ToolRegistry, MCPSource]:
    raw = {
        "command": sys.executable,
        "args": [str(EDGE)],
        "env": {"EDGE_GROW": "1"},
        "protocol": protocol,
    }
    config = parse_servers({"mcpServers": {"edge": raw}}, source="test", env={})["edge"]
    source = MCPSource("edge", config)
    return ToolRegistry([source]), source


async def names(reg: ToolRegistry) -> set[str]:
    return {str(r["name"]) for r in await reg.list()}


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
async def test_a_tool_added_upstream_is_listed_without_a_call_naming_it(protocol: str) -> None:
    reg, source = edge(protocol)
    async with reg:
        assert "edge.late" not in await names(reg)
        conn, client = await source._client()
        assert (client.protocol_version >= "2026") == (protocol == "modern")
        assert await reg.call("edge", "grow", {"name": "late"}) == "added late"
        start = time.monotonic()
        while "edge.late" not in await names(reg):
            assert time.monotonic() - start < WAIT, "the new tool was never listed"
            await anyio.sleep(0.1)
        assert await reg.call("edge", "late", {}) == "late"
    assert conn.dead  # the listen task ended with its connection


async def test_over_http_the_listen_stream_brings_the_change_too(
    monkeypatch: pytest.MonkeyPatch, edge_http_process: Any
) -> None:
    edge_http_process.stop()  # started again with ``grow``
    monkeypatch.setenv("EDGE_GROW", "1")
    server = edge_http_process.start()
    try:
        raw = {"url": server.url, "protocol": "modern"}
        config = parse_servers({"mcpServers": {"edge": raw}}, source="test", env={})["edge"]
        async with ToolRegistry([MCPSource("edge", config)]) as reg:
            assert "edge.late" not in await names(reg)
            assert await reg.call("edge", "grow", {"name": "late"}) == "added late"
            start = time.monotonic()
            while "edge.late" not in await names(reg):
                assert time.monotonic() - start < WAIT, "the new tool was never listed"
                await anyio.sleep(0.1)
    finally:
        server.stop()
