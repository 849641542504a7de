"""A tool call as the chain's layers see it, and the two stages the registry supplies itself.

Layers (policy, audit, privacy...) import :class:`ToolCall`, :data:`NextCall` and
:data:`Middleware` from here (or, as before, from ``codemode.tools.registry``). The registry
adds the ``validate`` stage (:func:`check_arguments`) and ends the chain with
:func:`invoke`: the source's call, its failures made ``ToolError``, its result checked
against the tool's output schema and converted. Neither knows where a server's entry
comes from: the registry looks it up and hands it over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codemode.chain import Layer, Next
from codemode.context import CallContext
from codemode.errors import (
    CodemodeError,
    ToolArgumentError,
    ToolDenied,
    ToolError,
    ToolNotFound,
    ToolTimeout,
)
from codemode.tools import convert
from codemode.tools.entries import ServerEntry, ToolEntry
from codemode.tools.spec import ToolCallResult, ToolSpec, py_identifier
from codemode.tools.validate import format_problems, schema_problem


@dataclass(slots=True)
class ToolCall:
    """One call as the chain's layers see it; a layer may change ``args`` or ``timeout``
    (by replacing the dict, never changing it in place: outer layers keep the one they saw,
    and observability measures it after the call)."""

    server: str  # original names, as the source knows them
    tool: str
    args: dict[str, Any]
    spec: ToolSpec
    timeout: float | None = None
    context: CallContext = field(default_factory=CallContext)
    """Whose call it is (tenant, workspace, session, run, client)."""
    notes: dict[str, Any] = field(default_factory=dict)
    """What layers decided or measured about this call, for the layers outside them (audit
    records them): ``policy``, ``approval``, ``budget``, and ``bytes`` (the size of what the
    tool returned, set by the registry)."""
    reveal: Callable[[ToolCall], dict[str, Any]] | None = field(
        default=None, repr=False, compare=False
    )
    """Set by a layer that rewrites the arguments further in (privacy, which restores the
    real values behind tokens): computes what ``revealed`` returns. Not stored anywhere."""

    def revealed(self) -> dict[str, Any]:
        """The arguments as the tool will receive them, for a layer that must judge real
        values (a policy on recipients): with privacy on, tokens restored for a sink, on
        the host only. Never put them in a note, a log or an error: audit, traces and the
        sandbox must keep seeing ``args`` (tokens). Raises what the privacy stage would
        (an unknown token)."""
        return self.reveal(self) if self.reveal is not None else self.args


APPROVAL_PENDING = "pending"
"""``notes["approval"]`` while a call waits for a person's yes: such a call never reaches
its tool, even when no approval layer is installed (fail closed)."""

NextCall = Next[ToolCall, Any]
Middleware = Layer[ToolCall, Any]


def check_arguments(call: ToolCall, s: ServerEntry | None) -> None:
    """The ``validate`` stage: the arguments as they reach the tool, against its schema."""
    t = s.by_original.get(call.tool) if s is not None else None
    if call.notes.get("approval") == APPROVAL_PENDING:
        raise ToolDenied(
            "this call needs a person's approval, but no approval layer answered",
            server=s.py_name if s is not None else call.server,
            tool=t.py_name if t is not None else call.tool,
            reason="approval",
        )
    if t is not None:
        problems = t.validator.problems(call.args)
        if problems:
            raise ToolArgumentError(
                format_problems(problems, t.signature), server=t.server.py_name, tool=t.py_name
            )


async def invoke(call: ToolCall, s: ServerEntry | None, warn: Callable[[str], None]) -> Any:
    """The chain's end: call the source, check and convert what it returned."""
    if s is None:
        raise ToolNotFound(f"no tool server {call.server!r}", server=call.server)
    t = s.by_original.get(call.tool)
    py_server = s.py_name
    py_tool = t.py_name if t is not None else py_identifier(call.tool)
    try:
        result = await s.source.call_tool(call.tool, call.args, timeout=call.timeout)
    except ToolError as exc:
        if not exc.server:
            exc.server, exc.tool = py_server, py_tool
        raise
    except CodemodeError:
        raise
    except TimeoutError as exc:
        raise ToolTimeout(
            f"timed out after {call.timeout} s", server=py_server, tool=py_tool
        ) from exc
    except Exception as exc:
        raise ToolError(f"{type(exc).__name__}: {exc}", server=py_server, tool=py_tool) from exc
    replaced = 0
    if not getattr(s.source, "utf8_results", False):
        result, replaced = convert.without_lone_surrogates(result)
    if replaced:  # before the size and every outer layer (privacy, audit): they see this
        warn(f"{py_server}.{py_tool}: {convert.lone_surrogates_warning(replaced)}")
    call.notes["bytes"] = convert.size_of(result)
    for w in result.warnings:
        warn(f"{py_server}.{py_tool}: {w}")
    if t is not None and (problem := _output_problem(call, s, t, result)) is not None:
        warn(
            f"{py_server}.{py_tool}: result does not match the tool's output schema "
            f"({problem}); returned as is"
        )
    unwrap = convert.wrapped_result_key(call.spec.output_schema)
    return convert.to_value(result, server=py_server, tool=py_tool, unwrap=unwrap)


def _output_problem(
    call: ToolCall, s: ServerEntry, t: ToolEntry, result: ToolCallResult
) -> str | None:
    """Why a structured result breaks the tool's output schema, unless the source checked."""
    if (
        result.warnings  # the source already checked and said why
        or getattr(s.source, "validates_output", False)
        or result.structured is None
        or result.is_error
        or call.spec.output_schema is None
    ):
        return None
    checker = t.output_validator
    return None if checker is None else schema_problem(checker, result.structured)
