"""MCP's types into codemode's (``ToolSpec``, ``ToolCallResult``), in one place.

An SDK upgrade that reshapes tools or content blocks touches this module only.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp_types as mt
import pydantic

from codemode.tools.convert import lone_surrogates_warning
from codemode.tools.sources.mcp.surrogates import LONE_SURROGATES_META
from codemode.tools.spec import BlobContent, Content, TextContent, ToolCallResult, ToolSpec


def tool_spec(
    server: str, tool: mt.Tool, *, trusted: bool = False, in_workspace: bool = False
) -> ToolSpec:
    annotations: dict[str, Any] = {}
    if tool.annotations is not None:
        annotations = tool.annotations.model_dump(exclude_none=True, by_alias=True)
    title = tool.title or annotations.get("title")
    return ToolSpec(
        server=server,
        name=tool.name,
        description=tool.description or "",
        input_schema=dict(tool.input_schema) or {"type": "object", "properties": {}},
        output_schema=dict(tool.output_schema) if tool.output_schema is not None else None,
        annotations=annotations,
        title=title,
        trusted=trusted,
        in_workspace=in_workspace,
    )


def _b64(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return data.encode()


def _content(block: Any) -> Content:
    if isinstance(block, mt.TextContent):
        return TextContent(block.text)
    if isinstance(block, mt.ImageContent):
        return BlobContent(_b64(block.data), block.mime_type, kind="image")
    if isinstance(block, mt.AudioContent):
        return BlobContent(_b64(block.data), block.mime_type, kind="audio")
    if isinstance(block, mt.EmbeddedResource):
        res = block.resource
        if isinstance(res, mt.TextResourceContents):
            return TextContent(res.text)
        mime = res.mime_type or "application/octet-stream"
        return BlobContent(_b64(res.blob), mime, kind="resource", uri=str(res.uri))
    if isinstance(block, mt.ResourceLink):
        link = {"type": "resource_link", "uri": str(block.uri), "name": block.name}
        if block.mime_type:
            link["mimeType"] = block.mime_type
        if block.description:
            link["description"] = block.description
        return TextContent(json.dumps(link))
    if isinstance(block, pydantic.BaseModel):
        return TextContent(block.model_dump_json(by_alias=True, exclude_none=True))
    return TextContent(str(block))


def call_result(result: mt.CallToolResult, warnings: list[str]) -> ToolCallResult:
    replaced = (result.meta or {}).get(LONE_SURROGATES_META)
    if isinstance(replaced, int) and replaced > 0:  # repaired by the stdio reader
        warnings = [*warnings, lone_surrogates_warning(replaced)]
    return ToolCallResult(
        content=[_content(b) for b in result.content],
        structured=result.structured_content,
        is_error=bool(result.is_error),
        warnings=list(warnings),
    )
