"""``serve --tools minimal``: two model-visible tools, everything else from the code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_types import TextContent

from codemode.bench.tokens import count_tokens, tool_definition

from .conftest import stdio_client

pytestmark = pytest.mark.anyio


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def test_the_minimal_profile_lists_two_tools_within_a_1000_token_fixed_cost(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    async with stdio_client(base, "--tools", "minimal") as client:
        tools = (await client.list_tools()).tools
        instructions = client.instructions or ""
    assert sorted(t.name for t in tools) == ["run_code", "search_tools"]
    defs = [tool_definition(t.name, t.description, t.input_schema) for t in tools]
    fixed = count_tokens(instructions) + count_tokens(json.dumps(defs, ensure_ascii=False))
    assert fixed <= 1000
    assert ".help" in instructions and "get_tool" not in instructions


async def test_tool_help_in_code_shows_signature_arguments_and_result_schema(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    async with stdio_client(base, "--tools", "minimal") as client:
        result = await client.call_tool("run_code", {"code": "print(tools.fs.list_directory.help)"})
    text = text_of(result)
    assert not result.is_error, text
    assert text.startswith("tools.fs.list_directory(path: str")
    schema = json.loads(text.split("Returns (JSON schema): ", 1)[1].splitlines()[0])
    assert "content" in schema["properties"]
    assert "title" not in json.dumps(schema)  # generated titles are noise for a model
