"""Check a tool call's arguments against its input schema, on the host, before the call.

Why here and not in the upstream server: the agent gets one clear, aggregated message
(missing, unknown and mistyped fields, plus the signature) instead of whatever the server
makes of bad input, and no round trip is spent on a call that cannot succeed.

Validators are compiled once per tool (``ArgumentValidator``); checking a small argument
dict costs a few microseconds. The dialect is the one the schema names in ``$schema``
(Draft 7, 2019-09, 2020-12...), Draft 2020-12 when it names none.

Unknown top-level arguments are refused unless the schema allows extra properties
explicitly (``additionalProperties`` true or a schema, or ``patternProperties``): JSON
Schema would accept them, but for an agent an unknown keyword is nearly always a typo.

Schemas come from untrusted servers, so the host's check never does what a schema could
turn against the host: ``$ref`` resolves only inside the schema (no remote retrieval, which
jsonschema's default still does: a server could make the host fetch any URL), and regular
expressions (``pattern``, ``patternProperties``) are left to the server (a pattern such as
``^(a+)+$`` backtracks for minutes on the host's event loop). A ``$ref`` that does not
resolve leaves the value under it to the server; the rest is still checked.

A check that cannot finish fails closed: a schema that refers to itself without end, or
arguments nested deeper than the host's stack, raise ``Uncheckable``, and the call is refused
with that reason (never sent unchecked, and later calls are still checked). Only a schema
that is not JSON Schema at all is skipped, so that a server's broken schema does not make its
tool uncallable.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from jsonschema.protocols import Validator
from referencing import Registry
from referencing.exceptions import Unresolvable

from codemode.errors import ToolArgumentError
from codemode.tools.spec import JSONSchema, py_identifier

log = logging.getLogger(__name__)


class Uncheckable(Exception):
    """The host could not finish checking a value against a schema (it recursed too deep)."""

    def __init__(self, what: str = "the value") -> None:
        super().__init__(
            f"{what} could not be checked against the schema (it refers to itself without "
            "end, or the value is nested too deeply), so it is refused"
            if what != "schema"
            else "the schema is nested too deeply to be checked, so every value is refused"
        )


_JSON_TYPES = {
    dict: "object",
    list: "array",
    tuple: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}


def _type_name(value: Any) -> str:
    return _JSON_TYPES.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


class ArgumentValidator:
    """A compiled check for one tool's arguments."""

    __slots__ = (
        "_aliases",
        "_allow_extra",
        "_broken",
        "_properties",
        "_required",
        "_simple",
        "_validator",
        "schema",
    )

    def __init__(self, schema: JSONSchema | None) -> None:
        schema = dict(schema or {})
        schema.setdefault("type", "object")
        self.schema = schema
        props = schema.get("properties")
        self._properties: dict[str, Any] = dict(props) if isinstance(props, Mapping) else {}
        required = schema.get("required")
        self._required: list[str] = (
            [r for r in required if isinstance(r, str)] if isinstance(required, list) else []
        )
        extra = schema.get("additionalProperties")
        self._allow_extra = (
            extra is True
            or isinstance(extra, Mapping)
            or "patternProperties" in schema
            or (not self._properties and extra is None)
        )
        # Python spellings of property names that are not identifiers (``from_``, ``user_id``).
        self._aliases: dict[str, str] = {}
        for prop in self._properties:
            alias = py_identifier(prop)
            if alias != prop and alias not in self._properties:
                self._aliases.setdefault(alias, prop)
        self._broken: str | None = None
        try:
            self._validator: Validator | None = compile_schema(schema)
        except Uncheckable as exc:  # every call is refused with this reason
            self._validator, self._broken = None, str(exc)
        self._simple = _simple_rules(schema) if self._validator is not None else None

    @property
    def properties(self) -> dict[str, Any]:
        return self._properties

    @property
    def required(self) -> list[str]:
        return self._required

    def normalize(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Map Python spellings (``from_``) back to the schema's property names (``from``)."""
        if not self._aliases:
            return dict(args)
        out: dict[str, Any] = {}
        for key, value in args.items():
            if key not in self._properties and key in self._aliases:
                key = self._aliases[key]
            out[key] = value
        return out

    def problems(self, args: Mapping[str, Any]) -> list[str]:
        """Every reason ``args`` is refused, one sentence each; empty when they are fine."""
        if self._broken is not None:
            return [self._broken]
        if self._simple is not None and self._fast_ok(args):
            return []
        missing: list[str] = []
        unknown: list[str] = []
        other: list[str] = []
        if not self._allow_extra:
            unknown = [k for k in args if k not in self._properties]
        if self._validator is not None:
            try:
                errors = schema_errors(self._validator, dict(args))
            except Uncheckable:
                return [str(Uncheckable("the arguments"))]
            for err in errors:
                _classify(err, missing, unknown, other)
        out: list[str] = []
        if missing:
            out.append(
                "missing required argument"
                + ("s " if len(missing) > 1 else " ")
                + ", ".join(repr(m) for m in dict.fromkeys(missing))
            )
        for name in dict.fromkeys(unknown):
            hint = difflib.get_close_matches(name, list(self._properties), n=1, cutoff=0.6)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            out.append(f"unknown argument {name!r}{extra}")
        out.extend(other)
        return out

    def _fast_ok(self, args: Mapping[str, Any]) -> bool:
        """True only if ``args`` are certainly valid; False sends them to the full validator.

        Flat schemas of primitive types (most tools) are checked here in ~1 µs instead of
        ~13 µs through jsonschema; anything unusual falls through.
        """
        for name in self._required:
            if name not in args:
                return False
        rules = self._simple
        assert rules is not None
        for key, value in args.items():
            rule = rules.get(key)
            if rule is None:
                if key in self._properties or not self._allow_extra:
                    return False
                continue
            types, enum = rule
            if types is not None and not any(_TYPE_CHECKS[t](value) for t in types):
                return False
            if enum is not None and not any(type(value) is type(e) and value == e for e in enum):
                return False
        return True

    def check(
        self, args: Mapping[str, Any], *, server: str = "", tool: str = "", signature: str = ""
    ) -> dict[str, Any]:
        """Return the normalized arguments, or raise ``ToolArgumentError`` listing every problem."""
        norm = self.normalize(args)
        problems = self.problems(norm)
        if problems:
            raise ToolArgumentError(format_problems(problems, signature), server=server, tool=tool)
        return norm


_TYPE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}
_ANNOTATIONS = frozenset(
    {
        "description",
        "title",
        "default",
        "examples",
        "format",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
    }
)
_TOP_KEYS = _ANNOTATIONS | {"type", "properties", "required", "additionalProperties", "$schema"}
_Rule = tuple[tuple[str, ...] | None, tuple[Any, ...] | None]


