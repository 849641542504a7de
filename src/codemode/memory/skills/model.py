"""What a skill is, and how it is checked without running it.

A skill is ``SKILL.md`` (YAML front matter: name, description, parameters, tags; body:
usage notes) plus Python code whose entry point is ``run(...)``. Validation parses and
compiles the code (``ast``/``compile``, never ``exec``): the host never runs skill code;
the session's worker does.
"""

from __future__ import annotations

import ast
import json
import keyword
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from ...errors import ValidationError

MAX_CODE = 256 * 1024
MAX_NOTES = 64 * 1024
MAX_DESCRIPTION = 4000
MAX_NAME = 64

# Attribute names of the worker's ``skills`` namespace: a skill cannot shadow them.
RESERVED = frozenset(
    [
        "create",
        "get",
        "list",
        "search",
        "invoke",
        "ainvoke",
        "update",
        "delete",
        "rollback",
        "versions",
        "source",
        "refresh",
        "names",
        "info",
    ]
)


@dataclass
class Skill:
    name: str
    description: str
    code: str
    parameters: list[dict[str, Any]] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    notes: str = ""
    version: int = 1
    created: str = ""
    updated: str = ""
    is_async: bool = False
    signature: str = ""

    def meta(self) -> dict[str, Any]:
        """What is stored (and listed) beside the code."""
        return {
            "description": self.description,
            "parameters": self.parameters,
            "tags": self.tags,
            "version": self.version,
            "created": self.created,
            "updated": self.updated,
            "is_async": self.is_async,
            "signature": self.signature,
        }

    @classmethod
    def from_record(cls, name: str, meta: Mapping[str, Any], body: Mapping[str, Any]) -> Skill:
        return cls(
            name=name,
            description=str(meta.get("description", "")),
            code=str(body.get("code", "")),
            parameters=list(meta.get("parameters", [])),
            tags=list(meta.get("tags", [])),
            notes=str(body.get("notes", "")),
            version=int(meta.get("version", 1)),
            created=str(meta.get("created", "")),
            updated=str(meta.get("updated", "")),
            is_async=bool(meta.get("is_async", False)),
            signature=str(meta.get("signature", "")),
        )

    def summary(self) -> dict[str, Any]:
        return summary(self.name, self.meta())

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.summary(),
            "code": self.code,
            "notes": self.notes,
            "skill_md": self.skill_md(),
        }

    def skill_md(self) -> str:
        front: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.parameters:
            front["parameters"] = [
                {k: v for k, v in p.items() if v not in (None, "")} for p in self.parameters
            ]
        if self.tags:
            front["tags"] = self.tags
        front["version"] = self.version
        head = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
        body = self.notes.strip() or f"Call `skills.{self.name}({_call_hint(self.parameters)})`."
        return f"---\n{head}---\n\n{body}\n"


def summary(name: str, meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": meta.get("description", ""),
        "signature": meta.get("signature", ""),
        "parameters": meta.get("parameters", []),
        "tags": meta.get("tags", []),
        "version": meta.get("version", 1),
        "updated": meta.get("updated", ""),
    }


def _call_hint(params: Sequence[Mapping[str, Any]]) -> str:
    return ", ".join(f"{p['name']}=..." for p in params if p.get("required"))


def check_skill_name(name: str) -> str:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise ValidationError(f"skill name {name!r} must be a Python identifier (e.g. fetch_json)")
    if name.startswith("_") or len(name) > MAX_NAME:
        raise ValidationError(
            f"skill name {name!r} must not start with '_' and be at most {MAX_NAME} chars"
        )
    if name in RESERVED:
        raise ValidationError(f"skill name {name!r} is reserved (skills.{name} is a method)")
    return name


@dataclass
class CodeInfo:
    parameters: list[dict[str, Any]]
    is_async: bool
    signature: str
    accepts_any: bool
    docstring: str


def _literal(node: ast.expr) -> Any:
    try:
        value = ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return {"expr": ast.unparse(node)}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return {"expr": ast.unparse(node)}


def analyse_code(code: str, name: str = "skill") -> CodeInfo:
    """Parse and compile ``code`` and describe its ``run``; nothing is executed."""
    if not isinstance(code, str) or not code.strip():
        raise ValidationError("skill code is empty: it must define run(...)")
    if len(code) > MAX_CODE:
        raise ValidationError(
            f"skill code is {len(code):,} chars; the limit is {MAX_CODE:,} chars (MAX_CODE): "
            "split it into smaller skills, or keep big data in an artifact"
        )
    filename = f"<skill {name}>"
    try:
        tree = ast.parse(code, filename=filename)
        compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"line {exc.lineno}" + (f", column {exc.offset}" if exc.offset else "")
        raise ValidationError(f"skill {name!r} has a syntax error at {where}: {exc.msg}") from None
    except (ValueError, RecursionError, MemoryError) as exc:
        raise ValidationError(f"skill {name!r} cannot be compiled: {exc}") from None
    try:
        return _describe(tree, name)
    except RecursionError:
        # ``ast.unparse`` recurses in Python, deeper than the compiler: a default value
        # nested ~600 deep compiles, then cannot be shown.
        raise ValidationError(
            f"skill {name!r}: run's signature is nested too deeply to describe"
        ) from None


