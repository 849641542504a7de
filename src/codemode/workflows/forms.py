"""Form filling: a JSON Schema, fields filled from data or by a person, then submitted.

A ``form`` step (``codemode.workflows.model.Form``) fills each property of its schema from
the first source that yields a value: ``value`` (a value or ``${expression}`` over inputs
and earlier outputs), ``tool`` (+ ``args``, ``pick`` an expression over ``result``),
else, when ``ask`` allows, a person: one question (MCP elicitation or the terminal) with
the schema of the fields still missing, the values found so far as defaults. The whole
form is checked against its schema (fields that do not fit are asked again, once), then
submitted through the ``submit`` tool as a sub-step ``<form>/submit``: its arguments are
``submit_args`` (rendered with ``form`` bound to the filled values) plus the fields, or the
form as the one argument ``as_arg``, or only ``submit_args`` when they use ``${form}``.

Each field is journaled as it is filled, so a form interrupted (a crash, nobody to ask)
resumes with the fields it already had; the submission is a journaled tool step, never
sent twice unless it is idempotent or a person decides so.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any

from .ask import Answer, ask, check
from .errors import StepFailed, Stopped
from .expr import evaluate, expressions, parse, render
from .model import Form, Step

if TYPE_CHECKING:
    from .engine import Engine


async def fill_form(engine: Engine, form: Form, path: str, scope: dict[str, Any]) -> Any:
    from .engine import Waiting

    schema = form.schema_
    props: dict[str, Any] = dict(schema.get("properties", {}))
    values: dict[str, Any] = dict(engine.replay.fields.get(path, {}))

    async def keep(name: str, value: Any) -> None:
        values[name] = value
        await engine.journals.append(
            engine.run_id, {"ev": "field", "step": path, "name": name, "value": value}
        )

    for name in props:
        if name in values:
            continue
        source = form.fields.get(name)
        if source is None:
            continue
        value = await _from_source(engine, source, scope)
        if value is not None:
            await keep(name, value)
    missing = [
        n for n in props if n not in values and (form.fields.get(n) is None or form.fields[n].ask)
    ]
    for _ in range(2):
        bad = _invalid(schema, values, props)
        wanted = [n for n in props if n in missing or n in bad]
        wanted = [n for n in wanted if n not in values or n in bad]
        if not wanted:
            break
        sub = {
            "type": "object",
            "properties": {
                n: {**props[n], **({"default": values[n]} if n in values else {})} for n in wanted
            },
            "required": [n for n in schema.get("required", []) if n in wanted],
        }
        given = engine.answers.pop(path, None)  # resume --answer / run_workflow(answers=)
        if given is not None:
            answer = Answer("accept", dict(given))
        else:
            answer = await ask(engine.asker, str(render(form.message, scope)), sub)
        if answer.action == "unavailable":
            raise Waiting(f"{path} waits for a person to fill: {', '.join(wanted)}", step=path)
        if answer.action != "accept":
            raise Stopped(f"{path}: the form was {answer.action}d", step=path)
        for n in wanted:
            if n in answer.content:
                await keep(n, answer.content[n])
        missing = []
    problem = check(schema, values)
    if problem is not None:
        raise StepFailed(f"{path}: the form does not validate: {problem}", step=path)
    args = dict(render(form.submit_args, {**scope, "form": values}))
    if form.as_arg:
        args[form.as_arg] = values
    elif not _names_form(form.submit_args):
        args.update(values)
    submit = Step.model_validate({"tool": form.submit, "args": _literal(args)})
    result = await engine.step(submit, f"{path}/submit", scope)
    return {"form": values, "result": result}


async def _from_source(engine: Engine, source: Any, scope: dict[str, Any]) -> Any:
    if source.value is not None:
        return render(source.value, scope)
    if source.tool is None:
        return None
    server, _, tool = source.tool.partition(".")
    result = await engine.registry.call(
        server, tool, render(source.args, scope), context=engine.context
    )
    if source.pick:
        where = {**scope, "result": result}
        pick = source.pick
        return render(pick, where) if "${" in pick else evaluate(pick, where)
    return result


def _names_form(value: Any) -> bool:
    """Whether ``submit_args`` place the filled form themselves (``${form...}``)."""
    for text in expressions(value):
        if any(isinstance(n, ast.Name) and n.id == "form" for n in ast.walk(parse(text))):
            return True
    return False


def _invalid(schema: dict[str, Any], values: dict[str, Any], props: dict[str, Any]) -> set[str]:
    bad = set()
    for name, value in values.items():
        if name in props and check(props[name], value) is not None:
            bad.add(name)
    return bad


def _literal(value: Any) -> Any:
    """Values already rendered: escape ``${`` so the sub-step does not render them again."""
    if isinstance(value, str):
        return value.replace("${", "$${")
    if isinstance(value, list):
        return [_literal(v) for v in value]
    if isinstance(value, dict):
        return {k: _literal(v) for k, v in value.items()}
    return value


__all__ = ["fill_form"]
