"""Typed Python modules generated from tool schemas.

Each tool becomes a function with a real signature (required parameters first, optional
ones keyword-only with ``None`` or the schema's default), ``Literal`` for enums,
``TypedDict`` for nested objects, ``list[...]`` for arrays, a docstring from the
description and a return type from the output schema. The body is one RPC:
``codemode_worker.bridge.call("tools.call", ...)`` (``acall`` in the ``<tool>_async``
variant), sending only the arguments given.

Names and descriptions come from untrusted servers: every string reaches the generated
source through ``repr`` (or a docstring checked to be safe), identifiers through
``py_identifier``, and module-level names are allocated so no tool shadows another or a
helper. ``typing`` is imported as ``_t`` so a tool named ``Any`` changes nothing; tools named
like builtins (``str``, ``dict``, ``type``) would shadow them in the module, so such a tool's
function is defined under a private name (``_f_str``) and bound to its own name only after
every annotation was evaluated, and the helper looks up no builtin by name.

The same renderer produces the display signature discovery shows
(``get_weather(city: str, *, units: Literal['c', 'f'] = 'c') -> dict``).
"""

from __future__ import annotations

import ast
import builtins
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from codemode.tools.convert import wrapped_result_key
from codemode.tools.spec import ToolSpec, py_identifier

MAX_DEPTH = 6
_NO_DEFAULT: Any = object()
_RESERVED = frozenset({"_t", "_bridge", "_put", "_a", "annotations"})


