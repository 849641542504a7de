"""One message from an upstream server larger than its ``max_message_bytes`` fails the
call with that reason and restarts the server (stdio) or reconnects (HTTP); it is never
buffered whole on the host."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
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


def _answering(body: bytes, coding: str) -> Any:
    import httpx2

    seen: list[str] = []

    async def chunks() -> AsyncIterator[bytes]:  # streamed, as from a socket
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("accept-encoding", ""))
        headers = {"content-type": "application/json", "content-encoding": coding}
        return httpx2.Response(200, headers=headers, content=chunks())

    return httpx2.MockTransport(handler), seen


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_a_compressed_answer_is_measured_as_it_inflates(coding: str) -> None:
    """A few KB of gzip inflate to GBs: the ceiling is on what would be parsed, and the
    inflating stops there (before, the compressed size was measured and httpx inflated
    the whole body in memory)."""
    import zlib

    from codemode.tools.sources.mcp.capped import BodyTooLarge, MessageCap

    wbits = 16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS
    squeeze = zlib.compressobj(9, zlib.DEFLATED, wbits)
    bomb = squeeze.compress(b" " * (64 * MIB)) + squeeze.flush()
    assert len(bomb) < MIB // 8
    transport, seen = _answering(bomb, coding)
    async with MessageCap(MIB).client(transport=transport) as http:
        with pytest.raises(BodyTooLarge):
            await (await http.get("http://upstream/mcp")).aread()
        small = json.dumps({"jsonrpc": "2.0", "id": 1, "result": {}}).encode()
        squeeze = zlib.compressobj(9, zlib.DEFLATED, wbits)
        transport, seen = _answering(squeeze.compress(small) + squeeze.flush(), coding)
    async with MessageCap(len(small)).client(transport=transport) as http:
        assert await (await http.get("http://upstream/mcp")).aread() == small  # at the cap
    assert seen == ["gzip, deflate"]


async def test_an_answer_in_a_coding_not_offered_is_refused() -> None:

    from codemode.tools.sources.mcp.capped import BodyUnreadable, MessageCap

    transport, _ = _answering(b"\x28\xb5\x2f\xfd...", "zstd")
    async with MessageCap(MIB).client(transport=transport) as http:
        with pytest.raises(BodyUnreadable, match="zstd"):
            await http.get("http://upstream/mcp")


async def test_the_capped_client_still_goes_through_the_environments_proxy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Upstream servers behind a proxy (``HTTP_PROXY``) are reached through it: a client
    given a transport of its own (the first form of the cap) ignored the environment."""
    import socket
    import threading

    from codemode.tools.sources.mcp.capped import MessageCap

    proxy = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    def answer() -> None:
        conn, _ = proxy.accept()
        with conn:
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            seen.append(head.split(b"\r\n", 1)[0])
            conn.sendall(
                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            )

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.getsockname()[1]}")
    try:
        async with MessageCap(MIB).client(timeout=10) as http:
            response = await http.post("http://upstream.invalid/mcp", json={})
        assert response.status_code == 502
        thread.join(10)
        assert seen == [b"POST http://upstream.invalid/mcp HTTP/1.1"]
    finally:
        proxy.close()
