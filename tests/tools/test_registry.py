"""The registry: lazy listing, name mapping, discovery, and the single call pipeline."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemode.errors import (
    ConfigError,
    ServerUnavailable,
    ToolArgumentError,
    ToolError,
    ToolNotFound,
    ToolTimeout,
)
from codemode.hostapi import HostAPI
from codemode.tools import PythonSource, ToolCall, ToolRegistry, assign_names
from codemode.tools.registry import NextCall
from codemode.tools.spec import TextContent, ToolCallResult, ToolSpec

pytestmark = pytest.mark.anyio


class EchoSource:
    """A tool source in codemode's own protocol: echoes arguments, counts listings."""

    def __init__(self, name: str, tools: list[str], schema: dict[str, Any] | None = None) -> None:
        self.name = name
        self.tools = tools
        self.schema = schema or {"type": "object", "properties": {"x": {"type": "integer"}}}
        self.listings = 0
        self.closed = False
        self.listing_version = 0
        self.fail: BaseException | None = None

    async def list_tools(self) -> list[ToolSpec]:
        self.listings += 1
        if isinstance(self.fail, ServerUnavailable):
            raise self.fail
        return [ToolSpec(self.name, t, f"The {t} tool.", self.schema) for t in self.tools]

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        if self.fail is not None:
            raise self.fail
        return ToolCallResult(structured={"tool": tool, "args": arguments, "timeout": timeout})

    async def aclose(self) -> None:
        self.closed = True


async def test_python_functions_sync_and_async_are_callable_tools() -> None:
    reg = ToolRegistry()

    def add(a: int, b: int) -> int:
        return a + b

    async def mul(a: int, b: int) -> int:
        return a * b

    reg.register(add)
    reg.register(mul, server="math")
    assert await reg.call("local", "add", {"a": 2, "b": 3}) == 5
    assert await reg.call("math", "mul", {"a": 2, "b": 3}) == 6


async def test_listing_happens_once_and_again_after_invalidate() -> None:
    src = EchoSource("s", ["a"])
    reg = ToolRegistry([src])
    assert src.listings == 0  # lazy
    await reg.call("s", "a", {})
    await reg.list()
    await reg.search("a")
    assert src.listings == 1
    reg.invalidate("s")
    await reg.call("s", "a", {})
    assert src.listings == 2


async def test_a_source_whose_listing_version_changes_is_listed_again() -> None:
    src = EchoSource("s", ["a"])
    reg = ToolRegistry([src])
    await reg.list()
    src.tools = ["a", "b"]
    src.listing_version += 1  # e.g. reconnected or notified tools/list_changed
    assert [t["name"] for t in await reg.list()] == ["s.a", "s.b"]


async def test_names_are_mapped_to_identifiers_and_discovery_shows_the_originals() -> None:
    reg = ToolRegistry([EchoSource("my-server", ["get-weather", "class"])])
    rows = await reg.list()
    assert rows == [
        {"name": "my_server.get_weather", "original": "my-server.get-weather"},
        {"name": "my_server.class_", "original": "my-server.class"},
    ]
    r = await reg.call("my_server", "get_weather", {"x": 1})
    assert r["tool"] == "get-weather"
    assert (await reg.call("my-server", "get-weather", {}))["tool"] == "get-weather"


def test_colliding_names_get_predictable_suffixes() -> None:
    names = assign_names(["get-weather", "get_weather", "get.weather", "get_weather_2"])
    assert names == {
        "get_weather": "get_weather",
        "get-weather": "get_weather_3",
        "get.weather": "get_weather_4",
        "get_weather_2": "get_weather_2",
    }
    assert assign_names(reversed(list(names))) == names


async def test_collisions_and_reserved_server_names_show_in_discovery() -> None:
    reg = ToolRegistry(
        [EchoSource("search", ["a-b", "a_b"]), EchoSource("a.b", ["t"]), EchoSource("a-b", ["t"])]
    )
    names = {(r["name"], r.get("original")) for r in await reg.servers()}
    assert names == {("search_", "search"), ("a_b", "a-b"), ("a_b_2", "a.b")}
    tools = await reg.list("search_")
    assert tools == [
        {"name": "search_.a_b_2", "original": "search.a-b"},
        {"name": "search_.a_b", "original": "search.a_b"},
    ]


async def test_an_unknown_tool_suggests_close_names() -> None:
    reg = ToolRegistry([EchoSource("fs", ["read_file", "write_file", "list_directory"])])
    with pytest.raises(ToolNotFound) as info:
        await reg.call("fs", "read_fil", {})
    assert info.value.suggestions[0] == "fs.read_file"
    assert "did you mean fs.read_file" in str(info.value)