class Names:
    """Allocates unique module-level names: ``base``, then ``base_2``, ``base_3``..."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self.used: set[str] = set(_RESERVED) | set(taken)

    def take(self, base: str) -> str:
        name, i = base, 2
        while name in self.used:
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name


def _camel(text: str) -> str:
    parts = py_identifier(text).split("_")
    out = "".join(p[:1].upper() + p[1:] for p in parts if p)
    return out if out and out.isidentifier() and not out[0].isdigit() else "T" + out


def _literal_ok(value: Any) -> bool:
    return value is None or isinstance(value, str | int | bool)


def _py_literal(value: Any) -> str | None:
    """``repr(value)`` if it round-trips as a Python literal, else None."""
    text = repr(value)
    try:
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def _union(parts: Sequence[str]) -> str:
    uniq = list(dict.fromkeys(parts))
    if any(p in ("Any", "_t.Any") for p in uniq):
        return next(p for p in uniq if p in ("Any", "_t.Any"))
    return " | ".join(uniq) if uniq else "None"


class TypeRenderer:
    """JSON Schema -> annotation text; in ``code`` mode nested objects become TypedDicts."""

    def __init__(self, root: Mapping[str, Any] | None, names: Names | None = None) -> None:
        self.root = root or {}
        self.names = names
        self.code = names is not None
        self.p = "_t." if self.code else ""
        self.defs: list[str] = []
        self._refs: dict[str, str] = {}
        self._stack: list[str] = []

    def any(self) -> str:
        return self.p + "Any"

    def dict_any(self) -> str:
        return f"dict[str, {self.any()}]"

    def render(self, schema: Any, hint: str, depth: int = 0) -> str:
        if not isinstance(schema, Mapping) or depth > MAX_DEPTH:
            return self.any()
        if "$ref" in schema:
            return self._ref(str(schema["$ref"]), depth)
        if "const" in schema and _literal_ok(schema["const"]):
            return f"{self.p}Literal[{schema['const']!r}]"
        enum = schema.get("enum")
        if isinstance(enum, list) and enum and all(_literal_ok(v) for v in enum):
            return f"{self.p}Literal[{', '.join(repr(v) for v in dict.fromkeys(enum))}]"
        for key in ("anyOf", "oneOf"):
            options = schema.get(key)
            if isinstance(options, list) and options:
                return _union([self.render(o, hint, depth + 1) for o in options])
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and all_of:
            merged: dict[str, Any] = {k: v for k, v in schema.items() if k != "allOf"}
            for part in all_of:
                if isinstance(part, Mapping):
                    part = self._deref(part)
                    for k, v in part.items():
                        if k == "properties" and isinstance(v, Mapping):
                            merged["properties"] = {**merged.get("properties", {}), **v}
                        elif k == "required" and isinstance(v, list):
                            merged["required"] = [*merged.get("required", []), *v]
                        else:
                            merged.setdefault(k, v)
            return self.render(merged, hint, depth + 1)
        typ = schema.get("type")
        if isinstance(typ, list):
            return _union([self._typed(str(t), schema, hint, depth) for t in typ])
        if typ is None:
            typ = "object" if "properties" in schema else None
            if typ is None:
                return self.any()
        return self._typed(str(typ), schema, hint, depth)

    def _typed(self, typ: str, schema: Mapping[str, Any], hint: str, depth: int) -> str:
        simple = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
        if typ in simple:
            return simple[typ]
        if typ == "null":
            return "None"
        if typ == "array":
            items = schema.get("items")
            inner = (
                self.render(items, hint + "Item", depth + 1)
                if isinstance(items, Mapping)
                else self.any()
            )
            return f"list[{inner}]"
        if typ == "object":
            return self._object(schema, hint, depth)
        return self.any()

    def _object(self, schema: Mapping[str, Any], hint: str, depth: int) -> str:
        props = schema.get("properties")
        if not isinstance(props, Mapping) or not props:
            extra = schema.get("additionalProperties")
            if isinstance(extra, Mapping) and extra:
                return f"dict[str, {self.render(extra, hint + 'Value', depth + 1)}]"
            return self.dict_any()
        if not self.code or self.names is None:
            return "dict"
        required = set(schema.get("required") or [])
        fields = []
        for key, sub in props.items():
            ann = self.render(sub, hint + _camel(str(key)), depth + 1)
            if key not in required:
                ann = f"_t.NotRequired[{ann}]"
            fields.append(f"{str(key)!r}: {ann}")
        name = self.names.take(hint)
        self.defs.append(f"{name} = _t.TypedDict({name!r}, {{{', '.join(fields)}}})")
        return name

    def _deref(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = self._resolve(ref)
            if isinstance(target, Mapping):
                return target
        return schema

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            return None
        node: Any = self.root
        for raw in ref[1:].lstrip("/").split("/") if ref != "#" else []:
            part = raw.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and part in node:
                node = node[part]
            else:
                return None
        return node

    def _ref(self, ref: str, depth: int) -> str:
        if ref in self._refs:
            return self._refs[ref]
        target = self._resolve(ref)
        if target is None or ref in self._stack:
            return self.dict_any() if self.code else "dict"
        self._stack.append(ref)
        try:
            out = self.render(target, _camel(ref.rsplit("/", 1)[-1]), depth + 1)
        finally:
            self._stack.pop()
        self._refs[ref] = out
        return out


@dataclass(frozen=True, slots=True)
class Param:
    name: str  # Python identifier
    original: str  # property name in the schema
    required: bool
    annotation: str
    default: Any  # _NO_DEFAULT for required parameters
    description: str = ""

    def text(self) -> str:
        if self.default is _NO_DEFAULT:
            return f"{self.name}: {self.annotation}"
        return f"{self.name}: {self.annotation} = {_py_literal(self.default)}"


def parameters(spec: ToolSpec, renderer: TypeRenderer, hint: str) -> list[Param]:
    """The function's parameters: required ones first, in schema order; names made unique."""
    schema = spec.input_schema or {}
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = set(schema.get("required") or [])
    taken: set[str] = set()
    req: list[Param] = []
    opt: list[Param] = []
    for key, sub in props.items():
        base = py_identifier(str(key))
        name, i = base, 2
        while name in taken or name in _RESERVED:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        ann = renderer.render(sub, hint + _camel(str(key)), 1)
        desc = str(sub.get("description", "")) if isinstance(sub, Mapping) else ""
        if key in required:
            req.append(Param(name, str(key), True, ann, _NO_DEFAULT, desc))
            continue
        default = sub.get("default", None) if isinstance(sub, Mapping) else None
        if default is None or _py_literal(default) is None:
            if ann != renderer.any() and "None" not in ann.split(" | "):
                ann = f"{ann} | None"
            default = None
        opt.append(Param(name, str(key), False, ann, default, desc))
    return req + opt


def _params_text(params: Sequence[Param]) -> str:
    parts: list[str] = []
    star = False
    for p in params:
        if not p.required and not star:
            parts.append("*")
            star = True
        parts.append(p.text())
    return ", ".join(parts)


def _return_annotation(spec: ToolSpec, renderer: TypeRenderer, hint: str) -> str:
    out = spec.output_schema
    if not isinstance(out, Mapping):
        return renderer.any()
    key = wrapped_result_key(out)
    if key is not None:
        return renderer.render(out["properties"][key], hint + "Result", 1)
    return renderer.render(out, hint + "Result", 1)


