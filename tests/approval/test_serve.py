"""Approval on ``codemode serve``: the official MCP client's elicitation callback approves,
refuses, answers too late or never, on both protocol eras (a mid-call request on the
handshake protocol, an ``InputRequiredResult`` round on 2026-07-28)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as mt
import pytest
from mcp import Client, StdioServerParameters

pytestmark = pytest.mark.anyio

MODES = ["auto", "legacy"]  # auto negotiates 2026-07-28 over stdio
CODE = """
try:
    out = tools.notes.delete_note(name="hello")
except ToolDenied as e:
    out = "DENIED: " + str(e)
print(out)
"""
Callback = Callable[[Any, mt.ElicitRequestParams], Awaitable[mt.ElicitResult]]


def answer(**content: Any) -> Callback:
    async def callback(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        asked.append(params)
        return mt.ElicitResult(action="accept", content=content)

    asked: list[mt.ElicitRequestParams] = []
    callback.asked = asked  # type: ignore[attr-defined]
    return callback


@asynccontextmanager
async def serve(base: Path, mode: str, callback: Callback | None) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "--base", str(base), "--executor", "subprocess"],
        env=dict(os.environ),
    )
    async with Client(
        params, mode=mode, elicitation_callback=callback, read_timeout_seconds=120
    ) as client:
        yield client


async def run(client: Client, code: str = CODE) -> str:
    result = await client.call_tool("run_code", {"code": code})
    block = result.content[0]
    assert isinstance(block, mt.TextContent)
    return block.text


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_approves_lets_the_call_run(notes_ws: Any, mode: str) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    callback = answer(confirm=True)
    async with serve(notes_ws.base, mode, callback) as client:
        out = await run(client)
    assert out.strip() == "deleted"
    [asked] = callback.asked  # type: ignore[attr-defined]
    assert 'notes.delete_note(name="hello")' in asked.message
    assert asked.requested_schema["properties"]["confirm"]["type"] == "boolean"
    assert notes_ws.calls() == ["delete_note"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_answers_no_or_declines_refuses_the_call(
    notes_ws: Any, mode: str
) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})

    async def decline(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        return mt.ElicitResult(action="decline")

    async with serve(notes_ws.base, mode, answer(confirm=False)) as client:
        said_no = await run(client)
    async with serve(notes_ws.base, mode, decline) as client:
        declined = await run(client)
    assert "DENIED: notes.delete_note: not approved: you answered no" in said_no
    assert "not approved: you declined it in your MCP client" in declined
    assert notes_ws.calls() == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_remembered_yes_is_asked_once_per_session(notes_ws: Any, mode: str) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    callback = answer(confirm=True, remember=True)
    code = "for n in ('a', 'b', 'c'):\n    tools.notes.delete_note(name=n)\nprint('done')"
    async with serve(notes_ws.base, mode, callback) as client:
        assert (await run(client, code)).strip() == "done"
        assert (await run(client, code)).strip() == "done"
    assert len(callback.asked) == 1  # type: ignore[attr-defined]
    assert notes_ws.calls() == ["delete_note"] * 6


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_that_answers_too_late_is_refused_after_the_approval_timeout(
    notes_ws: Any, mode: str
) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}, "approval": {"timeout": 1}})

    async def late(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        await anyio.sleep(4)
        return mt.ElicitResult(action="accept", content={"confirm": True})

    async with serve(notes_ws.base, mode, late) as client:
        out = await run(client)
        after = await run(client, "print(tools.notes.read_note(name='hello'))")
    assert "not approved: no answer within 1 s" in out
    assert after.strip() == "hello world"  # the session carries on
    assert notes_ws.calls() == ["read_note"]


async def test_a_client_that_never_answers_gets_the_refusal_after_the_approval_timeout(
    notes_ws: Any,
) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}, "approval": {"timeout": 1}})
    forever = asyncio.Event()

    async def never(ctx: Any, params: mt.ElicitRequestParams) -> mt.ElicitResult:
        await forever.wait()
        raise AssertionError("unreachable")

    async with serve(notes_ws.base, "legacy", never) as client:
        with anyio.fail_after(90):
            out = await run(client)
    assert "not approved: no answer within 1 s" in out
    assert notes_ws.calls() == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_client_without_elicitation_gets_a_refusal_that_says_why(
    notes_ws: Any, mode: str
) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    async with serve(notes_ws.base, mode, None) as client:
        out = await run(client)
    assert "your MCP client does not support elicitation" in out
    assert notes_ws.calls() == []


async def test_discovery_on_serve_hides_denied_tools(notes_ws: Any) -> None:
    notes_ws.configure({"policy": {"destructive": "deny"}})
    async with serve(notes_ws.base, "auto", None) as client:
        found = await client.call_tool("search_tools", {"query": "delete note", "limit": 20})
        listed = await client.call_tool("list_tools", {"server": "notes"})
        got = await client.call_tool("get_tool", {"name": "notes.delete_note"})
    assert found.structured_content is not None and listed.structured_content is not None
    assert "notes.delete_note" not in [t["name"] for t in found.structured_content["tools"]]
    assert "notes.delete_note" not in [t["name"] for t in listed.structured_content["tools"]]
    assert got.is_error and isinstance(got.content[0], mt.TextContent)
    assert got.content[0].text.startswith("ToolDenied: notes.delete_note: denied by the")
