"""Python callables as tools: schema from the signature and docstring, calls off the loop."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from codemode.errors import ConfigError, ToolArgumentError, ToolTimeout
from codemode.tools import PythonSource
from codemode.tools.sources.python import parse_docstring
from codemode.tools.spec import BlobContent, TextContent


def google(city: str, days: int = 3, units: Literal["c", "f"] = "c") -> dict[str, float]:
    """Forecast for a city.

    More detail here.

    Args:
        city: Name of the city,
            possibly long.
        days (int): How many days.

    Returns:
        Temperatures.
    """
    return {"t": 1.0}


def test_the_input_schema_comes_from_signature_and_hints() -> None:
    spec = PythonSource("local").add(google)
    assert spec.name == "google" and spec.server == "local"
    assert spec.input_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "Name of the city, possibly long."},
            "days": {"type": "integer", "default": 3, "description": "How many days."},
            "units": {"enum": ["c", "f"], "type": "string", "default": "c"},
        },
        "required": ["city"],
    }
    assert spec.output_schema == {"type": "object", "additionalProperties": {"type": "number"}}


def test_the_description_is_the_docstring_before_its_sections() -> None:
    spec = PythonSource().add(google)
    assert spec.description == "Forecast for a city.\n\nMore detail here."


def test_sphinx_style_parameter_docs_are_read() -> None:
    desc, params = parse_docstring("Do it.\n\n:param x: the x\n:param int y: the y\n:returns: z")
    assert desc == "Do it."
    assert params == {"x": "the x", "y": "the y"}


def test_name_and_description_can_be_given() -> None:
    spec = PythonSource().add(google, name="forecast", description="Weather.")
    assert (spec.name, spec.description) == ("forecast", "Weather.")


def test_parameter_names_that_clash_with_pydantic_attributes_work() -> None:
    def f(json: str, model_config: int = 0, schema: str = "") -> str:
        return f"{json}{model_config}{schema}"

    src = PythonSource()
    spec = src.add(f)
    assert list(spec.input_schema["properties"]) == ["json", "model_config", "schema"]
    r = asyncio.run(src.call_tool("f", {"json": "a", "model_config": 2}))
    assert r.structured == "a2"


@pytest.mark.anyio
async def test_sync_functions_run_in_a_worker_thread() -> None:
    src = PythonSource()
    src.add(lambda: threading.get_ident(), name="where")
    r = await src.call_tool("where", {})
    assert r.structured != threading.get_ident()


@pytest.mark.anyio
async def test_async_functions_run_on_the_loop() -> None:
    async def where() -> int:
        await asyncio.sleep(0)
        return threading.get_ident()

    src = PythonSource()
    src.add(where)
    assert (await src.call_tool("where", {})).structured == threading.get_ident()


class Point(BaseModel):
    x: int
    y: int


@dataclass
class Box:
    w: int


@pytest.mark.anyio
async def test_nested_model_arguments_are_built_from_dicts() -> None:
    def area(p: Point, box: Box) -> int:
        return p.x * p.y * box.w

    src = PythonSource()
    spec = src.add(area)
    assert "$defs" in spec.input_schema
    assert (await src.call_tool("area", {"p": {"x": 2, "y": 3}, "box": {"w": 2}})).structured == 12


@pytest.mark.anyio
async def test_extra_keyword_arguments_are_allowed_with_var_kwargs() -> None:
    def kw(a: int, **rest: Any) -> dict[str, Any]:
        return {"a": a, **rest}

    src = PythonSource()
    assert src.add(kw).input_schema["additionalProperties"] is True
    assert (await src.call_tool("kw", {"a": 1, "z": 2})).structured == {"a": 1, "z": 2}


@pytest.mark.anyio
async def test_an_exception_in_the_tool_becomes_an_error_result() -> None:
    def boom() -> None:
        raise KeyError("nope")

    src = PythonSource()
    src.add(boom)
    r = await src.call_tool("boom", {})
    assert r.is_error and r.content == [TextContent("KeyError: 'nope'")]


@pytest.mark.anyio
async def test_bad_arguments_raise_a_tool_argument_error() -> None:
    src = PythonSource()
    src.add(google)
    with pytest.raises(ToolArgumentError, match="city"):
        await src.call_tool("google", {})


@pytest.mark.anyio
async def test_a_slow_tool_is_cut_off_by_the_timeout() -> None:
    async def slow() -> None:
        await asyncio.sleep(10)

    src = PythonSource()
    src.add(slow)
    with pytest.raises(ToolTimeout, match=r"timed out after 0\.05 s"):
        await src.call_tool("slow", {}, timeout=0.05)


@pytest.mark.anyio
async def test_bytes_come_back_as_binary_content_and_none_as_nothing() -> None:
    src = PythonSource()
    src.add(lambda: b"\x00\x01", name="raw")
    src.add(lambda: None, name="nothing")
    raw = await src.call_tool("raw", {})
    assert raw.content == [BlobContent(b"\x00\x01", "application/octet-stream", "resource")]
    nothing = await src.call_tool("nothing", {})
    assert nothing.content == [] and nothing.structured is None


@pytest.mark.anyio
async def test_a_value_that_is_not_json_is_an_error_result() -> None:
    src = PythonSource()
    src.add(lambda: object(), name="weird")
    r = await src.call_tool("weird", {})
    assert r.is_error and "not JSON-serializable" in r.content[0].text  # type: ignore[union-attr]


class Opaque:
    pass


def test_a_parameter_type_without_a_schema_is_refused_clearly() -> None:
    def f(x: Opaque) -> None:
        pass

    with pytest.raises(ConfigError, match="cannot derive an input schema for tool 'f'"):
        PythonSource().add(f)


def test_unresolvable_hints_degrade_to_any(caplog: pytest.LogCaptureFixture) -> None:
    class Local:
        pass

    def f(x: Local, n: int) -> None:
        pass

    spec = PythonSource().add(f)
    assert spec.input_schema["required"] == ["x", "n"]
    assert spec.input_schema["properties"]["n"] == {"type": "integer"}
    assert "type hints unresolved" in caplog.text
