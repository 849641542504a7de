"""MCPSource against real third-party MCP servers (npm and PyPI), as users run them."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemode.config import ServerConfig
from codemode.errors import ToolNotFound, ToolTimeout
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.spec import BlobContent, TextContent

pytestmark = pytest.mark.anyio

Make = Callable[..., MCPSource]
Config = Callable[..., ServerConfig]


def _texts(result: Any) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


# ---------------------------------------------------------------------------- filesystem


async def test_filesystem_lists_its_tools_with_output_schemas(
    make_source: Make, filesystem_config: ServerConfig
) -> None:
    tools = await make_source("filesystem", filesystem_config).list_tools()
    names = {t.name for t in tools}
    assert {"read_text_file", "write_file", "list_directory", "search_files"} <= names
    assert all(t.output_schema is not None for t in tools)


async def test_filesystem_writes_then_reads_a_file_with_structured_results(
    make_source: Make, filesystem_config: ServerConfig, fs_root: Path
) -> None:
    src = make_source("filesystem", filesystem_config)
    target = fs_root / "notes.txt"
    wrote = await src.call_tool("write_file", {"path": str(target), "content": "alpha\nbeta\n"})
    assert not wrote.is_error and wrote.warnings == []
    read = await src.call_tool("read_text_file", {"path": str(target)})
    assert read.structured == {"content": "alpha\nbeta\n"} and read.warnings == []
    assert target.read_text() == "alpha\nbeta\n"


async def test_filesystem_refuses_paths_outside_its_root_as_an_error_result(
    make_source: Make, filesystem_config: ServerConfig, tmp_path: Path
) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("nope")
    result = await make_source("filesystem", filesystem_config).call_tool(
        "read_text_file", {"path": str(outside)}
    )
    assert result.is_error and "denied" in _texts(result).lower()


async def test_filesystem_include_and_exclude_lists_apply(
    make_source: Make, make_config: Config, filesystem_config: ServerConfig
) -> None:
    raw = filesystem_config.model_dump(include={"command", "args"})
    cfg = make_config(
        "fs", {**raw, "include": ["read_*", "list_*"], "exclude": ["read_media_file"]}
    )
    src = make_source("fs", cfg)
    names = sorted(t.name for t in await src.list_tools())
    assert names == [
        "list_allowed_directories",
        "list_directory",
        "list_directory_with_sizes",
        "read_file",
        "read_multiple_files",
        "read_text_file",
    ]
    with pytest.raises(ToolNotFound):
        await src.call_tool("write_file", {"path": "x", "content": "y"})


# ---------------------------------------------------------------------------- memory


async def test_memory_keeps_entities_between_calls(
    make_source: Make, memory_config: ServerConfig
) -> None:
    src = make_source("memory", memory_config)
    entity = {"name": "Ada", "entityType": "person", "observations": ["wrote the first program"]}
    created = await src.call_tool("create_entities", {"entities": [entity]})
    assert created.structured == {"entities": [entity]}
    graph = await src.call_tool("read_graph", {})
    assert graph.structured == {"entities": [entity], "relations": []}


# ---------------------------------------------------------------------------- everything


async def test_everything_echoes_and_returns_structured_content(
    make_source: Make, everything_config: ServerConfig
) -> None:
    src = make_source("everything", everything_config)
    assert _texts(await src.call_tool("echo", {"message": "hi"})) == "Echo: hi"
    weather = await src.call_tool("get-structured-content", {"location": "Chicago"})
    assert set(weather.structured) == {"temperature", "conditions", "humidity"}
    assert weather.warnings == []


async def test_everything_image_becomes_png_bytes(
    make_source: Make, everything_config: ServerConfig
) -> None:
    result = await make_source("everything", everything_config).call_tool("get-tiny-image", {})
    [image] = [b for b in result.content if isinstance(b, BlobContent)]
    assert image.mime_type == "image/png" and image.data.startswith(b"\x89PNG")


async def test_everything_resource_links_become_json_text(
    make_source: Make, everything_config: ServerConfig
) -> None:
    result = await make_source("everything", everything_config).call_tool(
        "get-resource-links", {"count": 1}
    )
    texts = [b.text for b in result.content if isinstance(b, TextContent)]
    links = [json.loads(t) for t in texts if t.startswith("{")]
    assert links and links[0]["type"] == "resource_link" and links[0]["uri"].startswith("demo://")


async def test_everything_long_operation_is_cancelled_by_the_timeout(
    make_source: Make, everything_config: ServerConfig
) -> None:
    src = make_source("everything", everything_config)
    with pytest.raises(ToolTimeout):
        await src.call_tool(
            "trigger-long-running-operation", {"duration": 30, "steps": 3}, timeout=1
        )
    assert _texts(await src.call_tool("echo", {"message": "after"})) == "Echo: after"
    assert src.connects == 2  # the timed-out server was replaced, not waited for


# ---------------------------------------------------------------------------- time (PyPI)


@pytest.mark.parametrize(
    ("protocol", "version"), [("legacy", "2025-11-25"), ("auto", "2026-07-28")]
)
async def test_time_server_answers_on_both_protocol_paths(
    make_source: Make, time_config: ServerConfig, protocol: str, version: str
) -> None:
    src = make_source("time", time_config, protocol=protocol)
    result = await src.call_tool("get_current_time", {"timezone": "UTC"})
    assert result.structured["timezone"] == "UTC" and result.warnings == []
    assert src.protocol_version == version


async def test_time_server_converts_between_time_zones(
    make_source: Make, time_config: ServerConfig
) -> None:
    args = {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    result = await make_source("time", time_config).call_tool("convert_time", args)
    assert result.structured["target"]["datetime"].startswith(
        result.structured["source"]["datetime"][:10]
    )
    assert result.structured["time_difference"] == "+9.0h"


# ---------------------------------------------------------------------------- git (PyPI)


async def test_git_server_reports_status_and_log_of_a_real_repository(
    make_source: Make, git_config: ServerConfig, git_repo: Path
) -> None:
    src = make_source("git", git_config)
    tools = {t.name for t in await src.list_tools()}
    assert {"git_status", "git_log", "git_diff", "git_commit"} <= tools
    (git_repo / "new.txt").write_text("x")
    status = await src.call_tool("git_status", {"repo_path": str(git_repo)})
    assert "new.txt" in _texts(status)
    log = await src.call_tool("git_log", {"repo_path": str(git_repo)})
    assert "first commit" in _texts(log)


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
async def test_git_server_works_on_both_protocol_paths(
    make_source: Make, git_config: ServerConfig, git_repo: Path, protocol: str
) -> None:
    src = make_source("git", git_config, protocol=protocol)
    status = await src.call_tool("git_status", {"repo_path": str(git_repo)})
    assert "On branch main" in _texts(status)
