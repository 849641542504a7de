"""``list_available_tools`` and ``get_server_tools``, as code-execution-mcp named them."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..errors import ToolNotFound
from ..server.toolset import Call, Reply, ServerContext, Toolset


def register(toolset: Toolset, ctx: ServerContext) -> None:
    @toolset.tool(
        description="Every tool server and its tool names: {server: [tool, ...]} "
        "(call them from run_code as tools.<server>.<tool>(...)).",
        read_only=True,
    )
    async def list_available_tools(call: Call) -> Reply:
        registry = call.server.tools
        grouped: dict[str, list[str]] = {}
        if registry is not None:
            for row in await registry.list(None, "name"):
                server, _, tool = str(row["name"]).partition(".")
                grouped.setdefault(server, []).append(tool)
        text = "\n".join(f"{s}: {', '.join(t)}" for s, t in grouped.items())
        return Reply(text or "No tool servers are configured.", dict(grouped))

    @toolset.tool(
        description="The tool names of one tool server (see list_servers).", read_only=True
    )
    async def get_server_tools(
        call: Call,
        server_name: Annotated[str, Field(description="The server's name.")],
    ) -> Reply:
        registry = call.server.tools
        if registry is None:
            raise ToolNotFound("no tool servers are configured", server=server_name)
        names = [str(r["name"]).partition(".")[2] for r in await registry.list(server_name)]
        return Reply(", ".join(names) or "No tools.", {"server": server_name, "tools": names})
