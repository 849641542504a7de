"""One message from an upstream server larger than its ``max_message_bytes`` fails the
call with that reason and restarts the server (stdio) or reconnects (HTTP); it is never
buffered whole on the host."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from codemode.config import parse_servers
from codemode.errors import ServerUnavailable, ToolError
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.sources.mcp.stdio import LineSplitter, MessageTooLarge
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"
MIB = 1 << 20


def workspace(tmp_path: Path, **settings: Any) -> Path:
    server = {"command": sys.executable, "args": [str(HOSTILE)], **settings}
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": {"hostile": server}}))
    return tmp_path


async def test_a_message_over_the_ceiling_fails_the_call_and_the_server_restarts(
    tmp_path: Path,
) -> None:
    async with Workspace.open(workspace(tmp_path, max_message_bytes=MIB)).registry() as reg:
        with pytest.raises(ServerUnavailable, match="larger than the 1,048,576-byte limit"):
            await reg.call("hostile", "flood", {"mib": 4})
        assert await reg.call("hostile", "tree", {"n": 1}) == "ok"


async def test_a_line_that_never_ends_is_given_up_at_the_ceiling(tmp_path: Path) -> None:
    # 512 MiB without a newline: buffered whole (as the SDK's reader does), it would take
    # the host minutes and half a GiB; cut at the ceiling, it fails at once.
    async with Workspace.open(workspace(tmp_path, max_message_bytes=MIB)).registry() as reg:
        with pytest.raises(ServerUnavailable, match="larger than the 1,048,576-byte limit"):
            await reg.call("hostile", "endless", {"mib": 512}, timeout=60)
        assert await reg.call("hostile", "tree", {"n": 1}) == "ok"


async def test_large_messages_under_the_default_ceiling_pass(tmp_path: Path) -> None:
    async with Workspace.open(workspace(tmp_path)).registry() as reg:
        assert len(await reg.call("hostile", "flood", {"mib": 4})) == 4 * MIB


def test_lines_are_split_across_chunks_and_measured_before_they_end() -> None:
    split = LineSplitter(10)
    assert list(split.feed(b'{"a"')) == []
    assert list(split.feed(b':1}\n{}\n{"b"')) == [b'{"a":1}', b"{}"]
    with pytest.raises(MessageTooLarge):
        list(split.feed(b":" * 8))  # 12 bytes and still no newline


@pytest.mark.parametrize("answers", ["event stream", "JSON body"])
async def test_an_http_answer_over_the_ceiling_fails_the_call_and_reconnects(
    answers: str, edge_http_url: str, edge_json_url: str
) -> None:
    # The handshake protocol makes the server answer calls with an event stream.
    url = edge_http_url if answers == "event stream" else edge_json_url
    raw = {"type": "http", "url": url, "max_message_bytes": MIB, "protocol": "legacy"}
    src = MCPSource(
        "edge", parse_servers({"mcpServers": {"edge": raw}}, source="t", env={})["edge"]
    )
    try:
        with pytest.raises(ToolError, match=r"1,?048,?576.byte limit"):
            await src.call_tool("huge", {"size": 2 * MIB})
        assert (await src.call_tool("echo", {"text": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
        result = await src.call_tool("huge", {"size": MIB // 4})  # sent twice: text, structured
        assert not result.is_error
    finally:
        await src.aclose()
