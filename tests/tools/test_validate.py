"""Arguments are checked on the host against the tool's input schema, with clear messages."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.errors import ToolArgumentError
from codemode.tools.validate import ArgumentValidator

SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "days": {"type": "integer", "minimum": 1},
        "units": {"enum": ["c", "f"]},
        "filter": {
            "type": "object",
            "properties": {"limit": {"type": "integer"}},
            "additionalProperties": False,
        },
    },
    "required": ["city", "days"],
}


def check(args: dict[str, Any], schema: dict[str, Any] = SCHEMA, signature: str = "") -> str:
    with pytest.raises(ToolArgumentError) as info:
        ArgumentValidator(schema).check(args, server="w", tool="t", signature=signature)
    return str(info.value)


def test_valid_arguments_pass_and_come_back_unchanged() -> None:
    args = {"city": "Paris", "days": 2, "units": "c"}
    assert ArgumentValidator(SCHEMA).check(args) == args


def test_missing_required_arguments_are_named() -> None:
    msg = check({})
    assert "missing required arguments 'city', 'days'" in msg


def test_an_unknown_argument_is_named_with_a_close_match() -> None:
    msg = check({"city": "Paris", "days": 1, "cty": "x", "zzz": 1})
    assert "unknown argument 'cty' (did you mean 'city'?)" in msg
    assert "unknown argument 'zzz'" in msg


def test_a_mistyped_argument_says_what_was_expected_and_what_came() -> None:
    msg = check({"city": 3, "days": 1})
    assert "argument 'city': expected string, got integer 3" in msg


def test_all_problems_are_reported_at_once_with_the_signature() -> None:
    msg = check({"days": "two", "units": "k"}, signature="w.t(city: str, days: int)")
    assert "missing required argument 'city'" in msg
    assert "argument 'days': expected integer" in msg
    assert "'k' is not one of" in msg
    assert msg.endswith("signature: w.t(city: str, days: int)")
    assert msg.startswith("w.t: invalid arguments")


def test_nested_fields_are_named_by_their_path() -> None:
    msg = check({"city": "a", "days": 1, "filter": {"limit": "x", "extra": 1}})
    assert "argument 'filter.limit': expected integer" in msg
    assert "unknown argument 'filter.extra'" in msg


def test_extra_arguments_pass_when_the_schema_allows_them() -> None:
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": True}
    assert ArgumentValidator(schema).check({"a": 1, "b": 2}) == {"a": 1, "b": 2}


def test_a_schema_without_properties_accepts_any_arguments() -> None:
    assert ArgumentValidator({"type": "object"}).check({"x": 1}) == {"x": 1}
    assert ArgumentValidator(None).check({}) == {}


def test_python_spellings_of_property_names_are_mapped_back() -> None:
    schema = {"type": "object", "properties": {"from": {"type": "string"}, "user-id": {}}}
    out = ArgumentValidator(schema).check({"from_": "a", "user_id": 2})
    assert out == {"from": "a", "user-id": 2}


def test_the_dialect_named_by_the_schema_is_used() -> None:
    # Draft 7 reads an ``items`` list as a tuple; Draft 2020-12 would reject this schema form.
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
        },
    }
    v = ArgumentValidator(schema)
    assert v.check({"pair": ["a", 1]}) == {"pair": ["a", 1]}
    assert "expected integer" in check({"pair": ["a", "b"]}, schema)


def test_a_broken_schema_does_not_make_the_tool_uncallable(
    caplog: pytest.LogCaptureFixture,
) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "no-such-type"}}}
    assert ArgumentValidator(schema).check({"a": 1}) == {"a": 1}
    assert "not valid JSON Schema" in caplog.text


def test_the_fast_path_never_accepts_what_json_schema_refuses() -> None:
    import random

    import jsonschema

    schemas: list[dict[str, Any]] = [
        SCHEMA,
        {
            "type": "object",
            "properties": {"n": {"type": "integer"}, "s": {"type": ["string", "null"]}},
        },
        {"type": "object", "properties": {"e": {"enum": [1, "1", True, None]}}, "required": ["e"]},
        {"type": "object", "properties": {"x": {"type": "number"}}, "additionalProperties": False},
        {"type": "object", "properties": {"x": {}}, "additionalProperties": True},
    ]
    values = [0, 1, -2, 1.5, 1.0, True, False, None, "", "1", "c", [], [1], {}, {"limit": 1}]
    rnd = random.Random(3)
    for schema in schemas:
        validator = ArgumentValidator(schema)
        reference = jsonschema.Draft202012Validator(schema)
        keys = [*schema.get("properties", {}), "other"]
        for _ in range(400):
            chosen = rnd.sample(keys, rnd.randint(0, len(keys)))
            args = {k: rnd.choice(values) for k in chosen}
            if validator._simple is not None and validator._fast_ok(args):
                assert reference.is_valid(args), (schema, args)
            accepted = not validator.problems(args)
            strict_unknown = not validator._allow_extra and any(
                k not in validator.properties for k in args
            )
            assert accepted == (reference.is_valid(args) and not strict_unknown), (schema, args)


def test_flat_schemas_take_the_fast_path_and_nested_ones_do_not() -> None:
    flat = {"type": "object", "properties": {"a": {"type": "string", "description": "x"}}}
    assert ArgumentValidator(flat)._simple is not None
    assert ArgumentValidator(SCHEMA)._simple is None  # nested object with its own rules


def test_a_schema_too_deep_to_check_refuses_every_call() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(3000):
        schema = {"type": "object", "properties": {"a": schema}}
    with pytest.raises(ToolArgumentError, match="nested too deeply to be checked"):
        ArgumentValidator(schema).check({})
