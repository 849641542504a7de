"""What codemode relies on in the MCP SDK beyond its public API: one test per hook.

An SDK upgrade that moves any of these fails here, loudly, instead of degrading codemode
quietly. The SDK is pinned to the minor version these tests pass with (pyproject.toml).
"""

from __future__ import annotations

import ast
import inspect
import tomllib
from importlib.metadata import version
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mcp_types as mt
import pytest
from mcp import Client
from mcp.client import ClientSession
from mcp.server import MCPServer
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from packaging.requirements import Requirement

from codemode.server.app import _advertise_handshake_only

REPO = Path(__file__).resolve().parents[1]
SDK_MODULES = [
    *(REPO / "src/codemode/tools/sources/mcp").glob("*.py"),
    *(REPO / "src/codemode/server").glob("*.py"),
]

PRIVATE_HOOKS = {
    "server._lowlevel_server",
    # server/replicas.py: adopting a session another serve replica issued
    "manager._server_instances",
    "self._manager._server_instances",
    "manager._task_group",
    "manager._lifespan_state",
    "manager._discard_session",
    # tools/sources/mcp/stdio.py: the SDK's process spawn and stop, under codemode's reader
    "sdk_stdio._create_platform_compatible_process",
    "sdk_stdio._drain_stdout",
    "sdk_stdio._stop_server_process",
}
"""Private attributes of SDK objects that codemode touches (each has a test below)."""


def test_the_installed_sdk_is_the_pinned_minor_version() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pin = next(Requirement(d) for d in project["dependencies"] if Requirement(d).name == "mcp")
    assert str(pin.specifier).startswith("~="), "pin the SDK to a minor version (~=X.Y.Z)"
    assert version("mcp") in pin.specifier


def test_only_the_known_private_attributes_of_sdk_objects_are_used() -> None:
    used = set()
    for path in SDK_MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (
                    isinstance(node.value, ast.Name) and node.value.id in ("self", "cls", "os")
                )
            ):
                used.add(ast.unparse(node))
    assert used == PRIVATE_HOOKS


def test_the_stdio_process_helpers_take_what_the_bounded_reader_passes() -> None:
    from mcp.client import stdio as sdk_stdio

    spawn = inspect.signature(sdk_stdio._create_platform_compatible_process).parameters
    assert {"command", "args", "env", "errlog", "cwd"} <= set(spawn)
    assert list(inspect.signature(sdk_stdio._drain_stdout).parameters) == ["process"]
    assert list(inspect.signature(sdk_stdio._stop_server_process).parameters) == ["process"]
    assert callable(sdk_stdio.get_default_environment)


@pytest.mark.anyio
async def test_lowlevel_server_takes_a_replacement_discover_handler() -> None:
    server: MCPServer[Any] = MCPServer("contract", instructions="read me")
    low = server._lowlevel_server
    params = inspect.signature(low.get_capabilities).parameters
    assert params["protocol_version"].kind is inspect.Parameter.KEYWORD_ONLY
    assert list(inspect.signature(low.add_request_handler).parameters) == [
        "method",
        "params_type",
        "handler",
    ]
    _advertise_handshake_only(server)
    entry = low.get_request_handler("server/discover")
    assert entry is not None and entry.params_type is mt.RequestParams
    ctx = SimpleNamespace(protocol_version=HANDSHAKE_PROTOCOL_VERSIONS[-1])
    result = await entry.handler(ctx, None)  # type: ignore[arg-type]
    assert isinstance(result, mt.DiscoverResult)
    assert result.supported_versions == list(HANDSHAKE_PROTOCOL_VERSIONS)
    assert result.instructions == "read me"


@pytest.mark.anyio
async def test_call_tool_validates_results_through_the_sessions_attribute() -> None:
    """codemode replaces ``validate_tool_result`` on one session to keep schema-breaking data."""
    assert inspect.iscoroutinefunction(ClientSession.validate_tool_result)
    assert list(inspect.signature(ClientSession.validate_tool_result).parameters)[1:] == [
        "name",
        "result",
    ]
    server: MCPServer[Any] = MCPServer("contract")

    @server.tool()
    def count() -> dict[str, int]:
        return {"n": 1}

    seen: list[str] = []
    async with Client(server) as client:
        original = client.session.validate_tool_result

        async def recorder(name: str, result: mt.CallToolResult) -> None:
            seen.append(name)
            await original(name, result)

        setattr(client.session, "validate_tool_result", recorder)  # noqa: B010
        await client.call_tool("count", {})
    assert seen == ["count"]


@pytest.mark.anyio
async def test_the_session_manager_takes_a_session_adopted_from_another_replica() -> None:
    """server/replicas.py registers a transport under an id another replica issued, runs
    its server in the manager's task group with its lifespan state, and drops it with
    ``_discard_session`` (after which the id is unknown again: 404)."""
    server: MCPServer[Any] = MCPServer("contract")
    manager = StreamableHTTPSessionManager(app=server._lowlevel_server)
    assert manager._server_instances == {}
    assert manager._task_group is None
    assert inspect.iscoroutinefunction(manager._discard_session)
    assert list(inspect.signature(manager._discard_session).parameters) == [
        "session_id",
        "transport",
    ]
    async with manager.run():
        assert manager._task_group is not None
        assert hasattr(manager, "_lifespan_state")
        transport = StreamableHTTPServerTransport(mcp_session_id="adopted")
        manager._server_instances["adopted"] = transport
        started: list[str] = []

        async def run_server(*, task_status: Any) -> None:
            started.append("adopted")
            task_status.started()

        await manager._task_group.start(run_server)
        await manager._discard_session("adopted", transport)
        assert started == ["adopted"]
        assert "adopted" not in manager._server_instances
