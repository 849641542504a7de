"""Asking a person: the one function workflows (ask steps, forms, resume decisions) use.

An ``Asker`` is ``async asker(message, schema) -> Answer``; ``schema`` is a JSON Schema of
an object with simple fields (what MCP elicitation accepts). Where the answer comes from
is the surface's business: the CLI prompts on the terminal (``terminal_asker``),
``codemode serve`` sends an MCP elicitation to the client (``codemode.workflows.
server_tools``), tests and scripts pass ``scripted_asker([...])``. With nobody to ask
(``no_asker``) the run stops as ``waiting`` and resumes later with the answer given.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio.to_thread

Action = Literal["accept", "decline", "cancel", "unavailable"]

CONFIRM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"confirm": {"type": "boolean", "description": "Yes to go on."}},
    "required": ["confirm"],
}


@dataclass(frozen=True)
class Answer:
    action: Action
    content: dict[str, Any] = field(default_factory=dict)


Asker = Callable[[str, Mapping[str, Any]], Awaitable[Answer]]


async def ask(asker: Asker | None, message: str, schema: Mapping[str, Any] | None) -> Answer:
    """Ask ``message``; the answer is checked against ``schema`` (re-asked once if it
    does not fit; then declined). No asker: ``unavailable``."""
    if asker is None:
        return Answer("unavailable")
    schema = dict(schema or CONFIRM_SCHEMA)
    for _ in range(2):
        answer = await asker(message, schema)
        if answer.action != "accept":
            return answer
        problem = check(schema, answer.content)
        if problem is None:
            if "confirm" in schema.get("properties", {}) and answer.content.get("confirm") is False:
                return Answer("decline", answer.content)
            return answer
        message = f"{message}\n(The answer did not fit: {problem}. Please answer again.)"
    return Answer("decline")


def check(schema: Mapping[str, Any], content: Any) -> str | None:
    """None when ``content`` fits ``schema``, else the first problem.

    The schema may come from a client of ``serve`` (a workflow it sent): it is applied with
    the tools' host-safe validator, so a ``$ref`` never makes the host fetch a URL (whose
    answer would be quoted back in the problem) and no regex backtracks on the host."""
    from jsonschema.exceptions import best_match

    from codemode.tools.validate import Uncheckable, compile_schema, schema_errors

    try:  # an answer that cannot be checked is refused, never taken unchecked
        validator = compile_schema(dict(schema))
        errors = [] if validator is None else schema_errors(validator, content)
    except Uncheckable as exc:
        return str(exc)
    err = best_match(errors) if errors else None
    if err is None:
        return None
    where = "/".join(str(p) for p in err.absolute_path)
    return f"{where}: {err.message}" if where else err.message


def scripted_asker(answers: Iterable[Mapping[str, Any] | Answer | None]) -> Asker:
    """Answers given in advance, in order (``None`` declines); a test double and a way to
    run a workflow unattended."""
    queue = list(answers)
    asked: list[str] = []

    async def asker(message: str, schema: Mapping[str, Any]) -> Answer:
        asked.append(message)
        if not queue:
            return Answer("unavailable")
        nxt = queue.pop(0)
        if nxt is None:
            return Answer("decline")
        return nxt if isinstance(nxt, Answer) else Answer("accept", dict(nxt))

    asker.asked = asked  # type: ignore[attr-defined]
    return asker


def terminal_asker() -> Asker:
    """Prompt on the terminal, one field at a time (blocking prompts run in a thread)."""
    import click

    def prompt(message: str, schema: Mapping[str, Any]) -> Answer:
        click.echo(f"\n? {message}", err=True)
        out: dict[str, Any] = {}
        props: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        try:
            for name, spec in props.items():
                label = spec.get("title") or spec.get("description") or name
                kind = spec.get("type", "string")
                default = spec.get("default")
                if kind == "boolean":
                    out[name] = click.confirm(f"  {label}", default=bool(default), err=True)
                    continue
                ptype: Any = {"integer": int, "number": float}.get(kind, str)
                if "enum" in spec:
                    ptype = click.Choice([str(v) for v in spec["enum"]])
                value = click.prompt(
                    f"  {label}",
                    default=default
                    if default is not None
                    else ("" if name not in required else None),
                    type=ptype,
                    show_default=default is not None,
                    err=True,
                )
                if kind in ("array", "object") and isinstance(value, str):
                    value = json.loads(value)
                if value != "" or name in required:
                    out[name] = value
        except (click.Abort, EOFError):
            return Answer("cancel")
        return Answer("accept", out)

    async def asker(message: str, schema: Mapping[str, Any]) -> Answer:
        return await anyio.to_thread.run_sync(prompt, message, schema)

    return asker


__all__ = [
    "CONFIRM_SCHEMA",
    "Answer",
    "Asker",
    "ask",
    "check",
    "scripted_asker",
    "terminal_asker",
]
