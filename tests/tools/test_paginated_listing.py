"""A server's tool listing is read to its last page, wherever codemode lists: by the
source (what the agent can call) and by the output check (which schema a result must fit).
A listing whose cursors loop is refused with a clear error, never followed forever."""

from __future__ import annotations

import sys
from pathlib import Path

import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters

from codemode.config import parse_servers
from codemode.errors import ToolError
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.sources.mcp.lenient import install_lenient_validation, schema_warnings

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"


def source(max_message_bytes: int | None = None, **env: str) -> MCPSource:
    raw: dict[str, object] = {"command": sys.executable, "args": [str(HOSTILE)], "env": env}
    if max_message_bytes is not None:
        raw["max_message_bytes"] = max_message_bytes
    config = parse_servers({"mcpServers": {"hostile": raw}}, source="test", env={})["hostile"]
    return MCPSource("hostile", config)


async def test_every_page_of_the_listing_is_read() -> None:
    src = source(HOSTILE_PAGE_SIZE="2")
    try:
        names = [t.name for t in await src.list_tools()]
    finally:
        await src.aclose()
    assert names[-1] == "bad_out"
    assert len(names) == len(set(names)) > 2


async def test_a_result_is_checked_against_a_schema_listed_on_a_later_page() -> None:
    src = source(HOSTILE_PAGE_SIZE="2")
    try:
        result = await src.call_tool("bad_out", {})
    finally:
        await src.aclose()
    assert result.structured == {"n": "x"}
    assert any("Invalid structured content returned by tool bad_out" in w for w in result.warnings)


async def test_a_listing_whose_cursor_loops_is_refused() -> None:
    src = source(HOSTILE_CURSOR_LOOP="1")
    try:
        with pytest.raises(ToolError, match="returned the cursor '1' twice"):
            await src.list_tools()
    finally:
        await src.aclose()


async def test_the_output_check_says_why_when_the_listing_loops() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=[str(HOSTILE)], env={"HOSTILE_CURSOR_LOOP": "1"}
    )
    schemas: dict[str, object] = {}
    async with Client(params) as client:
        install_lenient_validation(client.session, schemas)
        with schema_warnings() as sink:
            result: mt.CallToolResult = await client.call_tool("bad_out", {})
    assert result.structured_content == {"n": "x"}
    assert any("pagination loops" in w for w in sink), sink


async def test_a_listing_that_pages_past_the_message_limit_is_refused() -> None:
    """Each page of ~55 KB is within the 256 KB limit; the listing as a whole is not."""
    src = source(max_message_bytes=256 * 1024, HOSTILE_ENDLESS="50")
    try:
        with pytest.raises(ToolError, match=r"passed 262,144 bytes over \d pages"):
            await src.list_tools()
    finally:
        await src.aclose()


async def test_a_listing_of_more_tools_than_one_server_may_have_is_refused() -> None:
    src = source(HOSTILE_ENDLESS="10000", HOSTILE_ENDLESS_DESC="0")  # ~0.6 MB a page
    try:
        with pytest.raises(ToolError, match="more than 50,000 tools"):
            await src.list_tools()
    finally:
        await src.aclose()


async def test_the_output_check_holds_the_listing_to_the_message_limit() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=[str(HOSTILE)], env={"HOSTILE_ENDLESS": "50"}
    )
    schemas: dict[str, object] = {}
    async with Client(params) as client:
        install_lenient_validation(client.session, schemas, max_bytes=256 * 1024)
        with schema_warnings() as sink:
            await client.call_tool("bad_out", {})
    assert any("more than max_message_bytes" in w for w in sink), sink
