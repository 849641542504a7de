"""Typed stubs: each tool becomes a Python function whose signature mirrors its schema."""

from __future__ import annotations

import asyncio
import inspect
import sys
import types
import typing
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, Literal

import pytest

from codemode.tools import PythonSource, ToolRegistry, ToolSpec
from codemode.tools.stubs import (
    generate_tree,
    server_module_source,
    signature_text,
    stub_tools,
    tool_module_source,
)
from codemode_worker import bridge

WEATHER = ToolSpec(
    server="weather",
    name="get-forecast",
    description="Forecast for a city.\n\nUses the nearest station.",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "units": {"type": "string", "enum": ["c", "f"], "default": "c"},
            "days": {"type": "integer"},
            "where": {
                "type": "object",
                "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat"],
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "from": {"type": ["string", "null"]},
        },
        "required": ["city"],
    },
    output_schema={
        "type": "object",
        "properties": {"temps": {"type": "array", "items": {"type": "number"}}},
        "required": ["temps"],
    },
)


class RecordingLink:
    """An in-test HostLink (codemode's own protocol): records calls, answers with the args."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, method: str, params: dict[str, Any]) -> Any:
        if method != "tools.call":
            return None  # e.g. tools.stub_module: this host serves no modules
        self.calls.append((method, params))
        return params["args"]

    def call_async(self, method: str, params: dict[str, Any]) -> Awaitable[Any]:
        async def answer() -> Any:
            return self.call(method, params)

        return answer()


@pytest.fixture
def link() -> Iterator[RecordingLink]:
    link = RecordingLink()
    previous = bridge._link  # the in-process executor's, when one ran in this process
    bridge.set_link(link)
    yield link
    bridge.set_link(previous)


def load(source: str, name: str = "stub_under_test") -> types.ModuleType:
    mod = types.ModuleType(name)
    # As the worker's importer compiles it: without this module's ``__future__`` imports.
    exec(compile(source, f"<{name}>", "exec", dont_inherit=True), mod.__dict__)
    return mod


def weather_module() -> types.ModuleType:
    return load(server_module_source("weather", stub_tools([(WEATHER, "get_forecast")])))


def test_the_signature_has_required_then_keyword_only_optional_parameters() -> None:
    fn = weather_module().get_forecast
    sig = inspect.signature(fn)
    assert list(sig.parameters) == ["city", "units", "days", "where", "tags", "from_"]
    assert sig.parameters["city"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert sig.parameters["city"].default is inspect.Parameter.empty
    assert sig.parameters["units"].kind is inspect.Parameter.KEYWORD_ONLY
    assert sig.parameters["units"].default == "c"
    assert sig.parameters["days"].default is None


def test_annotations_use_literal_typeddict_and_list() -> None:
    mod = weather_module()
    hints = typing.get_type_hints(mod.get_forecast, include_extras=True)
    assert hints["city"] is str
    assert hints["units"] == Literal["c", "f"]
    assert hints["days"] == int | None
    assert hints["tags"] == list[str] | None
    assert hints["from_"] == str | None
    where = typing.get_args(hints["where"])[0]
    assert typing.is_typeddict(where)
    assert where.__required_keys__ == {"lat"} and where.__optional_keys__ == {"lon"}
    ret = hints["return"]
    assert typing.is_typeddict(ret) and typing.get_type_hints(ret)["temps"] == list[float]


def test_the_docstring_comes_from_the_description() -> None:
    doc = inspect.getdoc(weather_module().get_forecast) or ""
    assert doc.startswith("Forecast for a city.\n\nUses the nearest station.")
    assert "city: City name" in doc
    assert "from_: (sent as 'from')" in doc
    assert "Original name: server 'weather', tool 'get-forecast'." in doc


def test_only_the_arguments_given_are_sent(link: RecordingLink) -> None:
    fn = weather_module().get_forecast
    fn("Oslo")
    fn("Oslo", units="f", from_="x", days=0)
    assert link.calls[0] == (
        "tools.call",
        {"server": "weather", "tool": "get-forecast", "args": {"city": "Oslo"}},
    )
    assert link.calls[1][1]["args"] == {"city": "Oslo", "units": "f", "days": 0, "from": "x"}


def test_the_async_variant_calls_the_host_without_blocking(link: RecordingLink) -> None:
    mod = weather_module()
    assert inspect.iscoroutinefunction(mod.get_forecast_async)
    assert inspect.signature(mod.get_forecast_async) == inspect.signature(mod.get_forecast)
    assert asyncio.run(mod.get_forecast_async("Rome", days=2)) == {"city": "Rome", "days": 2}


def test_display_signature_reads_like_python() -> None:
    assert signature_text(WEATHER, "get_forecast") == (
        "get_forecast(city: str, *, units: Literal['c', 'f'] = 'c', days: int | None = None, "
        "where: dict | None = None, tags: list[str] | None = None, "
        "from_: str | None = None) -> dict"
    )


HOSTILE = [
    ToolSpec("evil", 'quote"s', 'Ends with a quote"'),
    ToolSpec("evil", "triple", "Has \"\"\" triple quotes and ''' too \\ and a backslash"),
    ToolSpec("evil", "class", "keyword name"),
    ToolSpec("evil", "Any", "shadows typing.Any"),
    ToolSpec("evil", "名前", "unicode: 天気 \u2028 line separator \x00 nul"),
    ToolSpec(
        "evil",
        "new\nline",
        "name with a newline",
        input_schema={
            "type": "object",
            "properties": {
                "def": {"type": "string"},
                "a b": {"type": "integer", "default": 3},
                "_a": {"type": "string"},
                "x'y": {"enum": ["it's", 'say "hi"', 1, None]},
                "obj": {
                    "type": "object",
                    "properties": {
                        "'\"": {"type": "string"},
                        "class": {"type": "object", "properties": {"k": {}}},
                    },
                },
                "bad_default": {"type": "number", "default": float("nan")},
            },
            "required": ["def"],
        },
    ),
    ToolSpec(
        "evil",
        "rec",
        "recursive $ref",
        input_schema={
            "type": "object",
            "$defs": {
                "node": {
                    "type": "object",
                    "properties": {"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
                }
            },
            "properties": {"root": {"$ref": "#/$defs/node"}},
        },
    ),
    ToolSpec("evil", "lone", "surrogate \ud800 here", output_schema={"type": "string"}),
]


def test_hostile_names_and_descriptions_still_make_valid_python(link: RecordingLink) -> None:
    from codemode.tools import assign_names

    names = assign_names(s.name for s in HOSTILE)
    items = stub_tools([(s, names[s.name]) for s in HOSTILE])
    mod = load(server_module_source('ev"il', items))
    assert set(mod.__all__) >= {
        "quote_s",
        "triple",
        "class_",
        "Any",
        "名前",
        "new_line",
        "rec",
        "lone",
    }
    assert mod.triple.__doc__.startswith('Has """ triple quotes')
    sig = inspect.signature(mod.new_line)
    assert list(sig.parameters)[:1] == ["def_"]
    assert {"a_b", "a", "x_y", "obj", "bad_default"} <= set(sig.parameters)
    assert sig.parameters["a_b"].default == 3
    mod.new_line("d", x_y="it's", a_b=4)
    assert link.calls[-1][1]["args"] == {"def": "d", "a b": 4, "x'y": "it's"}
    assert mod.lone() == {}
    for item in items:
        load(tool_module_source(item), "single")