async def test_an_unknown_server_suggests_close_names() -> None:
    reg = ToolRegistry([EchoSource("github", ["x"])])
    with pytest.raises(
        ToolNotFound, match=r"no tool server 'gihub'; did you mean github\?"
    ) as info:
        await reg.call("gihub", "x", {})
    assert info.value.suggestions == ["github"]


async def test_bad_arguments_are_refused_before_the_source_is_called() -> None:
    src = EchoSource("s", ["t"])
    src.fail = AssertionError("must not be called")
    reg = ToolRegistry([src])
    with pytest.raises(ToolArgumentError) as info:
        await reg.call("s", "t", {"x": "one", "y": 2})
    msg = str(info.value)
    assert "unknown argument 'y'" in msg and "argument 'x': expected integer" in msg
    assert "signature: s.t(*, x: int | None = None) -> Any" in msg
    with pytest.raises(ToolArgumentError, match="arguments must be a dict"):
        await reg.call("s", "t", [1])  # type: ignore[arg-type]


async def test_middleware_wraps_every_call_in_order_and_can_change_it() -> None:
    reg = ToolRegistry([EchoSource("s", ["t"])])
    seen: list[str] = []

    async def outer(call: ToolCall, call_next: NextCall) -> Any:
        seen.append(f"outer {call.server}.{call.tool} {call.args}")
        result = await call_next(call)
        return {**result, "audited": True}

    async def inner(call: ToolCall, call_next: NextCall) -> Any:
        seen.append("inner")
        call.args["x"] = 99  # e.g. a policy rewriting arguments
        assert call.spec.name == "t"
        return await call_next(call)

    reg.use(outer)
    reg.use(inner)
    r = await reg.call("s", "t", {"x": 1})
    assert seen == ["outer s.t {'x': 1}", "inner"]
    assert r["args"] == {"x": 99} and r["audited"] is True


async def test_middleware_can_refuse_a_call() -> None:
    src = EchoSource("s", ["t"])
    reg = ToolRegistry([src])

    async def deny(call: ToolCall, call_next: NextCall) -> Any:
        raise ToolError("denied by policy", server=call.server, tool=call.tool)

    reg.use(deny)
    with pytest.raises(ToolError, match=r"s\.t: denied by policy"):
        await reg.call("s", "t", {})


async def test_source_failures_become_tool_errors_naming_the_tool() -> None:
    src = EchoSource("s", ["t"])
    reg = ToolRegistry([src])
    await reg.list()
    src.fail = RuntimeError("socket closed")
    with pytest.raises(ToolError, match=r"s\.t: RuntimeError: socket closed"):
        await reg.call("s", "t", {})
    src.fail = TimeoutError()
    with pytest.raises(ToolTimeout):
        await reg.call("s", "t", {}, timeout=1)
    src.fail = ToolError("upstream broke")
    with pytest.raises(ToolError) as info:
        await reg.call("s", "t", {})
    assert (info.value.server, info.value.tool) == ("s", "t")


async def test_the_default_timeout_reaches_the_source_unless_overridden() -> None:
    reg = ToolRegistry([EchoSource("s", ["t"])], default_timeout=5)
    assert (await reg.call("s", "t", {}))["timeout"] == 5
    assert (await reg.call("s", "t", {}, timeout=0.5))["timeout"] == 0.5


async def test_a_server_that_cannot_list_is_reported_and_does_not_hide_the_others() -> None:
    bad = EchoSource("bad", ["x"])
    bad.fail = ServerUnavailable("command not found: nope", server="bad")
    reg = ToolRegistry([bad, EchoSource("good", ["search_me"])])
    assert await reg.search("search me") == [{"name": "good.search_me"}]
    rows = {r["name"]: r for r in await reg.servers()}
    assert rows["good"] == {"name": "good", "tools": 1, "status": "ok"}
    assert rows["bad"]["status"].startswith("error: bad: command not found")
    assert any("could not be listed" in w for w in reg.warnings)
    with pytest.raises(ServerUnavailable):
        await reg.call("bad", "x", {})


async def test_servers_without_connecting_lists_nothing() -> None:
    src = EchoSource("s", ["t"])
    reg = ToolRegistry([src])
    assert await reg.servers(connect=False) == [
        {"name": "s", "tools": None, "status": "not listed"}
    ]
    assert src.listings == 0


async def test_describe_prefers_the_error_about_a_known_server() -> None:
    reg = ToolRegistry([EchoSource("a.b", ["t"])])
    with pytest.raises(ToolNotFound, match="no tool 'x' on server 'a_b'"):
        await reg.describe("a.b.x")


