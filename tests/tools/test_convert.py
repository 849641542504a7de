"""Tool results become Python values: data stays data, errors raise, bad output warns."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.errors import ToolError
from codemode.tools import ToolRegistry
from codemode.tools.convert import to_value, wrapped_result_key
from codemode.tools.spec import BlobContent, TextContent, ToolCallResult, ToolSpec
from codemode_worker.protocol import Blob


def test_structured_output_is_the_value() -> None:
    r = ToolCallResult(content=[TextContent('{"a": 1}')], structured={"a": 1, "b": [2]})
    assert to_value(r) == {"a": 1, "b": [2]}


def test_text_that_is_json_is_parsed() -> None:
    assert to_value(ToolCallResult(content=[TextContent('[1, {"x": null}]')])) == [1, {"x": None}]
    assert to_value(ToolCallResult(content=[TextContent("42")])) == 42


def test_other_text_stays_a_string() -> None:
    assert to_value(ToolCallResult(content=[TextContent("hello {world}")])) == "hello {world}"
    assert to_value(ToolCallResult(content=[TextContent("[not json")])) == "[not json"


def test_binary_content_becomes_a_blob_with_its_mime_type() -> None:
    r = ToolCallResult(content=[BlobContent(b"\x89PNG", "image/png")])
    assert to_value(r) == Blob(b"\x89PNG", "image/png", "image")


def test_several_contents_make_a_list() -> None:
    r = ToolCallResult(
        content=[TextContent("a"), TextContent("{}"), BlobContent(b"x", "audio/wav", "audio")]
    )
    assert to_value(r) == ["a", {}, Blob(b"x", "audio/wav", "audio")]


def test_no_content_is_none() -> None:
    assert to_value(ToolCallResult()) is None


def test_an_error_result_raises_tool_error_naming_server_and_tool() -> None:
    r = ToolCallResult(content=[TextContent("disk full")], is_error=True)
    with pytest.raises(ToolError) as info:
        to_value(r, server="fs", tool="write")
    assert (info.value.server, info.value.tool, info.value.message) == ("fs", "write", "disk full")
    assert str(info.value) == "fs.write: disk full"


def test_the_sdk_wrapper_around_plain_return_values_is_removed() -> None:
    schema = {
        "title": "addOutput",
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    key = wrapped_result_key(schema)
    assert key == "result"
    assert to_value(ToolCallResult(structured={"result": 3}), unwrap=key) == 3
    assert wrapped_result_key({"properties": {"result": {}}, "required": ["result"]}) is None


class BadOutputSource:
    """A source whose tool breaks its own output schema."""

    name = "bad"

    async def list_tools(self) -> list[ToolSpec]:
        out = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        return [ToolSpec("bad", "count", output_schema=out)]

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        return ToolCallResult(structured={"n": "many"})

    async def aclose(self) -> None:
        pass


@pytest.mark.anyio
async def test_output_breaking_its_schema_is_returned_and_a_warning_recorded() -> None:
    reg = ToolRegistry([BadOutputSource()])
    assert await reg.call("bad", "count", {}) == {"n": "many"}
    assert len(reg.warnings) == 1
    assert "bad.count: result does not match the tool's output schema" in reg.warnings[0]