def signature_text(spec: ToolSpec, py_name: str | None = None) -> str:
    """The signature discovery shows: ``name(a: int, *, b: str | None = None) -> dict``."""
    renderer = TypeRenderer(spec.input_schema)
    params = parameters(spec, renderer, "")
    ret = _return_annotation(spec, TypeRenderer(spec.output_schema), "")
    return f"{py_name or spec.py_name}({_params_text(params)}) -> {ret}"


def _doc_literal(text: str, indent: str) -> str:
    safe = (
        '"""' not in text
        and "\\" not in text
        and not text.endswith('"')
        and all(c.isprintable() or c == "\n" for c in text)
    )
    if not safe:
        return repr(text)
    body = "\n".join((indent + ln if ln else ln) for ln in text.split("\n")).removeprefix(indent)
    return f'"""{body}\n{indent}"""' if "\n" in text else f'"""{body}"""'


def docstring(spec: ToolSpec, params: Sequence[Param]) -> str:
    lines = [spec.description.strip() or f"Call tool {spec.name!r} of server {spec.server!r}."]
    documented = [p for p in params if p.description or p.name != p.original]
    if documented:
        lines += ["", "Args:"]
        for p in documented:
            note = f"(sent as {p.original!r})" if p.name != p.original else ""
            desc = " ".join([*p.description.split(), note]).strip()
            lines.append(f"    {p.name}: {desc}")
    if spec.py_name != spec.name or spec.py_server != spec.server:
        lines += ["", f"Original name: server {spec.server!r}, tool {spec.name!r}."]
    return "\n".join(lines)


def function_source(
    spec: ToolSpec, py_name: str, names: Names, async_name: str | None
) -> tuple[list[str], str]:
    """(TypedDict definitions, function definitions) for one tool."""
    hint = _camel(py_name)
    renderer = TypeRenderer(spec.input_schema, names)
    params = parameters(spec, renderer, hint)
    ret_renderer = TypeRenderer(spec.output_schema, names)
    ret = _return_annotation(spec, ret_renderer, hint)
    doc = _doc_literal(docstring(spec, params), "    ")
    body = [
        "    _a: dict[str, _t.Any] = {"
        + ", ".join(f"{p.original!r}: {p.name}" for p in params if p.required)
        + "}"
    ]
    for p in params:
        if not p.required:
            body.append(f"    _put(_a, {p.original!r}, {p.name}, {_py_literal(p.default)})")
    payload = f"{{'server': {spec.server!r}, 'tool': {spec.name!r}, 'args': _a}}"
    head = f"({_params_text(params)}) -> {ret}:"
    out = [
        f"def {_private(py_name)}{head}",
        f"    {doc}",
        *body,
        f"    return _bridge.call('tools.call', {payload})",
    ]
    if async_name:
        out += [
            "",
            "",
            f"async def {_private(async_name)}{head}",
            f"    {doc}",
            *body,
            f"    return await _bridge.acall('tools.call', {payload})",
        ]
    return renderer.defs + ret_renderer.defs, "\n".join(out)


_PREAMBLE = '''\
import typing as _t

from codemode_worker import bridge as _bridge


def _put(a: dict[str, _t.Any], key: str, value: _t.Any, default: _t.Any) -> None:
    """Send an optional argument only when it was given (not None, not the default)."""
    if value is not None and (value.__class__ is not default.__class__ or value != default):
        a[key] = value
'''


@dataclass(frozen=True, slots=True)
class StubTool:
    """A tool as the stub generator needs it: the spec plus its collision-free name."""

    spec: ToolSpec
    py_name: str
    async_name: str | None


def stub_tools(items: Sequence[tuple[ToolSpec, str]]) -> list[StubTool]:
    """Attach async variant names; ``x_async`` is skipped when a real tool has that name."""
    taken = {name for _, name in items}
    return [
        StubTool(spec, name, None if f"{name}_async" in taken else f"{name}_async")
        for spec, name in items
    ]


_BUILTINS = frozenset(dir(builtins))


def _private(name: str) -> str:
    """The name a tool's function is defined under: a builtin's name (which annotations
    evaluated after it would find instead) gets ``_f_`` before it (mapped names never start
    with ``_`` and a letter), and its own name once every function is defined."""
    return f"_f_{name}" if name in _BUILTINS else name


