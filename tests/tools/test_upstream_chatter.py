"""A misbehaving upstream server: notices of changed tools in a loop, one name listed twice.

A server that sent ``notifications/tools/list_changed`` without end made every call re-list
its tools (twice: the registry and the output check); now the notices are coalesced, at
most one re-listing per ``RELIST_GAP``. A name listed twice silently took the later tool's
schema; now the first is kept and the caller is told.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

import anyio
import pytest

from codemode.config import parse_servers
from codemode.errors import ToolArgumentError
from codemode.tools.registry import ToolRegistry
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.sources.mcp.source import RELIST_GAP

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"


def chatty() -> ToolRegistry:
    """The hostile server over the 2025-11-25 handshake: it sends classic notices (the
    stateless protocol delivers them on ``subscriptions/listen``, which it does not serve)."""
    raw = {
        "command": sys.executable,
        "args": [str(HOSTILE)],
        "env": {"HOSTILE_CHATTY": "1"},
        "protocol": "legacy",
    }
    config = parse_servers({"mcpServers": {"hostile": raw}}, source="test", env={})["hostile"]
    return ToolRegistry([MCPSource("hostile", config)])


async def listings(reg: ToolRegistry) -> int:
    return int(await reg.call("hostile", "listings", {}))


async def test_a_flood_of_list_changed_notices_costs_one_listing_per_gap(
    caplog: pytest.LogCaptureFixture,
) -> None:
    seconds = 3 * RELIST_GAP
    async with chatty() as reg:
        before = await listings(reg)
        with caplog.at_level(logging.WARNING):
            await reg.call("hostile", "chatter", {"n": 200, "seconds": seconds})
            calls, start = 0, time.monotonic()
            while time.monotonic() - start < seconds:
                assert await reg.call("hostile", "redos_in", {}) == "ok"
                calls += 1
                await anyio.sleep(0.01)
        during = await listings(reg) - before
    # each gap: one listing by the registry and one by the output check, at most
    assert calls > 50 and during <= 2 * (seconds / RELIST_GAP + 2), (calls, during)
    assert any("notifications/tools/list_changed" in r.getMessage() for r in caplog.records)


async def test_a_notice_after_a_quiet_spell_is_followed_at_once() -> None:
    async with chatty() as reg:
        await reg.list()
        await anyio.sleep(RELIST_GAP)
        before = await listings(reg)
        await reg.call("hostile", "chatter", {"n": 1})
        await anyio.sleep(0.2)  # the notice arrives after the answer
        await reg.list()
        assert await listings(reg) > before


async def test_a_name_listed_twice_keeps_the_first_and_says_so() -> None:
    async with chatty() as reg:
        rows = [r["name"] for r in await reg.list()]
        assert rows.count("hostile.tree") == 1 and "hostile.tree_2" not in rows
        warned = [w for w in reg.warnings if "lists 2 tools named 'tree'" in w]
        assert warned, reg.warnings
        with pytest.raises(ToolArgumentError, match="argument 'n': expected integer"):
            await reg.call("hostile", "tree", {"n": "two"})  # the first one's schema
        again = [r["name"] for r in await reg.list()]
    assert again == rows
