"""Closing a source whose stdio server ignores both the end of its stdin and SIGTERM: the
closer's own cancellation is never swallowed, and the server is stopped all the same.

Before, the closer's wait was the stop: a closer cancelled in the first wait left the
server to the SDK's escalation alone, one cancelled in the last-resort wait returned as if
the stop had ended (``suppress(CancelledError)``), and the last resort itself cancelled
the owner task natively, which cut that escalation short: the server lived on."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from pathlib import Path

import pytest
from mcp.client import stdio as sdk_stdio
from procs import processes_with

from codemode.config import parse_servers
from codemode.tools.sources.mcp import MCPSource, connection

EDGE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"

pytestmark = pytest.mark.anyio


def _stubborn(marker: str) -> MCPSource:
    """The edge server, made to ignore SIGTERM and to linger after its stdin ends."""
    edge = str(EDGE_SERVER)
    code = (
        "import runpy, signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        f"sys.argv = [{edge!r}]; runpy.run_path({edge!r}, run_name='__main__'); "
        "time.sleep(120)"
    )
    # No jail: it would hide the edge server's file (the jail is tested in tests/security).
    raw = {"command": sys.executable, "args": ["-c", code, marker], "isolation": "none"}
    config = parse_servers({"mcpServers": {"s": raw}}, source="test", env={})["s"]
    return MCPSource("s", config)


async def test_a_closer_cancelled_while_a_stubborn_server_stops_is_cancelled_and_the_server_dies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The SDK's own escalation (SIGTERM, then SIGKILL) waits 60 s here, as a slow
    # shutdown would: only the connection's last resort can stop the server in time.
    monkeypatch.setattr(sdk_stdio, "PROCESS_TERMINATION_TIMEOUT", 60.0)
    monkeypatch.setattr(connection, "_STOP_WAIT", 0.5)
    marker = f"codemode-stubborn-{uuid.uuid4().hex}"
    source = _stubborn(marker)
    try:
        assert await source.list_tools()
        assert processes_with(marker)
        closer = asyncio.create_task(source.aclose())
        await asyncio.sleep(0.2)  # the closer waits for the stop
        assert not closer.done(), "the server stopped at once"
        closer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await closer
        deadline = time.monotonic() + 10
        while processes_with(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not processes_with(marker), "the server outlived its source's close"
    finally:
        monkeypatch.undo()
        await source.aclose()
