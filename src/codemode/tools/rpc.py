"""The ``tools.*`` rows of the worker -> host table (see ``codemode.rpc``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import Field

from codemode.errors import ToolArgumentError
from codemode.rpc import Method, Params, Table
from codemode.tools.search import Detail

if TYPE_CHECKING:
    from codemode.tools.registry import ToolRegistry

Limit = Field(10, ge=0, le=10_000, description="Maximum number of results.")


class CallParams(Params):
    server: str = Field(description="Server name (Python identifier or original name).")
    tool: str = Field(description="Tool name (Python identifier or original name).")
    args: dict[str, Any] | None = Field(None, description="The tool's arguments.")
    # No timeout: the code would set its own and outlast the operator's (a server's
    # "timeout" in mcp.json, tool_timeout), e.g. keep a read of a planted FIFO going.


class SearchParams(Params):
    query: str = Field("", description="Keywords describing what you want to do.")
    detail: Detail = Field("name", description='"name", "description" or "full".')
    limit: int = Limit


class ListParams(Params):
    server: str | None = Field(None, description="Server name; omit for all servers.")
    detail: Detail = Field("name", description='"name", "description" or "full".')


class DescribeParams(Params):
    name: str = Field(description='Qualified tool name, "server.tool".')


class ServersParams(Params):
    connect: bool = Field(True, description="List servers not listed yet (connecting them).")


class StubParams(Params):
    module: str = Field(description="servers, servers.<server> or servers.<server>.<tool>.")


async def _call(r: ToolRegistry, p: CallParams) -> Any:
    return await r.call(p.server, p.tool, p.args)


async def _search(r: ToolRegistry, p: SearchParams) -> Any:
    return await r.search(p.query, p.detail, p.limit)


async def _list(r: ToolRegistry, p: ListParams) -> Any:
    return await r.list(p.server, p.detail)


async def _describe(r: ToolRegistry, p: DescribeParams) -> Any:
    return await r.describe(p.name)


async def _servers(r: ToolRegistry, p: ServersParams) -> Any:
    return await r.servers(connect=p.connect)


async def _stub(r: ToolRegistry, p: StubParams) -> Any:
    return await r.stub_module(p.module)


def _row(name: str, params: type[Params], handler: Any, result: str, doc: str) -> Method[Any]:
    return Method(name, params, handler, result, doc, error=ToolArgumentError)


TOOL_METHODS: Table[ToolRegistry] = Table(
    _row("tools.call", CallParams, _call, "the converted result", "Call one tool."),
    _row("tools.search", SearchParams, _search, "list of tool rows", "Rank tools for a query."),
    _row("tools.list", ListParams, _list, "list of tool rows", "Every tool (of one server)."),
    _row("tools.describe", DescribeParams, _describe, "dict", "Everything about one tool."),
    _row("tools.servers", ServersParams, _servers, "list of server rows", "Each server."),
    _row("tools.stub_module", StubParams, _stub, "Python source or null", "Typed stub module."),
)


__all__ = ["TOOL_METHODS"]
