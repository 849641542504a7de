"""The workspace: created on first use, read like users' configs, one registry per base."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from codemode.config import load_servers
from codemode.errors import ConfigError
from codemode.tools.sources.mcp import MCPSource
from codemode.workspace import EXAMPLE_MCP_JSON, Workspace

EDGE_SERVER = Path(__file__).resolve().parent / "fixtures" / "servers" / "edge_server.py"


def _edge_mcp_json(base: Path, **extra: object) -> None:
    base.mkdir(parents=True, exist_ok=True)
    servers = {"edge": {"command": sys.executable, "args": [str(EDGE_SERVER)], **extra}}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_first_open_creates_the_directory_and_a_commented_example(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws", env={})
    assert ws.path == (tmp_path / "ws").resolve() and ws.path.is_dir()
    assert (ws.path / "mcp.json").read_text() == EXAMPLE_MCP_JSON
    assert ws.servers == {}


def test_example_servers_parse_once_uncommented(tmp_path: Path) -> None:
    text = "\n".join(
        line.replace("// ", "", 1) if line.startswith("    // ") else line
        for line in EXAMPLE_MCP_JSON.splitlines()
    )
    (tmp_path / "mcp.json").write_text(text)
    servers = load_servers(tmp_path / "mcp.json", env={"HOME": "/h", "EXAMPLE_TOKEN": "t"})
    assert set(servers) == {"filesystem", "time", "remote"}


def test_existing_mcp_json_is_never_overwritten(tmp_path: Path) -> None:
    _edge_mcp_json(tmp_path)
    before = (tmp_path / "mcp.json").read_text()
    assert set(Workspace.open(tmp_path, env={}).servers) == {"edge"}
    assert (tmp_path / "mcp.json").read_text() == before


def test_base_comes_from_argument_then_env_then_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_base, arg_base = tmp_path / "from_env", tmp_path / "from_arg"
    assert Workspace.open(env={"CODEMODE_BASE": str(env_base)}).path == env_base.resolve()
    assert Workspace.open(arg_base, env={"CODEMODE_BASE": str(env_base)}).path == arg_base.resolve()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert Workspace.open(env={}).path == (tmp_path / "home" / ".codemode").resolve()


def test_memory_paths_live_under_the_base(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path, env={})
    assert ws.skills_dir == ws.path / "skills"
    assert ws.artifacts_dir == ws.path / "artifacts"
    assert ws.deps_dir == ws.path / "deps"


def test_settings_layer_file_env_and_arguments(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        '// codemode settings\n{"tool_timeout": 7, "run_timeout": 8}'
    )
    ws = Workspace.open(tmp_path, env={"CODEMODE_RUN_TIMEOUT": "9"}, executor="inprocess")
    assert (ws.settings.tool_timeout, ws.settings.run_timeout) == (7, 9)
    assert ws.settings.executor == "inprocess"


def test_invalid_mcp_json_names_the_file_and_the_field(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        '{"mcpServers": {"bad": {"command": "x", "timeout": "soon"}}}'
    )
    with pytest.raises(ConfigError) as info:
        Workspace.open(tmp_path, env={})
    assert str(tmp_path / "mcp.json") in str(info.value) and "mcpServers.bad.timeout" in str(
        info.value
    )


def test_a_file_where_the_workspace_should_be_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="not a directory"):
        Workspace.open(tmp_path / "file", env={})


def test_registry_has_one_mcp_source_per_enabled_server(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "on": {"command": "a", "timeout": 3},
                    "off": {"command": "b", "enabled": False},
                }
            }
        )
    )
    sources = Workspace.open(tmp_path, env={}).registry().sources()
    assert [s.name for s in sources] == ["on"]
    assert isinstance(sources[0], MCPSource) and sources[0].default_timeout == 3


def test_registry_is_shared_by_every_open_of_the_same_base(tmp_path: Path) -> None:
    _edge_mcp_json(tmp_path / "a")
    _edge_mcp_json(tmp_path / "b")
    first = Workspace.open(tmp_path / "a", env={}).registry()
    assert Workspace.open(tmp_path / "a" / ".." / "a", env={}).registry() is first
    assert Workspace.open(tmp_path / "b", env={}).registry() is not first


def test_changed_server_config_gets_a_new_registry(tmp_path: Path) -> None:
    _edge_mcp_json(tmp_path)
    first = Workspace.open(tmp_path, env={}).registry()
    _edge_mcp_json(tmp_path, timeout=5)
    assert Workspace.open(tmp_path, env={}).registry() is not first


@pytest.mark.anyio
async def test_per_server_timeout_applies_to_calls_through_the_registry(tmp_path: Path) -> None:
    from codemode.errors import ToolTimeout

    _edge_mcp_json(tmp_path, timeout=0.5)
    registry = Workspace.open(tmp_path, env={}, tool_timeout=120).registry()
    try:
        with pytest.raises(ToolTimeout):
            await registry.call("edge", "slow", {"seconds": 30})
    finally:
        await registry.aclose()


@pytest.mark.anyio
async def test_sessions_on_one_base_share_one_connection_per_server(tmp_path: Path) -> None:
    from codemode import Session, SubprocessExecutor

    _edge_mcp_json(tmp_path)
    code = "tools.edge.whoami()['pid']"
    async with (
        Session.from_base(tmp_path, executor=SubprocessExecutor()) as one,
        Session.from_base(tmp_path, executor=SubprocessExecutor()) as two,
    ):
        a, b = await one.run(code), await two.run(code)
        assert a.is_ok and b.is_ok, (a.error, b.error)
        assert a.value == b.value
    [source] = Workspace.open(tmp_path).registry().sources()  # same environment as from_base
    assert isinstance(source, MCPSource) and source.connects == 1
    await source.aclose()
