"""Adding a server tool takes a few lines; the server applies them (in-process client)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

import pytest
from mcp import Client
from pydantic import Field

from codemode.errors import NotFound
from codemode.execution import InProcessExecutor
from codemode.memory import Memory
from codemode.server.app import build_server, core_toolset
from codemode.server.sessions import SessionManager
from codemode.server.toolset import Call, Reply, ServerContext, Toolset, load_text
from codemode.session import Session
from codemode.storage import FileStorage

from .test_stdio import text_of

pytestmark = pytest.mark.anyio


@pytest.fixture
async def context() -> AsyncIterator[ServerContext]:
    executor = InProcessExecutor()

    async def factory(key: str | None) -> Session:
        session = Session(executor)
        await session.start()
        return session

    ctx = ServerContext(SessionManager(factory))
    yield ctx
    await ctx.sessions.aclose()


def greeting_tools(toolset: Toolset, ctx: ServerContext) -> None:
    @toolset.tool(description="Greet someone.", read_only=True)
    async def greet(
        call: Call, name: Annotated[str, Field(description="Who.")], times: int = 1
    ) -> Reply:
        return Reply(" ".join([f"hello {name}"] * times), {"name": name, "times": times})

    @toolset.tool(description="Always fails the way a missing record does.")
    async def lookup(call: Call, key: str) -> str:
        raise NotFound(f"no record {key!r}")

    @toolset.tool(description="Reads a variable from the caller's session.")
    async def peek(call: Call, variable: str) -> dict[str, object]:
        session = await call.session()
        result = await session.run(variable)
        return {"value": result.value}


async def test_a_registered_tool_gets_its_schema_from_the_signature(
    context: ServerContext,
) -> None:
    toolset = Toolset()
    greeting_tools(toolset, context)
    async with Client(build_server(context, toolset=toolset)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        result = await client.call_tool("greet", {"name": "ada", "times": 2})
    schema = tools["greet"].input_schema
    assert schema["required"] == ["name"] and schema["properties"]["times"]["default"] == 1
    assert tools["greet"].annotations is not None and tools["greet"].annotations.read_only_hint
    assert text_of(result) == "hello ada hello ada"
    assert result.structured_content == {"name": "ada", "times": 2}


async def test_a_codemode_error_becomes_a_tool_error_not_a_protocol_error(
    context: ServerContext,
) -> None:
    toolset = Toolset()
    greeting_tools(toolset, context)
    async with Client(build_server(context, toolset=toolset)) as client:
        result = await client.call_tool("lookup", {"key": "k1"})
    assert result.is_error
    assert text_of(result) == "NotFound: no record 'k1'"


async def test_a_tool_can_use_the_callers_session(context: ServerContext) -> None:
    toolset = core_toolset()
    greeting_tools(toolset, context)
    async with Client(build_server(context, toolset=toolset)) as client:
        await client.call_tool("run_code", {"code": "answer = 42"})
        result = await client.call_tool("peek", {"variable": "answer"})
    assert result.structured_content == {"value": 42}


async def test_the_memory_tools_are_listed_when_the_server_has_a_memory(
    context: ServerContext, tmp_path: Path
) -> None:
    async with Client(build_server(context)) as client:
        without = {t.name for t in (await client.list_tools()).tools}
    context.memory = Memory(FileStorage(tmp_path))
    async with Client(build_server(context)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
    assert "list_skills" not in without and {"run_code", "list_skills", "get_state"} <= names


def test_a_tool_must_take_call_first_and_be_async() -> None:
    toolset = Toolset()

    async def no_call(name: str) -> str:
        return name

    def not_async(call: Call) -> str:
        return ""

    with pytest.raises(TypeError, match="first parameter must be `call`"):
        toolset.add(no_call)
    with pytest.raises(TypeError, match="async"):
        toolset.add(not_async)  # type: ignore[arg-type]


def test_instruction_texts_are_byte_stable_package_data() -> None:
    first = load_text("server_instructions.md")
    assert first == load_text("server_instructions.md")
    for name in ("run_code.md", "search_tools.md", "get_tool.md"):
        assert load_text(name).strip()
    assert "tools.<server>.<tool>" in load_text("run_code.md")


async def test_long_output_is_capped_with_a_truncation_marker(context: ServerContext) -> None:
    async with Client(build_server(context, toolset=core_toolset())) as client:
        result = await client.call_tool("run_code", {"code": "print('x' * 100_000)"})
    text = text_of(result)
    assert len(text) < context.output_limit + 200
    assert "characters truncated" in text
    assert not result.is_error