async def test_describe_accepts_python_and_original_names() -> None:
    src = PythonSource("my.tools")

    def get_it(key: str, n: int = 1) -> list[str]:
        """Fetch it."""
        return [key] * n

    src.add(get_it, name="get-it")
    reg = ToolRegistry([src])
    d = await reg.describe("my_tools.get_it")
    assert d == await reg.describe("my.tools.get-it")
    assert d["name"] == "my_tools.get_it"
    assert d["original"] == {"server": "my.tools", "tool": "get-it"}
    assert d["signature"] == "my_tools.get_it(key: str, *, n: int = 1) -> list[str]"
    assert d["parameters"][1] == {
        "name": "n",
        "original": "n",
        "required": False,
        "type": "int",
        "default": 1,
    }
    assert d["output_schema"] == {"type": "array", "items": {"type": "string"}}
    assert d["docstring"].startswith("Fetch it.")
    assert (await reg.describe("get_it"))["name"] == "my_tools.get_it"
    with pytest.raises(ToolNotFound):
        await reg.describe("my_tools.nope")


async def test_registering_on_a_non_python_server_is_refused() -> None:
    reg = ToolRegistry([EchoSource("s", [])])
    with pytest.raises(ConfigError, match="not a Python tool server"):
        reg.register(lambda: 1, server="s")
    with pytest.raises(ConfigError, match="already registered"):
        reg.add_source(EchoSource("s", []))


async def test_stub_modules_are_served_for_servers_and_tools() -> None:
    reg = ToolRegistry([EchoSource("my-s", ["t-1"])])
    pkg = await reg.stub_module("servers")
    assert pkg is not None and "SERVERS = {'my_s': 'my-s'}" in pkg
    mod = await reg.stub_module("servers.my_s")
    assert mod is not None and "def t_1(" in mod and "async def t_1_async(" in mod
    assert await reg.stub_module("servers.my_s.t_1") is not None
    assert await reg.stub_module("servers.nope") is None
    assert await reg.stub_module("servers.my_s.nope") is None
    assert await reg.stub_module("elsewhere") is None


async def test_installed_handlers_serve_the_worker_methods() -> None:
    host = HostAPI()
    reg = ToolRegistry([EchoSource("s", ["t"])])
    reg.install(host)
    assert {m for m in host.methods() if m.startswith("tools.")} == {
        "tools.call",
        "tools.search",
        "tools.list",
        "tools.describe",
        "tools.servers",
        "tools.stub_module",
    }
    r = await host.dispatch("tools.call", {"server": "s", "tool": "t", "args": {"x": 1}})
    assert r["args"] == {"x": 1}
    assert await host.dispatch("tools.search", {"query": "t", "detail": "name", "limit": 1}) == [
        {"name": "s.t"}
    ]
    assert (await host.dispatch("tools.describe", {"name": "s.t"}))["name"] == "s.t"
    with pytest.raises(ToolArgumentError, match=r"tools\.list: detail: Input should be 'name'"):
        await host.dispatch("tools.list", {"detail": "everything"})


async def test_calls_run_concurrently() -> None:
    reg = ToolRegistry()
    arrived = 0
    all_in = asyncio.Event()

    async def meet(x: int) -> int:
        # Returns only once all five calls are in flight together: sequential calls would hang.
        nonlocal arrived
        arrived += 1
        if arrived == 5:
            all_in.set()
        await asyncio.wait_for(all_in.wait(), 5)
        return x

    reg.register(meet)
    results = await asyncio.gather(*(reg.call("local", "meet", {"x": i}) for i in range(5)))
    assert results == [0, 1, 2, 3, 4]


def test_one_registry_serves_several_event_loops() -> None:
    src = EchoSource("s", ["t"])
    reg = ToolRegistry([src])
    for _ in range(2):  # e.g. two SyncSessions of one process, each with its own loop
        reg.invalidate()
        assert asyncio.run(reg.call("s", "t", {}))["tool"] == "t"
    assert src.listings == 2


async def test_aclose_closes_every_source() -> None:
    a, b = EchoSource("a", []), EchoSource("b", [])
    async with ToolRegistry([a, b]):
        pass
    assert a.closed and b.closed


async def test_an_error_result_raises_tool_error_with_its_message() -> None:
    class Failing(EchoSource):
        async def call_tool(
            self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
        ) -> ToolCallResult:
            return ToolCallResult(content=[TextContent("quota exceeded")], is_error=True)

    reg = ToolRegistry([Failing("api", ["q"])])
    with pytest.raises(ToolError) as info:
        await reg.call("api", "q", {})
    assert str(info.value) == "api.q: quota exceeded"


def test_the_public_api_of_codemode_tools_is_deliberate() -> None:
    import codemode.tools as api

    assert sorted(api.__all__) == api.__all__
    assert all(hasattr(api, name) for name in api.__all__)
    assert "ToolRegistry" in api.__all__ and "ToolCall" in api.__all__
