"""``codemode serve`` over stdio, driven by the official MCP client (both protocol eras)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from mcp_types import TextContent

from .conftest import serve_argv, stdio_client

pytestmark = pytest.mark.anyio

CORE_TOOLS = {"run_code", "search_tools", "list_servers", "list_tools", "get_tool", "reset_session"}


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_stdio_client_sees_the_codemode_tools_and_instructions(
    workspace: tuple[Path, Path], mode: str
) -> None:
    base, _ = workspace
    async with stdio_client(base, mode=mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        instructions = client.instructions
    assert set(tools) >= CORE_TOOLS
    run_code = tools["run_code"]
    assert "tools.<server>.<tool>" in (run_code.description or "")
    assert run_code.output_schema is None  # deliberately (see app.core_toolset)
    assert run_code.input_schema["required"] == ["code"]
    assert instructions is not None and "run_code" in instructions


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_run_code_calls_the_filesystem_server_and_prints_only_what_is_asked(
    workspace: tuple[Path, Path], mode: str
) -> None:
    base, files = workspace
    code = (
        f"listing = tools.fs.list_directory(path={str(files)!r})\n"
        "names = [l.split()[-1] for l in listing['content'].splitlines() if 'note' in l]\n"
        "print(len(names), 'notes')"
    )
    async with stdio_client(base, mode=mode) as client:
        result = await client.call_tool("run_code", {"code": code})
    assert not result.is_error, text_of(result)
    assert text_of(result).strip() == "6 notes"
    assert result.structured_content is not None
    assert result.structured_content["stdout"] == "6 notes\n"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_variables_persist_between_runs_of_one_client(
    workspace: tuple[Path, Path], mode: str
) -> None:
    base, _ = workspace
    async with stdio_client(base, mode=mode) as client:
        await client.call_tool("run_code", {"code": "import math\nx = 41"})
        result = await client.call_tool("run_code", {"code": "math.floor(x + 1.5)"})
    assert text_of(result) == "42"
    assert result.structured_content is not None
    assert result.structured_content["value"] == 42
    assert result.structured_content["session"] == "persistent"


async def test_a_failing_run_is_a_tool_error_with_a_trimmed_traceback(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    async with stdio_client(base) as client:
        result = await client.call_tool("run_code", {"code": "def f():\n    return 1/0\nf()"})
    assert result.is_error
    text = text_of(result)
    assert "ZeroDivisionError" in text and "codemode" not in text.lower()
    assert result.structured_content is not None
    error = result.structured_content["error"]
    assert error["type"] == "ZeroDivisionError"
    assert result.structured_content["ok"] is False


async def test_a_run_past_its_timeout_is_stopped_and_the_session_stays_usable(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    async with stdio_client(base) as client:
        await client.call_tool("run_code", {"code": "kept = 'yes'"})
        stopped = await client.call_tool("run_code", {"code": "while True: pass", "timeout": 1})
        after = await client.call_tool("run_code", {"code": "kept"})
    assert stopped.is_error
    assert stopped.structured_content is not None
    assert stopped.structured_content["timed_out"] is True
    assert text_of(after) == "'yes'" or text_of(after) == "yes"


async def test_reset_session_clears_variables(workspace: tuple[Path, Path]) -> None:
    base, _ = workspace
    async with stdio_client(base) as client:
        await client.call_tool("run_code", {"code": "x = 1"})
        reset = await client.call_tool("reset_session", {})
        result = await client.call_tool("run_code", {"code": "x"})
    assert not reset.is_error
    assert result.is_error and "NameError" in text_of(result)


async def test_discovery_tools_describe_the_upstream_server(workspace: tuple[Path, Path]) -> None:
    base, _ = workspace
    async with stdio_client(base) as client:
        servers = await client.call_tool("list_servers", {})
        found = await client.call_tool(
            "search_tools", {"query": "list directory", "detail_level": "description"}
        )
        listed = await client.call_tool("list_tools", {"server": "fs"})
        described = await client.call_tool("get_tool", {"name": "fs.read_text_file"})
        missing = await client.call_tool("get_tool", {"name": "fs.read_txt_file"})
    assert text_of(servers).startswith("fs: 14 tools")
    assert "fs.list_directory(path: str)" in text_of(found)
    assert len(listed.structured_content["tools"]) == 14  # type: ignore[index]
    assert "Input schema:" in text_of(described) and '"path"' in text_of(described)
    assert missing.is_error and "ToolNotFound" in text_of(missing)


async def test_a_new_workspace_is_created_with_an_example_mcp_json(tmp_path: Path) -> None:
    base = tmp_path / "fresh"
    async with stdio_client(base) as client:
        servers = await client.call_tool("list_servers", {})
    assert (base / "mcp.json").is_file()
    assert "mcpServers" in (base / "mcp.json").read_text()
    assert not servers.is_error


async def test_list_servers_tells_the_model_about_misspelt_keys_in_mcp_json(
    tmp_path: Path,
) -> None:
    base = tmp_path / "ws"
    base.mkdir()
    entry = {"command": "/nonexistent/ghost", "enable": False}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"ghost": entry}}, indent=1))
    async with stdio_client(base) as client:
        servers = await client.call_tool("list_servers", {})
    warning = (
        f"{base / 'mcp.json'}:5:4: mcpServers.ghost: unknown key 'enable' "
        "(did you mean 'enabled'?); it is ignored"
    )
    lines = text_of(servers).splitlines()
    assert lines[-2:] == [
        "Configuration warnings (the user can fix these in the workspace files):",
        f"- {warning}",
    ]
    assert servers.structured_content["config_warnings"] == [warning]  # type: ignore[index]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_by_default_code_runs_in_the_sandbox_when_the_machine_supports_it() -> None:
    from codemode.execution.sandbox import SandboxExecutor

    failed = [c for c in SandboxExecutor(pool_size=0).checks() if not c.ok and c.required]
    if failed:
        pytest.skip("; ".join(f"{c.name}: {c.detail}" for c in failed))
    # The sandbox's unprivileged uid must be able to reach the workspace: pytest's own
    # temporary directories are private to root, so use a world-traversable one.
    root = Path(tempfile.mkdtemp(prefix="codemode-serve-"))
    try:
        root.chmod(0o755)
        async with stdio_client(root / "ws", executor=None) as client:
            result = await client.call_tool("run_code", {"code": "import os\nos.getcwd()"})
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert text_of(result) == "/workspace"


def test_a_broken_mcp_json_stops_serve_with_a_message_naming_the_file(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    base.mkdir()
    (base / "mcp.json").write_text('{"mcpServers": {"x": {"command": ""}}}')
    argv = serve_argv(base, "--executor", "subprocess")
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert done.returncode == 2
    assert f"{base / 'mcp.json'}:1:34: mcpServers.x.command: must not be empty" in done.stderr
    assert done.stdout == ""