def _simple_rules(schema: JSONSchema) -> dict[str, _Rule] | None:
    """Per-property (types, enum) when the whole schema is flat and primitive, else None."""
    if not set(schema) <= _TOP_KEYS or schema.get("type") != "object":
        return None
    if not isinstance(schema.get("additionalProperties", False), bool):
        return None
    props = schema.get("properties", {})
    if not isinstance(props, Mapping):
        return None
    rules: dict[str, _Rule] = {}
    for name, sub in props.items():
        if not isinstance(sub, Mapping) or not set(sub) <= _ANNOTATIONS | {"type", "enum"}:
            return None
        typ = sub.get("type")
        types = (typ,) if isinstance(typ, str) else tuple(typ) if isinstance(typ, list) else None
        if typ is not None and (types is None or not all(t in _TYPE_CHECKS for t in types)):
            return None
        enum = sub.get("enum")
        if enum is not None and (
            not isinstance(enum, list)
            or not all(e is None or isinstance(e, str | int | float) for e in enum)
        ):
            return None
        rules[str(name)] = (types, tuple(enum) if enum is not None else None)
    return rules


def format_problems(problems: list[str], signature: str = "") -> str:
    text = "invalid arguments: " + "; ".join(problems)
    if signature:
        text += f"\nsignature: {signature}"
    return text


