"""The seeds' names on codemode's server: create_server, custom tools, state files,
list_available_tools, get_server_tools, search_tools(max_results), against the real
filesystem MCP server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from codemode import LLMConfig, Settings
from codemode.agent.capability import AGENT
from codemode.config import Config
from codemode.server import CodemodeServer, create_server

from .conftest import make_workspace
from .test_stdio import text_of

pytestmark = pytest.mark.anyio


def shout(text: str, times: int = 1) -> str:
    """Upper-case a text.

    Args:
        text: What to shout.
        times: How many times.
    """
    return " ".join([text.upper()] * times)


async def add(a: int, b: int) -> dict[str, int]:
    """Add two integers."""
    return {"sum": a + b}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[CodemodeServer]:
    base, _ = make_workspace(tmp_path)
    async with create_server(
        Settings(executor="subprocess"), base=base, custom_tools=[shout]
    ) as srv:
        yield srv


async def call(client: Client, tool: str, **args: Any) -> Any:
    result = await client.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return result


async def test_custom_tools_are_typed_mcp_tools_and_reachable_from_code(
    server: CodemodeServer,
) -> None:
    server.register_tool(add)
    async with Client(server.mcp) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        schema = listed["shout"].input_schema
        assert schema["required"] == ["text"]
        assert schema["properties"]["times"]["type"] == "integer"
        assert "Upper-case a text." in (listed["shout"].description or "")
        assert text_of(await call(client, "shout", text="hi", times=2)) == "HI HI"
        assert (await call(client, "add", a=2, b=3)).structured_content == {"sum": 5}
        bad = await client.call_tool("add", {"a": "x", "b": 1})
        assert bad.is_error
        ran = await call(client, "run_code", code="tools.custom.shout(text='yo')")
        assert ran.structured_content["value"] == "YO"


async def test_list_available_tools_and_get_server_tools_name_each_servers_tools(
    server: CodemodeServer,
) -> None:
    async with Client(server.mcp) as client:
        every = (await call(client, "list_available_tools")).structured_content
        assert "read_text_file" in every["fs"] and every["custom"] == ["shout"]
        one = (await call(client, "get_server_tools", server_name="fs")).structured_content
        assert one["tools"] == every["fs"]
        missing = await client.call_tool("get_server_tools", {"server_name": "nope"})
        assert missing.is_error and "no tool server 'nope'" in text_of(missing)


async def test_search_tools_takes_max_results_and_groups_by_server(
    server: CodemodeServer,
) -> None:
    async with Client(server.mcp) as client:
        found = await call(
            client, "search_tools", query="read a file", detail_level="name", max_results=2
        )
        data = found.structured_content
        assert len(data["tools"]) == 2
        assert list(data["by_server"]) == ["fs"] and len(data["by_server"]["fs"]) == 2
        described = await call(
            client, "search_tools", query="read a file", detail_level="description", max_results=1
        )
        (tool,) = described.structured_content["by_server"]["fs"].values()
        assert tool["description"]


async def test_state_files_are_named_documents_with_the_seeds_result_shapes(
    server: CodemodeServer,
) -> None:
    async with Client(server.mcp) as client:
        empty = (await call(client, "get_state", state_file="progress.json")).structured_content
        assert (empty["exists"], empty["data"]) == (False, {})
        saved = await call(client, "save_state", state_data={"step": 3}, state_file="progress.json")
        assert saved.structured_content["success"] is True
        assert saved.structured_content["file"] == "progress.json"
        got = (await call(client, "get_state", state_file="progress.json")).structured_content
        assert (got["exists"], got["data"]) == (True, {"step": 3})
        # the workspace's own state is another document; "state.json" is that one
        await call(client, "save_state", state_data={"mine": 1}, state_file="state.json")
        own = (await call(client, "get_state")).structured_content
        assert own["data"] == {"mine": 1} and own["exists"] is True
        ran = await call(client, "run_code", code="state.get('mine'), state.get('step')")
        assert ran.structured_content["value"] == [1, None]
        bad = await client.call_tool("get_state", {"state_file": "../../etc/passwd"})
        assert bad.is_error and "invalid state document name" in text_of(bad)


async def test_create_server_takes_the_typed_config_objects(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    config = Config(Settings(executor="subprocess", run_timeout=7), {"llm": LLMConfig(max_steps=3)})
    async with create_server(config, base=base) as srv:
        assert srv.config.run_timeout == 7 and srv.config.executor == "subprocess"
        assert srv.workspace.section(AGENT).max_steps == 3
    async with create_server({"executor": "subprocess"}, base=base, llm={"max_steps": 4}) as srv:
        assert srv.workspace.section(AGENT).max_steps == 4


async def test_the_seed_tools_belong_to_the_all_profile_only(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    srv = create_server(Settings(executor="subprocess"), base=base, tools="core")
    async with srv, Client(srv.mcp) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "list_available_tools" not in names and "get_server_tools" not in names
    assert {"run_code", "search_tools"} <= names


async def test_a_custom_tool_called_directly_by_the_client_passes_the_guardrails(
    tmp_path: Path,
) -> None:
    """A custom tool is an MCP tool of the server too: the policy that denies it from code
    (and the audit that records it) must hold when the client calls it directly."""
    base, _ = make_workspace(tmp_path)
    shouted: list[str] = []

    def record(text: str) -> str:
        """Record a text."""
        shouted.append(text)
        return "recorded"

    policy = {"rules": [{"tools": "custom.record", "action": "deny"}]}
    async with (
        create_server(
            Settings(executor="subprocess"), base=base, custom_tools=[record], policy=policy
        ) as srv,
        Client(srv.mcp) as client,
    ):
        ran = await client.call_tool("run_code", {"code": "tools.custom.record(text='c')"})
        assert "ToolDenied" in text_of(ran)
        direct = await client.call_tool("record", {"text": "direct"})
    assert shouted == [] and direct.is_error, text_of(direct)
    assert "denied" in text_of(direct).lower()


async def test_a_custom_tool_called_directly_asks_the_client_s_person_when_the_policy_asks(
    tmp_path: Path,
) -> None:
    from mcp_types import ElicitResult

    base, _ = make_workspace(tmp_path)
    asked: list[str] = []

    async def elicit(context: Any, params: Any) -> ElicitResult:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"confirm": len(asked) == 1})

    policy = {"rules": [{"tools": "custom.shout", "action": "ask"}]}
    async with (
        create_server(
            Settings(executor="subprocess"), base=base, custom_tools=[shout], policy=policy
        ) as srv,
        Client(srv.mcp, elicitation_callback=elicit, mode="legacy") as client,
    ):
        yes = await client.call_tool("shout", {"text": "hi"})
        no = await client.call_tool("shout", {"text": "again"})
    assert text_of(yes) == "HI" and not yes.is_error
    assert no.is_error and "not approved" in text_of(no)
    assert len(asked) == 2 and 'custom.shout(text="hi"' in asked[0]


def garbled(text: str = "") -> str:
    """Returns text with a lone surrogate, as a tool's JSON ("\\udc80") may."""
    return "ok\udc80" + text


async def test_a_tool_result_with_a_lone_surrogate_is_counted_not_a_crash(
    tmp_path: Path,
) -> None:
    """Measuring such a result (budgets, audit) raised UnicodeEncodeError after the tool
    had run: the client got 'Error executing tool', the code an encoding error."""
    base, _ = make_workspace(tmp_path)
    budget = {"run": {"tool_bytes": 1000}}
    async with (
        create_server(
            Settings(executor="subprocess"), base=base, custom_tools=[garbled], budget=budget
        ) as srv,
        Client(srv.mcp) as client,
    ):
        direct = await client.call_tool("garbled", {})
        ran = await client.call_tool("run_code", {"code": "tools.custom.garbled()"})
    assert not direct.is_error and text_of(direct).startswith("ok"), text_of(direct)
    # The code gets the data with the lone surrogate shown as U+FFFD, and a warning.
    assert not ran.is_error and text_of(ran).startswith("ok\ufffd\n"), text_of(ran)
    assert "[warning] custom.garbled: its result held 1 lone surrogate" in text_of(ran)
