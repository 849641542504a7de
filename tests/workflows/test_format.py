"""The workflow format: validated by its published schema, errors with file, line, field."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from codemode import ConfigError
from codemode.workflows import load_workflow, schema
from codemode.workflows.errors import WorkflowError
from codemode.workflows.expr import evaluate, render

PUBLISHED = Path(__file__).resolve().parents[2] / "src/codemode/workflows/workflow.schema.json"


def test_the_published_schema_is_the_one_the_engine_validates_with() -> None:
    assert json.loads(PUBLISHED.read_text()) == schema()


def test_a_bad_file_names_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "name: bad\n"
        "steps:\n"
        "  - code: '1'\n"
        "    timeout: -2\n"
        "  - tool: nodot\n"
        "  - foreach: '${[1]}'\n"
        "    do:\n"
        "      - code: '1'\n"
        "        tool: a.b\n"
    )
    with pytest.raises(ConfigError) as info:
        load_workflow(path)
    text = str(info.value)
    assert f"{path}:4:14: steps[0].timeout: Input should be greater than 0" in text
    assert f"{path}:5:11: steps[1].tool: Value error, 'nodot': name tools as server.tool" in text
    assert f"{path}:8:9: steps[2].do[0]: Value error, a step has exactly one kind" in text


def test_expressions_and_step_types_are_checked_before_a_run(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text("steps:\n  - set: {x: '${__import__(\"os\")}'}\n  - frobnicate: {a: 1}\n")
    with pytest.raises(ConfigError) as info:
        load_workflow(path)
    text = str(info.value)
    assert f"{path}:2:5: step step1: only these functions can be called" in text
    assert f"{path}:3:5: step step2: unknown step type 'frobnicate'" in text


@pytest.mark.parametrize(
    "expression",
    [
        "x.__class__",
        "x['__class__']",
        "().__class__.__bases__",
        "open('/etc/passwd')",
        "eval('1')",
        "[c for c in 'ab']",
        "lambda: 1",
        "2 ** 100000",
        "'a' * 10000000",
        "[0] * 2000000",
        "len.__self__",
        "(x := 1)",
    ],
)
def test_expressions_cannot_reach_python(expression: str) -> None:
    with pytest.raises(WorkflowError):
        evaluate(expression, {"x": {"a": 1}})


def test_expressions_read_json_values() -> None:
    scope = {"r": {"items": [{"n": 2}, {"n": 5}]}, "inputs": {"k": "v"}}
    assert evaluate("r.items[1].n * 2 if true else 0", scope) == 10
    assert evaluate("len(r['items']) > 1 and inputs.k == 'v'", scope) is True
    assert render("${r.items[0]}", scope) == {"n": 2}  # one expression keeps its type
    assert render("n=${r.items[0].n}, k=${inputs.k}, $${literal}", scope) == (
        "n=2, k=v, ${literal}"
    )
    assert render({"a": ["${inputs.k}"]}, scope) == {"a": ["v"]}


@pytest.mark.parametrize(
    "expression",
    [
        "join(big, [1, 2, 3])",  # 3 MB of separators
        "str([big, big])",
        "[big, big, big, big, big, big, big, big, big, big, big]",  # 11 MB as one value
        "'%0999999999d' % 1",
        "'%s' % big",
        "sum([[1]] * 1000, [])",
        " * ".join(["int('9' * 4000)"] * 6),  # 80,000 bits
    ],
)
def test_expressions_cannot_grow_values_far_beyond_their_parts(expression: str) -> None:
    scope = {"big": "x" * 1_000_000}
    with pytest.raises(WorkflowError):
        evaluate(expression, scope)
    assert evaluate("big", scope) == scope["big"]  # a plain read of a big value is fine
    assert evaluate("[big]", scope) == [scope["big"]]


@pytest.mark.parametrize(
    "expression",
    [
        "[[1] * 3000] * 3000",  # 9,000,000 items from shared references
        "[[[1] * 999] * 1000] * 2",
        "str([[0] * 1000] * 1000)",
        "join(',', [[0] * 1000] * 1000)",
        "join([[0] * 1000] * 1000, [1, 2])",
    ],
)
def test_copies_of_a_list_weigh_what_they_print_to_and_cost_what_they_share(
    expression: str,
) -> None:
    """``[[1] * 4000] * 4000`` holds two lists but prints to 16,000,000 items: it is
    refused when built, and weighing it walks its distinct parts, not every item (the
    walk held the event loop for seconds, per expression)."""
    t0 = time.process_time()
    for _ in range(5):
        with pytest.raises(WorkflowError, match="more than"):
            evaluate(expression, {})
        with pytest.raises(WorkflowError, match="more than"):
            evaluate(f"[{expression}, 1]", {})
    # Generous (the machine may be loaded): item by item it took seconds each time.
    assert time.process_time() - t0 < 5


def test_a_step_cannot_repeat_a_big_value_without_bound() -> None:
    """Each expression is bounded alone; a step's thousand references to one big value
    (a tool's arguments, a journal line, a text) are bounded together."""
    scope = {"big": "x" * 3_000_000, "names": ["a", "b"]}
    assert render({"a": "${big}", "n": "${len(big)}"}, scope) == {"a": scope["big"], "n": 3_000_000}
    with pytest.raises(WorkflowError, match="in all"):
        render({f"k{i}": "${big}" for i in range(5)}, scope)
    with pytest.raises(WorkflowError, match="in all"):
        render("${big}" * 5, scope)
    assert render(["${names}"] * 1000, scope) == [["a", "b"]] * 1000


@pytest.mark.parametrize(
    "expression",
    [
        "int(float('inf'))",  # OverflowError
        "round(float('inf'))",
        "int('9' * 300 + '0' * 300) / 1",  # too large for a float
        "keys(1)",  # AttributeError
        "values('x')",
        "items([1])",
    ],
)
def test_a_failing_function_is_a_workflow_error_whatever_python_raises(expression: str) -> None:
    with pytest.raises(WorkflowError, match="failed"):
        evaluate(expression, {})


def _repeated(part: str) -> str:
    """``[part, part, ...]`` as long as an expression may be."""
    return "[" + ", ".join([part] * (1990 // (len(part) + 2))) + "]"


@pytest.mark.parametrize(
    "part",
    [
        "range(1000000) == range(1000000)",  # ~60 of them: seconds of the engine's loop
        "sorted(range(1000000))[0]",
        "'x' in big",
        "big == big + ''",
        "len(split(big))",
    ],
)
def test_an_expression_that_would_hold_the_engine_for_seconds_is_refused(part: str) -> None:
    scope = {"big": "x " * 500_000}
    with pytest.raises(WorkflowError, match="too much work"):
        evaluate(_repeated(part), scope)
    evaluate(part, scope)  # once is fine


def test_cheap_reads_of_big_values_are_not_counted_as_work() -> None:
    scope = {"big": "x" * 15_000_000, "items": list(range(100_000))}
    assert evaluate(_repeated("len(big)"), scope)[0] == 15_000_000
    assert evaluate("items[-1] if big and items else 0", scope) == 99_999
