"""Results that break their tool's ``outputSchema`` are kept, with a warning.

The SDK's re-validation (``ClientSession.validate_tool_result``) is replaced by codemode's
host-safe check, whose complaint becomes an entry in ``ToolCallResult.warnings`` (collected
per call through a context variable) instead of an exception.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as mt
from jsonschema.protocols import Validator
from mcp.client import ClientSession

from codemode.tools.sources.mcp.listing import ListingError, every_tool
from codemode.tools.validate import Uncheckable, compile_schema, schema_problem

# Where the lenient output-schema check records its complaint for the call in this task.
_schema_warnings: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "codemode_mcp_schema_warnings", default=None
)


@contextmanager
def schema_warnings() -> Iterator[list[str]]:
    """The list the check fills for calls made in this block (in this task)."""
    sink: list[str] = []
    token = _schema_warnings.set(sink)
    try:
        yield sink
    finally:
        _schema_warnings.reset(token)


def install_lenient_validation(
    session: ClientSession, schemas: dict[str, Any], *, max_bytes: int | None = None
) -> None:
    """Check results against the tool's outputSchema with codemode's own validator.

    ``ClientSession.call_tool`` validates ``structured_content`` after the result arrived
    and raises ``RuntimeError`` on mismatch, losing the data; and it runs the schema's
    regular expressions on the host's event loop, where a server's ``pattern`` such as
    ``^(a+)+$`` and a matching result stall every session for minutes. Servers do break
    their own schemas: codemode keeps the data, records why it is suspect, and checks with
    :func:`codemode.tools.validate.compile_schema` (regexes are left to the server).
    ``schemas`` (tool -> outputSchema) is emptied when the server's tools change.
    """
    checkers: dict[str, tuple[Any, Validator | None]] = {}

    async def listed(name: str) -> str | None:
        """Learn the output schemas of every page; why not, if the listing never ends."""
        if name in schemas:
            return None
        try:
            tools = await every_tool(
                lambda cursor: session.list_tools(params=mt.PaginatedRequestParams(cursor=cursor)),
                max_bytes=max_bytes,
            )
        except ListingError as exc:
            return f"the result of {name} could not be checked against its output schema: {exc}"
        for t in tools:  # a name listed twice: the first, as the registry keeps
            schemas.setdefault(t.name, t.output_schema)
        return None

    def checker(name: str, schema: Any) -> Validator | None:
        cached = checkers.get(name)
        if cached is None or cached[0] is not schema:
            try:
                compiled = compile_schema(dict(schema))
            except Uncheckable:  # the data is kept either way
                compiled = None
            cached = checkers[name] = (schema, compiled)
        return cached[1]

    async def lenient(name: str, result: mt.CallToolResult) -> None:
        # The SDK lists too when it meets a tool it does not know, but only the first page.
        problem = await listed(name)
        schema = schemas.get(name)
        if problem is None and schema is None:
            return
        if problem is None and result.structured_content is None:
            problem = f"Tool {name} has an output schema but did not return structured content"
        elif problem is None:
            check = checker(name, schema)
            message = None if check is None else schema_problem(check, result.structured_content)
            if message is None:
                return
            problem = f"Invalid structured content returned by tool {name}: {message}"
        sink = _schema_warnings.get()
        if sink is None:
            raise RuntimeError(problem)
        sink.append(f"{problem}; the data is returned as the server sent it")

    # Instance attribute shadows the method for this session only.
    setattr(session, "validate_tool_result", lenient)  # noqa: B010