def _module(doc: str, defs: list[str], funcs: list[str], exports: list[str]) -> str:
    parts = [_doc_literal(doc, ""), "", _PREAMBLE]
    if defs:
        parts += ["", *defs]
    for f in funcs:
        parts += ["", "", f]
    parts += ["", ""]
    shadowing = [n for n in exports if _private(n) != n]
    for name in shadowing:
        f = _private(name)
        parts += [f"{f}.__name__ = {f}.__qualname__ = {name!r}", f"{name} = {f}"]
    if shadowing:
        parts += [f"del {', '.join(_private(n) for n in shadowing)}", ""]
    parts += [f"__all__ = {exports!r}", ""]
    return "\n".join(parts)


def server_module_source(server: str, tools: Sequence[StubTool]) -> str:
    """One self-contained module with every tool of ``server`` (backs ``import servers.x``)."""
    names = Names(n for t in tools for n in (t.py_name, t.async_name) if n)
    defs: list[str] = []
    funcs: list[str] = []
    exports: list[str] = []
    for t in tools:
        d, f = function_source(t.spec, t.py_name, names, t.async_name)
        defs += d
        funcs.append(f)
        exports += [n for n in (t.py_name, t.async_name) if n]
    listing = ", ".join(t.py_name for t in tools) or "(none)"
    doc = f"Tools of server {server!r}: {listing}."
    return _module(doc, defs, funcs, exports)


def tool_module_source(tool: StubTool) -> str:
    names = Names(n for n in (tool.py_name, tool.async_name) if n)
    defs, func = function_source(tool.spec, tool.py_name, names, tool.async_name)
    exports = [n for n in (tool.py_name, tool.async_name) if n]
    doc = f"Tool {tool.spec.name!r} of server {tool.spec.server!r}."
    return _module(doc, defs, [func], exports)


def package_source(servers: Mapping[str, str]) -> str:
    """``servers/__init__.py``: names the server packages (Python name -> original)."""
    listing = ", ".join(sorted(servers)) or "(none)"
    return "\n".join(
        [
            _doc_literal(
                f"Tool servers: {listing}. Import one: from servers.<server> import <tool>.", ""
            ),
            "",
            f"SERVERS = {dict(sorted(servers.items()))!r}",
            f"__all__ = {sorted(servers)!r}",
            "",
        ]
    )


def server_init_source(server: str, tools: Sequence[StubTool]) -> str:
    """``servers/<server>/__init__.py`` on disk: re-exports each tool's module."""
    lines = [_doc_literal(f"Tools of server {server!r}.", ""), ""]
    exports: list[str] = []
    for t in tools:
        names = [n for n in (t.py_name, t.async_name) if n]
        lines.append(f"from .{t.py_name} import {', '.join(names)}")
        exports += names
    lines += ["", f"__all__ = {exports!r}", ""]
    return "\n".join(lines)


def write_atomic(path: Path, text: str) -> None:
    """Write through a temp file in the same directory, then rename: never half-written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class StubSource(Protocol):
    """What ``generate_tree`` needs (a ``ToolRegistry``): every server's tools, listed."""

    async def stub_items(self) -> list[tuple[str, str, list[tuple[ToolSpec, str]]]]: ...


async def generate_tree(registry: StubSource, out_dir: str | os.PathLike[str]) -> list[Path]:
    """Write ``servers/`` (package, one package per server, one module per tool) under ``out_dir``.

    Returns the files written. Modules of servers that disappeared are left alone.
    """
    root = Path(out_dir) / "servers"
    written: list[Path] = []
    servers: dict[str, str] = {}
    for py_server, original, items in await registry.stub_items():
        servers[py_server] = original
        tools = stub_tools(items)
        pkg = root / py_server
        for t in tools:
            write_atomic(pkg / f"{t.py_name}.py", tool_module_source(t))
            written.append(pkg / f"{t.py_name}.py")
        write_atomic(pkg / "__init__.py", server_init_source(original, tools))
        written.append(pkg / "__init__.py")
    write_atomic(root / "__init__.py", package_source(servers))
    written.append(root / "__init__.py")
    return written


def compile_check(source: str, filename: str = "<stub>") -> None:
    """Raise ``SyntaxError`` if ``source`` is not valid Python (used by tests and the CLI)."""
    compile(source, filename, "exec", dont_inherit=True)


__all__ = [
    "Names",
    "StubTool",
    "TypeRenderer",
    "generate_tree",
    "package_source",
    "server_module_source",
    "signature_text",
    "stub_tools",
    "tool_module_source",
    "write_atomic",
]
