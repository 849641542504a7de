"""The registry, stubs and session namespace against real third-party MCP servers."""

from __future__ import annotations

import inspect
import types
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.config import ServerConfig
from codemode.tools import ToolRegistry
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.spec import py_identifier
from codemode.tools.stubs import server_module_source, stub_tools

pytestmark = pytest.mark.anyio


@pytest.fixture
async def registry(
    filesystem_config: ServerConfig,
    memory_config: ServerConfig,
    everything_config: ServerConfig,
    time_config: ServerConfig,
    git_config: ServerConfig,
) -> AsyncIterator[ToolRegistry]:
    configs = {
        "filesystem": filesystem_config,
        "memory": memory_config,
        "everything": everything_config,
        "time": time_config,
        "git": git_config,
    }
    reg = ToolRegistry([MCPSource(name, cfg) for name, cfg in configs.items()])
    try:
        yield reg
    finally:
        await reg.aclose()


async def test_stubs_of_every_real_tool_compile_with_matching_signatures(
    registry: ToolRegistry,
) -> None:
    items = await registry.stub_items()
    assert {py for py, _, _ in items} == {"filesystem", "memory", "everything", "time", "git"}
    count = 0
    for py_server, original, tools in items:
        mod = types.ModuleType(f"servers.{py_server}")
        exec(
            compile(server_module_source(original, stub_tools(tools)), py_server, "exec"),
            mod.__dict__,
        )
        for spec, py_name in tools:
            sig = inspect.signature(getattr(mod, py_name))
            required = {
                name for name, p in sig.parameters.items() if p.default is inspect.Parameter.empty
            }
            assert required == {py_identifier(r) for r in spec.input_schema.get("required", [])}
            count += 1
    assert count >= 35


async def test_search_across_real_servers_finds_the_right_tools(registry: ToolRegistry) -> None:
    names = [r["name"] for r in await registry.search("current time in a timezone", limit=2)]
    assert "time.get_current_time" in names
    names = [r["name"] for r in await registry.search("commit changes", limit=3)]
    assert "git.git_commit" in names
    rows = await registry.list("everything")
    assert {"name": "everything.get_tiny_image", "original": "everything.get-tiny-image"} in rows


async def test_agents_code_calls_real_servers_in_both_styles(
    registry: ToolRegistry, fs_root: Path
) -> None:
    async with Session(SubprocessExecutor(), tools=registry) as s:
        r = await s.run("tools.time.get_current_time(timezone='UTC')['timezone']")
        assert r.value == "UTC", r.to_text()
        r = await s.run(
            "from servers.filesystem import read_text_file\n"
            f"read_text_file({str(fs_root / 'hello.txt')!r})"
        )
        assert r.is_ok, r.to_text()
        assert "hello from codemode" in str(r.value)
        r = await s.run(
            "parts = tools.everything.get_tiny_image()\n"
            "[(type(p).__name__, p.mime_type) for p in parts if not isinstance(p, str)]"
        )
        assert r.value == [["Blob", "image/png"]], r.to_text()
        r = await s.run("tools.filesystem.read_text_file(pth='x')")
        assert (
            r.error is not None
            and "unknown argument 'pth' (did you mean 'path'?)" in r.error.message
        )
        assert "missing required argument 'path'" in r.error.message