def _no_check(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """A keyword the host leaves to the server (it would run the server's regexes)."""
    return iter(())


_HOST_SAFE: dict[type, type] = {}


def _lenient_ref(original: Any) -> Any:
    """A ``$ref`` keyword that leaves the value under a reference it cannot resolve to the
    server (the empty registry never fetches one) instead of abandoning the whole check."""

    def ref(validator: Any, value: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
        try:
            yield from original(validator, value, instance, schema)
        except Unresolvable:
            return

    return ref


def _host_safe(cls: type[Validator]) -> type[Validator]:
    """``cls`` without the keywords that run a schema's regular expressions on the host, and
    with references that do not resolve left to the server.

    ``additionalProperties`` beside ``patternProperties`` needs the patterns to know which
    keys are extra, and ``unevaluatedProperties`` may too: both are skipped there."""
    safe = _HOST_SAFE.get(cls)
    if safe is None:
        original = cls.VALIDATORS.get("additionalProperties")

        def additional(
            validator: Any, value: Any, instance: Any, schema: Any
        ) -> Iterator[ValidationError]:
            if original is None or "patternProperties" in schema:
                return iter(())
            return original(validator, value, instance, schema) or iter(())

        skip = {"pattern", "patternProperties", "unevaluatedProperties"} & set(cls.VALIDATORS)
        keywords: dict[str, Any] = dict.fromkeys(skip, _no_check)
        keywords["additionalProperties"] = additional
        for name in ("$ref", "$dynamicRef", "$recursiveRef"):
            if name in cls.VALIDATORS:
                keywords[name] = _lenient_ref(cls.VALIDATORS[name])
        safe = _HOST_SAFE[cls] = jsonschema.validators.extend(cls, keywords)  # type: ignore[no-untyped-call]
    return safe


def compile_schema(schema: JSONSchema) -> Validator | None:
    """A validator for an untrusted ``schema`` that is safe to run on the host (see the
    module's docstring), or None when the schema is not valid JSON Schema.

    Raises ``Uncheckable`` when the schema is nested too deeply to be checked itself."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        # A server publishing a broken schema must not make its tool uncallable.
        log.warning("input schema is not valid JSON Schema, arguments not checked: %s", exc.message)
        return None
    except RecursionError:
        raise Uncheckable("schema") from None
    # An empty registry: ``$ref`` resolves within the schema, never over the network.
    validator: Validator = _host_safe(cls)(schema, registry=Registry())
    return validator


def schema_errors(validator: Validator, instance: Any) -> list[ValidationError]:
    """Every error of ``instance``; raises ``Uncheckable`` when the check recursed too deep
    (a schema that is its own ``$ref``, or a deeply nested value)."""
    try:
        return list(validator.iter_errors(instance))
    except RecursionError:
        raise Uncheckable() from None


def schema_problem(validator: Validator, instance: Any) -> str | None:
    """The most relevant error message for ``instance`` (or why it could not be checked),
    None when it passes."""
    try:
        errors = schema_errors(validator, instance)
    except Uncheckable as exc:
        return str(exc)
    err = best_match(errors) if errors else None
    return None if err is None else err.message


def _path(err: jsonschema.ValidationError) -> str:
    parts = [str(p) if not isinstance(p, int) else f"[{p}]" for p in err.absolute_path]
    return ".".join(parts).replace(".[", "[")


def _classify(
    err: jsonschema.ValidationError, missing: list[str], unknown: list[str], other: list[str]
) -> None:
    where = _path(err)
    if err.validator == "required" and isinstance(err.validator_value, list):
        inst = err.instance if isinstance(err.instance, Mapping) else {}
        for name in err.validator_value:
            if name not in inst:
                missing.append(f"{where}.{name}" if where else str(name))
        return
    if err.validator == "additionalProperties" and isinstance(err.instance, Mapping):
        props = err.schema.get("properties", {}) if isinstance(err.schema, Mapping) else {}
        for name in err.instance:
            if name not in props:
                full = f"{where}.{name}" if where else str(name)
                if full not in unknown:
                    unknown.append(full)
        return
    label = f"argument {where!r}" if where else "arguments"
    if err.validator == "type":
        expected = err.validator_value
        exp = " or ".join(expected) if isinstance(expected, list) else str(expected)
        got = _type_name(err.instance)
        other.append(f"{label}: expected {exp}, got {got} {_short(err.instance)}")
    elif err.validator == "enum":
        other.append(
            f"{label}: {_short(err.instance)} is not one of {_short(err.validator_value, 80)}"
        )
    elif err.validator in ("anyOf", "oneOf") and err.context:
        best = jsonschema.exceptions.best_match(err.context)
        other.append(f"{label}: {best.message}")
    else:
        other.append(f"{label}: {err.message}")