@pytest.mark.anyio
async def test_generate_tree_writes_an_importable_package(
    tmp_path: Path, link: RecordingLink
) -> None:
    src = PythonSource("my-tools")

    def add(a: int, b: int = 1) -> int:
        """Add."""
        return a + b

    src.add(add)
    src.add(lambda: None, name="get-time")
    reg = ToolRegistry([src])
    written = await generate_tree(reg, tmp_path)
    root = tmp_path / "servers"
    assert {p.relative_to(tmp_path).as_posix() for p in written} == {
        "servers/__init__.py",
        "servers/my_tools/__init__.py",
        "servers/my_tools/add.py",
        "servers/my_tools/get_time.py",
    }
    assert not [p for p in root.rglob("*.tmp")]
    forget_servers_modules()  # an in-process session of another test may have left its own
    sys.path.insert(0, str(tmp_path))
    try:
        import servers.my_tools as pkg  # type: ignore[import-not-found]

        assert str(inspect.signature(pkg.add)) == "(a: int, *, b: int = 1) -> int"
        assert pkg.add(2) == {"a": 2}
        assert link.calls[-1][1]["server"] == "my-tools"
        from servers.my_tools.get_time import get_time  # type: ignore[import-not-found]

        assert get_time() == {}
    finally:
        sys.path.remove(str(tmp_path))
        forget_servers_modules()


def forget_servers_modules() -> None:
    for name in [n for n in sys.modules if n == "servers" or n.startswith("servers.")]:
        del sys.modules[name]


def test_tools_named_like_builtins_leave_the_module_and_its_other_tools_working(
    link: RecordingLink,
) -> None:
    """A server's tools named ``str``, ``dict``, ``type``... are module-level functions of
    its stub module: they must not break the annotations of the tools after them, nor make
    a call of another tool call them."""
    props = {"type": "object", "properties": {"a": {"type": "string"}}}
    named = ["str", "int", "float", "bool", "list", "dict", "type", "isinstance", "len"]
    specs = [ToolSpec("srv", n, input_schema=props) for n in named]
    send = ToolSpec(
        "srv",
        "send",
        input_schema={
            "type": "object",
            "properties": {
                "to": {"type": "string"},
                "n": {"type": "integer", "default": 1},
                "tags": {"type": "array", "items": {"type": "string"}},
                "meta": {"type": "object", "properties": {"k": {"type": "string"}}},
            },
            "required": ["to"],
        },
    )
    items = stub_tools([(s, s.py_name) for s in [*specs, send]])
    for source in (server_module_source("srv", items), tool_module_source(items[-1])):
        mod = load(source)
        link.calls.clear()
        mod.send("x", n=5, tags=["t"], meta={"k": "v"})
        mod.send("y")
        assert [c[1]["tool"] for c in link.calls] == ["send", "send"]
        assert link.calls[0][1]["args"] == {"to": "x", "n": 5, "tags": ["t"], "meta": {"k": "v"}}
        assert link.calls[1][1]["args"] == {"to": "y"}
    mod = load(server_module_source("srv", items))
    mod.str(a="q")
    assert mod.str.__name__ == "str" and link.calls[-1][1] == {
        "server": "srv",
        "tool": "str",
        "args": {"a": "q"},
    }
