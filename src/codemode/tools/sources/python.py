"""Python callables as a tool source, so they appear and behave like MCP tools.

The input schema comes from the signature and type hints (through a pydantic model, host
side only), parameter descriptions and the tool description from the docstring (Google
``Args:`` or Sphinx ``:param x:`` style), the output schema from the return annotation.
Sync functions run in a worker thread so a slow one never blocks the event loop (nor the
other calls of the same run); async functions run directly.
"""

from __future__ import annotations

import inspect
import logging
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic import ValidationError as PydanticValidationError
from pydantic_core import PydanticSerializationError, to_jsonable_python

from codemode.errors import ConfigError, ToolArgumentError, ToolError, ToolNotFound, ToolTimeout
from codemode.tools.spec import (
    BlobContent,
    JSONSchema,
    TextContent,
    ToolCallResult,
    ToolSpec,
)
from codemode_worker.protocol import Blob

log = logging.getLogger(__name__)

_SECTION = re.compile(
    r"^\s*(Args|Arguments|Parameters|Params|Returns?|Raises|Yields|Examples?|Notes?):\s*$"
)
_GOOGLE_PARAM = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_PARAM = re.compile(r"^\s*:param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(description, {param: description}) from a Google or Sphinx style docstring."""
    desc: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    for line in inspect.cleandoc(doc).splitlines():
        m = _SECTION.match(line)
        if m:
            section, current = m.group(1).lower(), None
            continue
        sm = _SPHINX_PARAM.match(line)
        if sm:
            current = sm.group(1)
            params[current] = sm.group(2).strip()
            section = "sphinx"
            continue
        if line.strip().startswith(":"):
            section, current = "sphinx", None
            continue
        if section in ("args", "arguments", "parameters", "params"):
            gm = _GOOGLE_PARAM.match(line)
            if gm and (len(line) - len(line.lstrip())) <= 4:
                current = gm.group(1).lstrip("*")
                params[current] = gm.group(3).strip()
            elif current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section == "sphinx":
            if current and line.strip():
                params[current] = (params[current] + " " + line.strip()).strip()
        elif section is None:
            desc.append(line)
    return "\n".join(desc).strip(), params


def strip_titles(schema: Any) -> Any:
    """Drop pydantic's generated ``title`` keys (noise for agents), keeping property names."""
    if isinstance(schema, list):
        return [strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, val in schema.items():
        if key == "title" and isinstance(val, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(
            val, dict
        ):
            out[key] = {k: strip_titles(v) for k, v in val.items()}
        elif key in ("default", "const", "enum", "examples"):
            out[key] = val
        else:
            out[key] = strip_titles(val)
    return out


@dataclass(slots=True)
class _PyTool:
    spec: ToolSpec
    fn: Callable[..., Any]
    model: type[BaseModel]
    fields: list[tuple[str, str, bool]]  # (model field, parameter, positional-only)
    is_async: bool


def _build(
    server: str, fn: Callable[..., Any], name: str | None, description: str | None
) -> _PyTool:
    tool_name = name or getattr(fn, "__name__", None) or type(fn).__name__
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot read the signature of {tool_name!r}: {exc}") from exc
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except (NameError, TypeError) as exc:
        # e.g. a class defined inside a function under ``from __future__ import annotations``
        log.warning(
            "tool %r: type hints unresolved (%s); those parameters accept Any", tool_name, exc
        )
        hints = {}
        for key, ann in getattr(fn, "__annotations__", {}).items():
            try:  # the developer's own annotation text, resolved as get_type_hints would
                hints[key] = (
                    eval(ann, getattr(fn, "__globals__", {})) if isinstance(ann, str) else ann
                )
            except Exception:  # noqa: BLE001 - an unresolvable hint means Any
                hints[key] = Any
    doc_desc, param_docs = parse_docstring(inspect.getdoc(fn) or "")
    fields: dict[str, Any] = {}
    mapping: list[tuple[str, str, bool]] = []
    var_kw = False
    for i, p in enumerate(sig.parameters.values()):
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
            continue
        if p.kind is p.VAR_POSITIONAL:
            continue
        ann = hints.get(p.name, Any)
        default = ... if p.default is p.empty else p.default
        field_name = f"f{i}"  # aliases keep any parameter name clear of BaseModel attributes
        fields[field_name] = (ann, Field(default, alias=p.name, description=param_docs.get(p.name)))
        mapping.append((field_name, p.name, p.kind is p.POSITIONAL_ONLY))
    config = ConfigDict(extra="allow" if var_kw else "forbid", arbitrary_types_allowed=True)
    try:
        model = create_model(f"{tool_name}_args", __config__=config, **fields)
        input_schema = strip_titles(model.model_json_schema(by_alias=True))
    except Exception as exc:
        raise ConfigError(f"cannot derive an input schema for tool {tool_name!r}: {exc}") from exc
    input_schema.pop("additionalProperties", None)
    if var_kw:
        input_schema["additionalProperties"] = True
    input_schema.setdefault("properties", {})
    spec = ToolSpec(
        server=server,
        name=tool_name,
        description=description if description is not None else doc_desc,
        input_schema=input_schema,
        output_schema=_output_schema(hints.get("return", inspect.Signature.empty)),
    )
    is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async callable objects
    )
    return _PyTool(spec, fn, model, mapping, is_async)


def _output_schema(ret: Any) -> JSONSchema | None:
    if ret in (inspect.Signature.empty, Any, None, type(None), ToolCallResult, bytes, Blob):
        return None
    try:
        schema: JSONSchema = strip_titles(TypeAdapter(ret).json_schema(mode="serialization"))
    except Exception:  # noqa: BLE001 - an unschemable return type just means "Any"
        return None
    return schema


def _to_result(value: Any) -> ToolCallResult:
    if isinstance(value, ToolCallResult):
        return value
    if isinstance(value, Blob):
        kind: Any = value.kind if value.kind in ("image", "audio", "resource") else "resource"
        return ToolCallResult(content=[BlobContent(value.data, value.mime_type, kind, value.uri)])
    if isinstance(value, bytes | bytearray | memoryview):
        return ToolCallResult(
            content=[BlobContent(bytes(value), "application/octet-stream", "resource")]
        )
    if value is None:
        return ToolCallResult()
    try:
        return ToolCallResult(structured=to_jsonable_python(value))
    except PydanticSerializationError as exc:
        return ToolCallResult(
            content=[
                TextContent(f"the tool returned a value that is not JSON-serializable: {exc}")
            ],
            is_error=True,
        )


class PythonSource:
    """A server of Python callables (``local`` by default)."""

    trusted_annotations = True
    """Registered by the developer in-process: their annotations can be relied on."""

    def __init__(self, name: str = "local") -> None:
        self._name = name
        self._tools: dict[str, _PyTool] = {}

    @property
    def name(self) -> str:
        return self._name

    def add(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
    ) -> ToolSpec:
        """Register ``fn``; a later tool of the same name replaces it.

        ``annotations`` are MCP tool annotations (``{"readOnlyHint": True}``); the host
        declares them, so they are trusted.
        """
        tool = _build(self._name, fn, name, description)
        tool.spec = replace(tool.spec, annotations=dict(annotations or {}), trusted=True)
        self._tools[tool.spec.name] = tool
        return tool.spec

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    async def list_tools(self) -> list[ToolSpec]:
        return [t.spec for t in self._tools.values()]

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        entry = self._tools.get(tool)
        if entry is None:
            raise ToolNotFound(f"no tool {tool!r}", server=self._name, tool=tool)
        try:
            parsed = entry.model.model_validate(arguments)
        except PydanticValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolArgumentError(
                f"invalid arguments: {problems}", server=self._name, tool=tool
            ) from exc
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for field_name, param, positional in entry.fields:
            value = getattr(parsed, field_name)
            if positional:
                args.append(value)
            else:
                kwargs[param] = value
        if parsed.model_extra:
            kwargs.update(parsed.model_extra)
        call = partial(entry.fn, *args, **kwargs)
        value = None
        try:
            with anyio.move_on_after(timeout) as scope:
                if entry.is_async:
                    value = await call()
                else:
                    value = await anyio.to_thread.run_sync(call, abandon_on_cancel=True)
        except ToolError as exc:
            return ToolCallResult(content=[TextContent(exc.message)], is_error=True)
        except Exception as exc:  # noqa: BLE001 - the tool's own failure becomes an error result
            return ToolCallResult(
                content=[TextContent(f"{type(exc).__name__}: {exc}")], is_error=True
            )
        if scope.cancelled_caught:
            raise ToolTimeout(f"timed out after {timeout} s", server=self._name, tool=tool)
        return _to_result(value)

    async def aclose(self) -> None:
        pass