def _describe(tree: ast.Module, name: str) -> CodeInfo:
    runs = [
        n
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == "run"
    ]
    if not runs:
        raise ValidationError(
            f"skill {name!r} must define a top-level function run(...) (plain or async)"
        )
    fn = runs[-1]
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += list(args.defaults)
    params: list[dict[str, Any]] = []
    for i, (arg, default) in enumerate(zip(positional, defaults, strict=True)):
        if i < len(args.posonlyargs) and default is None:
            raise ValidationError(
                f"run's parameter {arg.arg!r} is positional-only without a default; "
                "skills are invoked with keyword arguments"
            )
        params.append(_param(arg, default))
    for arg, kw_default in zip(args.kwonlyargs, args.kw_defaults, strict=True):
        params.append(_param(arg, kw_default))
    return CodeInfo(
        parameters=params,
        is_async=isinstance(fn, ast.AsyncFunctionDef),
        signature=f"run({ast.unparse(args)})",
        accepts_any=args.kwarg is not None,
        docstring=ast.get_docstring(fn) or ast.get_docstring(tree) or "",
    )


def _param(arg: ast.arg, default: ast.expr | None) -> dict[str, Any]:
    p: dict[str, Any] = {"name": arg.arg, "required": default is None}
    if arg.annotation is not None:
        p["type"] = ast.unparse(arg.annotation)
    if default is not None:
        p["default"] = _literal(default)
    return p


def merge_parameters(
    info: CodeInfo, given: Mapping[str, Any] | Sequence[Mapping[str, Any]] | None, name: str
) -> list[dict[str, Any]]:
    """Signature parameters, with descriptions (and types) given by the author merged in."""
    params = [dict(p) for p in info.parameters]
    if not given:
        return params
    if isinstance(given, Mapping):
        items = [
            {"name": k, **(v if isinstance(v, Mapping) else {"description": str(v)})}
            for k, v in given.items()
        ]
    elif isinstance(given, Sequence) and not isinstance(given, str):
        items = [dict(p) for p in given if isinstance(p, Mapping)]
    else:
        raise ValidationError("parameters must be a mapping name -> description, or a list")
    by_name = {p["name"]: p for p in params}
    for item in items:
        pname = str(item.get("name", ""))
        if pname not in by_name:
            if not info.accepts_any:
                raise ValidationError(
                    f"skill {name!r} documents parameter {pname!r}, "
                    f"but {info.signature} does not accept it"
                )
            by_name[pname] = {"name": pname, "required": bool(item.get("required", False))}
            params.append(by_name[pname])
        for key in ("description", "type"):
            if item.get(key):
                by_name[pname][key] = str(item[key])
    return params


def check_tags(tags: Sequence[str] | None) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str) or not all(isinstance(t, str) and t.strip() for t in tags):
        raise ValidationError("tags must be a list of non-empty strings")
    return [t.strip() for t in tags][:32]


def parse_skill_md(text: str) -> tuple[dict[str, Any], str]:
    """(front matter, body) of a SKILL.md; the front matter is optional."""
    if not text.startswith("---"):
        return {}, text.strip()
    parts = text.split("\n---", 1)
    if len(parts) != 2:
        raise ValidationError("SKILL.md front matter starts with '---' but never ends")
    try:
        front = yaml.safe_load(parts[0][3:]) or {}
    except yaml.YAMLError as exc:
        raise ValidationError(f"SKILL.md front matter is not valid YAML: {exc}") from None
    if not isinstance(front, dict):
        raise ValidationError("SKILL.md front matter must be a YAML mapping")
    body = parts[1].split("\n", 1)[1] if "\n" in parts[1] else ""
    return front, body.strip()


def invoke_code(name: str, arguments: dict[str, Any]) -> str:
    """The cell that calls skill ``name`` with ``arguments`` (JSON values) as keywords.

    The arguments are written as a Python literal: the cell needs no import (code checks
    flag ``__import__``) and runs the same whatever the agent named its variables.
    """
    literal = repr(dict(arguments))
    try:
        same = ast.literal_eval(literal) == arguments
    except (ValueError, SyntaxError, RecursionError):
        same = False
    if not same:  # a value with no literal (nan...): decode it in the cell
        payload = json.dumps(arguments, ensure_ascii=False)
        return f"import json as _json\nskills.invoke({name!r}, **_json.loads({payload!r}))"
    return f"skills.invoke({name!r}, **{literal})"
