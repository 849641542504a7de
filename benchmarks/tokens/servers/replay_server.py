"""Serve a real MCP server's tool definitions, replayed from a ``tools/list`` snapshot.

Run: ``python replay_server.py SNAPSHOT.json`` (stdio). The snapshot (see
``benchmarks/discovery/snapshot.py``) holds the tools exactly as the real package listed
them, and its instructions; this server lists them unchanged, so a client's context
carries the real definitions. It has no backend: a call answers with a tool error saying
so (the token benchmark never calls these tools; they are the catalog the agent's two
tools sit in).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def build(snapshot: dict[str, Any]) -> Server[Any]:
    tools = [types.Tool.model_validate(t) for t in snapshot["tools"]]
    source = f"{snapshot['package']}=={snapshot['version']}"

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> Any:
        text = f"{params.name}: replayed definition of {source}; this server has no backend"
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)

    info = snapshot.get("server_info") or {}
    return Server(
        str(info.get("name") or snapshot["name"]),
        version=str(info.get("version") or snapshot["version"]),
        instructions=snapshot.get("instructions"),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def main(path: Path) -> None:
    server = build(json.loads(path.read_text()))
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, Path(sys.argv[1]))
