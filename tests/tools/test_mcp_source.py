"""MCPSource against codemode's own edge server, over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from codemode.config import ServerConfig
from codemode.errors import ServerUnavailable, ToolNotFound, ToolTimeout
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.spec import BlobContent, TextContent, ToolSource

pytestmark = pytest.mark.anyio

Make = Callable[..., MCPSource]
Config = Callable[..., ServerConfig]

HANDSHAKE, STATELESS = "2025-11-25", "2026-07-28"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_mcp_source_is_a_tool_source(make_source: Make, edge_config: ServerConfig) -> None:
    assert isinstance(make_source("edge", edge_config), ToolSource)


async def test_nothing_starts_before_first_use(
    make_source: Make, edge_config: ServerConfig
) -> None:
    src = make_source("edge", edge_config)
    assert src.connects == 0 and src.protocol_version is None


async def test_tools_are_listed_with_schemas_and_original_names(
    make_source: Make, edge_config: ServerConfig
) -> None:
    tools = {t.name: t for t in await make_source("edge", edge_config).list_tools()}
    assert {"echo", "add", "slow", "crash", "get-weather", "broken_schema"} <= set(tools)
    weather = tools["get-weather"]
    assert weather.server == "edge" and weather.py_name == "get_weather"
    assert weather.input_schema["required"] == ["city"]
    assert weather.output_schema is not None and "Weather" in weather.description


async def test_structured_result_comes_back_as_data(
    make_source: Make, edge_config: ServerConfig
) -> None:
    result = await make_source("edge", edge_config).call_tool("add", {"a": 2, "b": 40})
    assert result.structured == {"sum": 42} and not result.is_error and result.warnings == []


@pytest.mark.parametrize(("protocol", "version"), [("legacy", HANDSHAKE), ("modern", STATELESS)])
async def test_both_protocol_paths_work_over_stdio(
    make_source: Make, edge_config: ServerConfig, protocol: str, version: str
) -> None:
    src = make_source("edge", edge_config, protocol=protocol)
    assert (await src.call_tool("echo", {"text": "hi"})).content == [TextContent("hi")]
    assert src.protocol_version == version


async def test_auto_mode_picks_the_stateless_protocol_when_the_server_speaks_it(
    make_source: Make, edge_config: ServerConfig
) -> None:
    src = make_source("edge", edge_config)
    await src.list_tools()
    assert src.protocol_version == STATELESS


@pytest.mark.parametrize(
    ("protocol", "version"), [("legacy", HANDSHAKE), ("modern", STATELESS), ("auto", STATELESS)]
)
async def test_both_protocol_paths_work_over_streamable_http(
    make_source: Make, edge_http_config: ServerConfig, protocol: str, version: str
) -> None:
    src = make_source("edge_http", edge_http_config, protocol=protocol)
    result = await src.call_tool("get-weather", {"city": "Oslo"})
    assert result.structured == {"city": "Oslo", "temperature": 21, "unit": "celsius"}
    assert src.protocol_version == version


async def test_per_server_protocol_setting_wins_over_the_global_one(
    make_config: Config, edge_raw: dict[str, Any]
) -> None:
    cfg = make_config("edge", {**edge_raw, "protocol": "legacy"})
    assert MCPSource("edge", cfg, protocol="modern").protocol == "legacy"


async def test_schema_breaking_output_is_kept_with_a_warning(
    make_source: Make, edge_config: ServerConfig
) -> None:
    result = await make_source("edge", edge_config).call_tool("broken_schema", {"city": "Rome"})
    assert result.structured == {"temperature": "warm", "city": "Rome"}
    assert len(result.warnings) == 1
    assert "broken_schema" in result.warnings[0] and "not of type 'number'" in result.warnings[0]


async def test_image_result_becomes_bytes_with_its_mime_type(
    make_source: Make, edge_config: ServerConfig
) -> None:
    [block] = (await make_source("edge", edge_config).call_tool("image", {})).content
    assert isinstance(block, BlobContent)
    assert block.kind == "image" and block.mime_type == "image/png"
    assert block.data.startswith(b"\x89PNG")


async def test_is_error_result_is_flagged_with_its_message(
    make_source: Make, edge_config: ServerConfig
) -> None:
    result = await make_source("edge", edge_config).call_tool("fail", {"message": "nope"})
    assert result.is_error and result.content == [TextContent("nope")]


async def test_huge_result_arrives_whole(make_source: Make, edge_config: ServerConfig) -> None:
    result = await make_source("edge", edge_config).call_tool("huge", {"size": 3_000_000})
    [block] = result.content
    assert isinstance(block, TextContent) and len(block.text) == 3_000_000


async def test_unknown_tool_comes_back_as_the_servers_error_result(
    make_source: Make, edge_config: ServerConfig
) -> None:
    result = await make_source("edge", edge_config).call_tool("no_such_tool", {})
    assert result.is_error and "no_such_tool" in str(result.content)


async def test_slow_call_is_cut_off_by_its_timeout_and_the_next_call_gets_a_fresh_server(
    make_source: Make, edge_config: ServerConfig
) -> None:
    src = make_source("edge", edge_config)
    with pytest.raises(ToolTimeout) as info:
        await src.call_tool("slow", {"seconds": 30}, timeout=0.5)
    assert info.value.tool == "slow" and "0.5 s" in str(info.value)
    assert "restarted" in str(info.value)
    # a timed-out call may have wedged the server (a FIFO, a hang): the next call does not
    # queue behind it, it gets a new process
    assert (await src.call_tool("echo", {"text": "still here"})).content == [
        TextContent("still here")
    ]
    assert src.connects == 2


async def test_per_server_timeout_is_the_default_for_its_calls(
    make_config: Config, edge_raw: dict[str, Any]
) -> None:
    src = MCPSource("edge", make_config("edge", {**edge_raw, "timeout": 0.3}))
    try:
        with pytest.raises(ToolTimeout):
            await src.call_tool("slow", {"seconds": 30})
    finally:
        await src.aclose()


async def test_concurrent_calls_share_one_connection_and_overlap(
    make_source: Make, edge_config: ServerConfig
) -> None:
    src = make_source("edge", edge_config)
    await src.list_tools()
    started = time.monotonic()
    results = await asyncio.gather(*(src.call_tool("slow", {"seconds": 1.0}) for _ in range(4)))
    elapsed = time.monotonic() - started
    assert [r.content for r in results] == [[TextContent("slept 1.0")]] * 4
    assert src.connects == 1
    assert elapsed < 3.5  # sequential would need 4 s


async def test_first_calls_in_parallel_start_the_server_once(
    make_source: Make, edge_config: ServerConfig
) -> None:
    src = make_source("edge", edge_config)
    pids = await asyncio.gather(*(src.call_tool("whoami", {}) for _ in range(5)))
    assert len({r.structured["process"] for r in pids}) == 1 and src.connects == 1


async def test_crash_mid_call_fails_that_call_and_the_next_call_reconnects(
    make_source: Make, edge_config: ServerConfig
) -> None:
    src = make_source("edge", edge_config)
    first = (await src.call_tool("whoami", {})).structured["process"]
    with pytest.raises(ServerUnavailable) as info:
        await src.call_tool("crash", {})
    assert info.value.server == "edge" and info.value.tool == "crash"
    assert "crashing on purpose" in str(info.value)  # the tail of the server's stderr
    version = src.listing_version
    second = (await src.call_tool("whoami", {})).structured["process"]
    assert second != first and src.connects == 2
    assert src.listing_version > version  # the registry re-lists a restarted server


async def test_server_that_died_while_idle_is_restarted_by_the_next_call(
    make_source: Make, unjailed_edge_config: ServerConfig
) -> None:
    src = make_source("edge", unjailed_edge_config)
    pid = (await src.call_tool("whoami", {})).structured["pid"]
    os.kill(pid, 9)
    deadline = time.monotonic() + 10
    while _pid_alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)  # let the end of its stderr pipe be noticed
    assert (await src.call_tool("whoami", {})).structured["pid"] != pid


async def test_missing_command_is_server_unavailable_naming_the_server(
    make_source: Make, make_config: Config
) -> None:
    cfg = make_config("ghost", {"command": "/nonexistent/mcp-server-ghost"})
    with pytest.raises(ServerUnavailable) as info:
        await make_source("ghost", cfg).list_tools()
    assert info.value.server == "ghost"
    assert "command not found" in str(info.value) and "mcp-server-ghost" in str(info.value)


async def test_command_that_exits_at_once_shows_the_tail_of_its_stderr(
    make_source: Make, make_config: Config
) -> None:
    script = "import sys; print('bad token: please set API_KEY', file=sys.stderr); sys.exit(3)"
    cfg = make_config("broken", {"command": sys.executable, "args": ["-c", script]})
    with pytest.raises(ServerUnavailable) as info:
        await make_source("broken", cfg).call_tool("anything", {})
    assert info.value.server == "broken"
    assert "bad token: please set API_KEY" in str(info.value)


async def test_server_that_never_answers_the_handshake_is_cut_off(
    make_source: Make, make_config: Config
) -> None:
    script = "import sys, time; print('starting...', file=sys.stderr, flush=True); time.sleep(60)"
    cfg = make_config("mute", {"command": sys.executable, "args": ["-c", script]})
    with pytest.raises(ServerUnavailable) as info:
        await make_source("mute", cfg, connect_timeout=1.0).list_tools()
    assert "within 1 s" in str(info.value) and "starting..." in str(info.value)


async def test_unreachable_url_is_server_unavailable(
    make_source: Make, make_config: Config, unused_port: int
) -> None:
    cfg = make_config("gone", {"url": f"http://127.0.0.1:{unused_port}/mcp"})
    with pytest.raises(ServerUnavailable) as info:
        await make_source("gone", cfg, connect_timeout=5.0).list_tools()
    assert info.value.server == "gone" and "cannot connect" in str(info.value)


async def test_include_and_exclude_filter_tools_at_list_time(
    make_source: Make, make_config: Config, edge_raw: dict[str, Any]
) -> None:
    cfg = make_config("edge", {**edge_raw, "include": ["get-*", "e*", "add"], "exclude": ["echo"]})
    src = make_source("edge", cfg)
    assert sorted(t.name for t in await src.list_tools()) == ["add", "get-weather"]
    with pytest.raises(ToolNotFound):
        await src.call_tool("echo", {"text": "x"})


async def test_include_and_exclude_match_the_names_the_code_calls_tools_by(
    make_source: Make, make_config: Config, edge_raw: dict[str, Any]
) -> None:
    """``get-weather`` is ``tools.edge.get_weather`` to the code: excluding it by that name
    (as a policy rule may name it) must exclude it, and including by it must include it."""
    out = make_config("edge", {**edge_raw, "exclude": ["get_weather"]})
    src = make_source("edge", out)
    assert "get-weather" not in [t.name for t in await src.list_tools()]
    with pytest.raises(ToolNotFound):
        await src.call_tool("get-weather", {"city": "Oslo"})
    only = make_config("edge", {**edge_raw, "include": ["get_*"]})
    assert [t.name for t in await make_source("edge", only).list_tools()] == ["get-weather"]


async def test_environment_reaches_the_stdio_server_after_var_expansion(
    make_source: Make, make_config: Config, edge_raw: dict[str, Any]
) -> None:
    raw = {**edge_raw, "env": {"EDGE_SECRET": "${TOKEN}-${MISSING:-fallback}"}}
    cfg = make_config("edge", raw, env={"TOKEN": "s3cret"})
    result = await make_source("edge", cfg).call_tool("whoami", {})
    assert result.structured["value"] == "s3cret-fallback"


async def test_aclose_stops_the_server_process(
    make_source: Make, unjailed_edge_config: ServerConfig
) -> None:
    src = make_source("edge", unjailed_edge_config)
    pid = (await src.call_tool("whoami", {})).structured["pid"]
    await src.aclose()
    deadline = time.monotonic() + 10
    while _pid_alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not _pid_alive(pid)


def test_a_source_reconnects_when_used_from_a_new_event_loop(edge_config: ServerConfig) -> None:
    src = MCPSource("edge", edge_config)

    async def call() -> Any:
        return (await src.call_tool("whoami", {})).structured["process"]

    async def call_and_close() -> Any:
        try:
            return await call()
        finally:
            await src.aclose()

    first = asyncio.run(call())  # the loop's teardown stops the server
    second = asyncio.run(call_and_close())
    assert first != second and src.connects == 2


async def test_configured_headers_reach_the_http_server(
    make_source: Make, make_config: Config, edge_http_url: str
) -> None:
    raw = {"url": edge_http_url, "headers": {"X-Codemode-Test": "Bearer ${TOKEN}"}}
    cfg = make_config("edge_http", raw, env={"TOKEN": "t0k"})
    result = await make_source("edge_http", cfg).call_tool("header", {"name": "x-codemode-test"})
    assert result.structured == {"result": "Bearer t0k"}


async def test_legacy_sse_transport_works(
    make_source: Make, make_config: Config, edge_sse_url: str
) -> None:
    cfg = make_config("edge_sse", {"type": "sse", "url": edge_sse_url})
    src = make_source("edge_sse", cfg)
    assert (await src.call_tool("add", {"a": 1, "b": 1})).structured == {"sum": 2}


async def test_http_server_restart_fails_one_call_then_reconnects(
    make_source: Make, make_config: Config, edge_http_process: Any
) -> None:
    src = make_source("edge_http", make_config("edge_http", {"url": edge_http_process.url}))
    first = (await src.call_tool("whoami", {})).structured["pid"]
    edge_http_process.stop()
    edge_http_process.start()
    result = None
    for _ in range(2):  # the first call may fail: the old session is gone
        try:
            result = await src.call_tool("whoami", {})
            break
        except ServerUnavailable:
            continue
    assert result is not None and result.structured["pid"] != first


async def test_callers_queued_behind_a_failed_start_share_its_error(
    make_source: Make, make_config: Config
) -> None:
    script = "import time; time.sleep(60)"
    cfg = make_config("mute", {"command": sys.executable, "args": ["-c", script]})
    src = make_source("mute", cfg, connect_timeout=0.5)
    calls = [src.call_tool("anything", {}) for _ in range(3)]
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(r, ServerUnavailable) for r in results)
    assert src.connects == 1  # one start attempt, not one per caller
