"""The reply layer: every codemode serve reply passes the net (in-process MCP client)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from codemode.execution import InProcessExecutor
from codemode.server.app import build_server
from codemode.server.sessions import SessionManager
from codemode.server.toolset import Call, Reply, ServerContext, Toolset
from codemode.session import Session
from codemode.workspace import Workspace

pytestmark = pytest.mark.anyio


@pytest.fixture
async def context(tmp_path: Path) -> AsyncIterator[ServerContext]:
    base = tmp_path / "ws"
    base.mkdir()
    (base / "config.json").write_text(json.dumps({"privacy": True}))
    executor = InProcessExecutor()

    async def factory(key: str | None) -> Session:
        session = Session(executor)
        await session.start()
        return session

    ctx = ServerContext(SessionManager(factory), workspace=Workspace.open(base))
    yield ctx
    await ctx.sessions.aclose()


def leaky_tools() -> Toolset:
    ts = Toolset()

    @ts.tool(description="A reply with personal data in its text and data.")
    async def profile(call: Call) -> Reply:
        return Reply("alice@example.com, +44 20 7946 0958", {"email": "alice@example.com"})

    @ts.tool(description="Plain text.")
    async def note(call: Call) -> str:
        return "card 4111 1111 1111 1111"

    @ts.tool(description="Fails quoting an address.")
    async def broken(call: Call) -> str:
        from codemode.errors import NotFound

        raise NotFound("no account for bob@example.org")

    return ts


async def test_every_kind_of_reply_is_tokenized_even_with_core_tools_only(
    context: ServerContext,
) -> None:
    server = build_server(context, toolset=leaky_tools(), capability_tools=False)
    async with Client(server) as client:
        replies = [await client.call_tool(name, {}) for name in ("profile", "note", "broken")]
    sent = json.dumps([r.model_dump(mode="json") for r in replies])
    for value in ("alice@example.com", "7946 0958", "4111 1111", "bob@example.org"):
        assert value not in sent
    assert "[EMAIL_" in sent and "[CREDIT_CARD_" in sent and replies[2].is_error
