"""Config problems in the user's words, in one place.

pydantic says "Input should be a valid tuple" about ``"args": "x"``; a user wrote JSON, in
which there are no tuples. :func:`explain` turns a pydantic error into what was expected,
in JSON's words and read from the field's own type ("expected a list of strings, got a
string: "x""); :func:`did_you_mean` suggests the closest known name; :func:`excerpt` shows
a line of a file with a caret under the column.
"""

from __future__ import annotations

import difflib
import json
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

__all__ = ["did_you_mean", "excerpt", "expected", "explain", "kind_of", "shown"]

_SCALARS: dict[Any, tuple[str, str]] = {
    str: ("a string", "strings"),
    int: ("a whole number", "whole numbers"),
    float: ("a number", "numbers"),
    bool: ("true or false", "true/false values"),
}
_BOUNDS = {
    "greater_than": ("greater than", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("less than", "lt"),
    "less_than_equal": ("at most", "le"),
}


def did_you_mean(word: str, candidates: Iterable[str], *, value: bool = False) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate (a JSON ``"x"`` for a ``value``),
    or ``""``."""
    close = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    if not close:
        return ""
    return f" (did you mean {shown(close[0]) if value else repr(close[0])}?)"


def excerpt(text: str, line: int, column: int) -> str:
    """The ``line`` (1-based) of ``text`` with a caret under ``column``, indented."""
    lines = text.splitlines()
    if not 1 <= line <= len(lines):
        return ""
    row = lines[line - 1].rstrip()
    pad = "".join(c if c == "\t" else " " for c in row[: max(column - 1, 0)])
    gutter = str(line)
    return f"\n  {gutter} | {row}\n  {' ' * len(gutter)} | {pad}^"


def shown(value: Any, limit: int = 40) -> str:
    """A value as the user wrote it (JSON), cut to ``limit`` characters."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # a bound of 0 is shown as 0, not 0.0
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def kind_of(value: Any) -> str:
    """What a user wrote, in JSON's words: ``the string "x"``, ``a list``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return f"the number {shown(value)}"
    if isinstance(value, str):
        return f"the string {shown(value)}"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "a list"
    return type(value).__name__


def _optional(annotation: Any) -> Any:
    """``X`` for ``X | None``; unions of more than one type are left alone."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def expected(annotation: Any) -> str | None:
    """What a field of this type takes, in JSON's words; None when there is no short way."""
    annotation = _optional(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation in _SCALARS:
        return _SCALARS[annotation][0]
    if origin is Literal:
        return "one of " + ", ".join(shown(a) for a in args)
    if origin in (list, tuple, set, frozenset, Sequence):
        item = _optional(args[0]) if args else Any
        return f"a list of {_SCALARS[item][1] if item in _SCALARS else 'values'}"
    if origin in (dict, Mapping):
        item = _optional(args[1]) if len(args) == 2 else Any
        return f"an object of {_SCALARS[item][1] if item in _SCALARS else 'values'}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "an object"
    return None


def _annotation_at(model: type[BaseModel], loc: Sequence[Any]) -> Any:
    """The type declared at ``loc`` inside ``model`` (None when it cannot be followed)."""
    info = model.model_fields.get(str(loc[0])) if loc else None
    annotation: Any = info.annotation if info is not None else None
    for part in loc[1:]:
        annotation = _optional(annotation)
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            sub = annotation.model_fields.get(str(part))
            annotation = sub.annotation if sub is not None else None
        elif origin in (list, tuple, set, frozenset, Sequence) and isinstance(part, int):
            annotation = args[0] if args else None
        elif origin in (dict, Mapping) and len(args) == 2:
            annotation = args[1]
        else:
            return None
    return annotation


def explain(err: Mapping[str, Any], model: type[BaseModel]) -> str:
    """One pydantic error about ``model`` as a user reads it: what was expected, what came."""
    kind = str(err.get("type", ""))
    loc = tuple(err.get("loc", ()))
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        return f"unknown setting{did_you_mean(str(loc[-1]), model.model_fields) if loc else ''}"
    if kind in _BOUNDS:
        words, key = _BOUNDS[kind]
        return f"must be {words} {shown(ctx.get(key))}, got {shown(value)}"
    annotation = _annotation_at(model, loc)
    if kind == "literal_error":
        hint = ""
        if isinstance(value, str):
            choices = [str(a) for a in typing.get_args(_optional(annotation))]
            hint = did_you_mean(value, choices, value=True)
        want = expected(annotation) or f"one of {ctx.get('expected', '?')}"
        return f"expected {want}, got {kind_of(value)}{hint}"
    if kind.endswith(("_type", "_parsing")) or kind == "int_from_float":
        described = expected(annotation)
        if described is not None:
            return f"expected {described}, got {kind_of(value)}"
    if kind in ("value_error", "assertion_error"):
        return (
            str(err.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        )
    return str(err.get("msg", kind))
