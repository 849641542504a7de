"""Server tools as small async functions; the MCP wiring is done here, once.

How to add a tool to ``codemode serve`` (as ``src/codemode/memory/server_tools.py`` does;
``app.build_server`` calls its ``register(toolset, ctx)``)::

    from codemode.server.toolset import Call, Reply, ServerContext, Toolset

    def register(toolset: Toolset, ctx: ServerContext) -> None:
        @toolset.tool(description="List saved skills, optionally filtered by a query.")
        async def list_skills(call: Call, query: str = "", limit: int = 50) -> Reply:
            found = ...  # use ctx (workspace, memory...) or ``await call.session()``
            return Reply("\\n".join(found), data={"skills": found})

Rules:

- The first parameter is always ``call`` (a :class:`Call`); the others become the tool's
  input schema (type hints, defaults; ``Annotated[str, Field(description=...)]`` works).
- ``description`` is what the model reads; keep it byte-stable (no dynamic lists). Use
  ``description_file="x.md"`` with ``package=`` to keep long texts as package data.
- Return a :class:`Reply` (text for the model + optional structured ``data``), a ``str``,
  or JSON-able data. Raise a :class:`~codemode.errors.CodemodeError` (or return
  ``Reply(..., is_error=True)``) for a failure the model should see: it becomes an MCP
  tool error (``isError``), not a protocol error. Other exceptions are bugs: they are
  logged and reported as an internal error.
- ``async with call.lease() as lease:`` borrows the caller's codemode session
  (``lease.session``; started on demand, counted against the session cap, one use at a
  time). ``await call.session()`` returns it without holding it. Most tools need neither.

This module does not know which tools exist; ``app.py`` registers them.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from codemode.errors import CodemodeError
from codemode.output import DEFAULT_LIMIT, bound_json, bound_text

from .calls import CallTracker, ClientLink
from .session_records import Lease
from .sessions import SessionManager

if TYPE_CHECKING:
    from codemode.config import Settings
    from codemode.memory import Memory
    from codemode.session import Session
    from codemode.tools.registry import ToolRegistry
    from codemode.workspace import Workspace

INSTRUCTIONS_PACKAGE = "codemode.server.instructions"

__all__ = [
    "INSTRUCTIONS_PACKAGE",
    "LINK_SCOPE_KEY",
    "MODERN",
    "Call",
    "Reply",
    "ReplyLayer",
    "ServerContext",
    "ToolDef",
    "Toolset",
    "error_reply",
    "is_modern",
    "link_of",
    "load_text",
]


MODERN = "2026-07-28"
"""The first protocol without a back-channel: server-to-client requests ride
``InputRequiredResult`` rounds instead of being sent mid-call."""


def is_modern(mcp_ctx: Any) -> bool:
    """Whether the request came over a 2026-07-28 (or later) connection."""
    version = getattr(mcp_ctx, "protocol_version", None)
    return bool(version) and str(version) >= MODERN


def load_text(name: str, package: str = INSTRUCTIONS_PACKAGE) -> str:
    """A text file shipped as package data (e.g. ``run_code.md``), without its final newline."""
    return resources.files(package).joinpath(name).read_text(encoding="utf-8").rstrip("\n")


@dataclass(frozen=True, slots=True)
class Reply:
    """What a tool answers: text for the model, and the same facts as structured data.

    Both are bounded by the server's ``output_limit`` when sent (see :func:`to_result`);
    ``hint`` tells the model how to get what a cut left out.
    """

    text: str
    data: dict[str, Any] | None = None
    is_error: bool = False
    hint: str = ""


DEFAULT_MAX_RUN_TIMEOUT = 3600.0
"""A client's ``run_code`` timeout is lowered to this when ``budget.run.wall_time`` is unset."""


def max_run_timeout(wall_time: float | None, run_timeout: float) -> float:
    """The server's cap on a client's ``run_code`` timeout: ``budget.run.wall_time`` when
    set, else an hour, never below the operator's own default ``run_timeout``."""
    if wall_time is not None:
        return wall_time
    return max(DEFAULT_MAX_RUN_TIMEOUT, run_timeout)


@dataclass
class ServerContext:
    """What the server shares between tools: built once per ``codemode serve``.

    ``tools`` is the workspace's tool registry (discovery, shared by all sessions),
    ``workspace`` the opened workspace (when one exists), ``memory`` its storage of
    skills, artifacts, state and deps (when available). ``extras`` is free for tool
    modules to keep their own objects in.
    """

    sessions: SessionManager
    base: Path | None = None
    tools: ToolRegistry | None = None
    workspace: Workspace | None = None
    memory: Memory | None = None
    settings: Settings | None = None
    run_timeout: float = 60.0
    max_run_timeout: float = DEFAULT_MAX_RUN_TIMEOUT
    """The longest ``timeout`` a client may ask ``run_code`` for (longer ones are lowered)."""
    output_limit: int = DEFAULT_LIMIT
    calls: CallTracker = field(default_factory=CallTracker)
    """Every call in progress: cancelled when its client goes away, or at shutdown."""
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Call:
    """One MCP tool call as the handler sees it."""

    server: ServerContext
    session_key: str | None
    """Which client session this call belongs to (``None``: not recognisable again)."""
    mcp: Context | None = None
    """The SDK's request context, for the rare tool that needs it (progress...)."""
    client: str | None = None
    """Who sent the call (the remote address over HTTP), for fair queueing."""
    tool: str = ""
    layers: tuple[Any, ...] = ()
    """The toolset's reply layers: progress messages pass them like replies."""

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """A progress notification to the client, its message through the reply layers
        first (privacy's net): the one way a tool sends text to the client before its
        reply. Nothing happens for a call without a request context."""
        if self.mcp is None:
            return
        if message:
            try:
                for layer in self.layers:
                    message = await layer(self, self.tool, message)
            except CodemodeError:  # a layer withholds it (privacy: block): the count goes
                message = None
        await self.mcp.report_progress(progress, total, message)

    def lease(self) -> AbstractAsyncContextManager[Lease]:
        """Borrow the caller's session for one use (``async with call.lease() as l:``).

        Works for every caller, including one that cannot be recognised again (it gets
        a session that is closed when the block ends). Runs on one session are serialised.
        """
        return self.server.sessions.lease(self.session_key, client=self.client)

    async def session(self) -> Session:
        """The caller's persistent ``codemode.session.Session`` (started on demand).

        Raises ``CodemodeError`` for a caller without a session id (stateless HTTP
        without ``Codemode-Session``): use :meth:`lease` there.
        """
        if self.session_key is None:
            raise CodemodeError(
                "this call has no session to keep (no Mcp-Session-Id or Codemode-Session)"
            )
        return await self.server.sessions.get(self.session_key)


Handler = Callable[..., Awaitable[Any]]
KeyFn = Callable[[Context], str | None]
ReplyLayer = Callable[[Call, str, Any], Awaitable[Any]]
"""``layer(call, tool_name, reply) -> reply``: sees (and may rewrite) every tool's answer."""


@dataclass(frozen=True, slots=True)
class ToolDef:
    name: str
    fn: Handler
    description: str
    title: str | None = None
    output: Any = None
    read_only: bool = False


class Toolset:
    """An ordered set of tool definitions, applied to an ``MCPServer`` in one go."""

    def __init__(
        self, tools: typing.Iterable[ToolDef] = (), layers: typing.Iterable[ReplyLayer] = ()
    ) -> None:
        self._tools: dict[str, ToolDef] = {td.name: td for td in tools}
        self._layers: list[ReplyLayer] = list(layers)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> typing.Iterator[ToolDef]:
        return iter(self._tools.values())

    def names(self) -> list[str]:
        return list(self._tools)

    def use(self, layer: ReplyLayer) -> None:
        """Pass every tool's reply (an error reply included) through ``layer``, in the
        order added (privacy's net over everything ``codemode serve`` answers)."""
        self._layers.append(layer)

    @property
    def layers(self) -> tuple[ReplyLayer, ...]:
        return tuple(self._layers)

    def only(self, names: typing.Iterable[str]) -> Toolset:
        """A toolset with just these tools (in this toolset's order; its layers too)."""
        keep = set(names)
        return Toolset((td for td in self._tools.values() if td.name in keep), self._layers)

    def tool(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        description_file: str | None = None,
        package: str = INSTRUCTIONS_PACKAGE,
        title: str | None = None,
        output: Any = None,
        read_only: bool = False,
    ) -> Callable[[Handler], Handler]:
        """Decorator: register ``fn(call, **arguments)`` as a tool (see the module doc).

        ``output`` is an optional TypedDict or pydantic model describing ``Reply.data``;
        it becomes the tool's ``outputSchema``.
        """

        def decorator(fn: Handler) -> Handler:
            self.add(
                fn,
                name=name,
                description=description,
                description_file=description_file,
                package=package,
                title=title,
                output=output,
                read_only=read_only,
            )
            return fn

        return decorator

    def add(
        self,
        fn: Handler,
        *,
        name: str | None = None,
        description: str | None = None,
        description_file: str | None = None,
        package: str = INSTRUCTIONS_PACKAGE,
        title: str | None = None,
        output: Any = None,
        read_only: bool = False,
    ) -> None:
        tool_name = name or fn.__name__
        if tool_name in self._tools:
            raise ValueError(f"a server tool named {tool_name!r} is already registered")
        if not inspect.iscoroutinefunction(fn):
            raise TypeError(f"tool {tool_name!r}: the handler must be an async function")
        params = list(inspect.signature(fn).parameters)
        if not params or params[0] != "call":
            raise TypeError(f"tool {tool_name!r}: the first parameter must be `call`")
        if description is None and description_file is not None:
            description = load_text(description_file, package)
        if description is None:
            description = inspect.getdoc(fn) or ""
        self._tools[tool_name] = ToolDef(
            tool_name, fn, description, title=title, output=output, read_only=read_only
        )

    def apply(self, server: MCPServer[Any], context: ServerContext, key_of: KeyFn) -> None:
        """Register every tool on ``server``; ``key_of`` names the caller's session."""
        for td in self._tools.values():
            server.add_tool(
                _adapt(td, context, key_of, self._layers),
                name=td.name,
                title=td.title,
                description=td.description,
                annotations=ToolAnnotations(read_only_hint=True) if td.read_only else None,
            )


def model_parameters(
    model: type[BaseModel],
    only: Sequence[str] | None = None,
    rename: Mapping[str, str] | None = None,
) -> list[inspect.Parameter]:
    """Tool parameters taken from a params model's fields (types, constraints, defaults,
    descriptions), so a tool's input schema derives from the model (``codemode.rpc``).

    ``only`` picks fields (in that order); ``rename`` maps a field to the tool's argument
    name when an MCP tool's public argument is spelled differently.
    """
    rename = rename or {}
    fields = model.model_fields
    out = []
    for name in only if only is not None else list(fields):
        info = fields[name]
        annotation: Any = Annotated[
            (info.annotation, *info.metadata, Field(description=info.description))
        ]
        default = inspect.Parameter.empty if info.is_required() else info.get_default()
        out.append(
            inspect.Parameter(
                rename.get(name, name),
                inspect.Parameter.KEYWORD_ONLY,
                default=default,
                annotation=annotation,
            )
        )
    return out


def with_parameters(fn: Handler, params: Sequence[inspect.Parameter], name: str) -> Handler:
    """``fn(call, **arguments)`` given an explicit signature ``(call, *, <params>)``."""
    call = inspect.Parameter("call", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Call)
    fn.__signature__ = inspect.Signature([call, *params])  # type: ignore[attr-defined]
    fn.__annotations__ = {"call": Call} | {p.name: p.annotation for p in params}
    fn.__name__ = fn.__qualname__ = name
    return fn


def _adapt(
    td: ToolDef, context: ServerContext, key_of: KeyFn, layers: list[ReplyLayer] | None = None
) -> Handler:
    """Wrap ``fn(call, **args)`` as the SDK expects: ``fn(**args, ctx: Context)``.

    The wrapper's signature is the handler's, minus ``call``, plus a keyword-only
    ``ctx`` the SDK fills with its request context; the SDK derives the input schema
    from it.
    """
    fn = td.fn
    hints = typing.get_type_hints(fn, include_extras=True)
    params = list(inspect.signature(fn).parameters.values())[1:]
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"tool {td.name!r}: *args and **kwargs are not supported")
    ctx_name = "mcp_request_context"
    new_params = [p.replace(annotation=hints.get(p.name, Any)) for p in params]
    new_params.append(
        inspect.Parameter(ctx_name, inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    )
    returns: Any = Annotated[CallToolResult, td.output] if td.output is not None else CallToolResult

    from codemode.approval.types import current_approver

    from .approve import client_approver

    async def wrapper(**kwargs: Any) -> CallToolResult | InputRequiredResult:
        mcp_ctx = kwargs.pop(ctx_name)
        link = link_of(mcp_ctx)
        call = Call(
            context,
            key_of(mcp_ctx),
            mcp_ctx,
            link.client if link else None,
            td.name,
            tuple(layers or ()),
        )
        out: Any = None
        # Calls that need a person's yes during this request ask this client's person.
        asking = current_approver.set(client_approver(mcp_ctx))
        try:
            with context.calls.track(link, td.name) as running:
                try:
                    out = await fn(call, **kwargs)
                except CodemodeError as exc:
                    out = error_reply(exc)
        finally:
            current_approver.reset(asking)
        if running.reason is not None:
            out = Reply(f"Cancelled: {running.reason}", None, is_error=True)
        try:
            for layer in layers or ():
                out = await layer(call, td.name, out)
        except CodemodeError as exc:  # a layer withheld the reply (privacy: block)
            out = error_reply(exc)
        return to_result(out, context.output_limit)

    wrapper.__name__ = td.name
    wrapper.__qualname__ = td.name
    wrapper.__doc__ = td.description
    wrapper.__signature__ = inspect.Signature(new_params, return_annotation=returns)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in new_params} | {"return": returns}
    return wrapper


LINK_SCOPE_KEY = "codemode.link"
"""Where the HTTP transport puts a request's :class:`ClientLink` in the ASGI scope."""


def link_of(ctx: Context) -> ClientLink | None:
    """The link of the HTTP request behind a call (None over stdio)."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    link = scope.get(LINK_SCOPE_KEY) if isinstance(scope, dict) else None
    return link if isinstance(link, ClientLink) else None


def error_reply(exc: CodemodeError) -> Reply:
    """A failure the model should see, as a tool error (with ``retry_after`` when busy)."""
    retry = getattr(exc, "retry_after", None)
    data = None if retry is None else {"error": type(exc).__name__, "retry_after": retry}
    return Reply(f"{type(exc).__name__}: {exc}", data, is_error=True)


def to_result(out: Any, limit: int | None = None) -> CallToolResult | InputRequiredResult:
    """Turn a handler's answer into the MCP result (a multi-round request passes through),
    bounded by ``limit`` characters of text (and twice that of structured content, as
    JSON): the same net for every tool."""
    if isinstance(out, CallToolResult | InputRequiredResult):
        return out
    if not isinstance(out, Reply):
        if isinstance(out, str):
            out = Reply(out)
        else:
            data = out if isinstance(out, dict) else {"result": out}
            out = Reply(json.dumps(out, ensure_ascii=False, default=str), data)
    text, data = out.text, out.data
    if limit is not None:
        text = bound_text(text, limit, hint=out.hint)
        if data is not None:
            bounded = bound_json(data, 2 * limit)
            if bounded is not data:
                data = dict(bounded) if isinstance(bounded, dict) else {"truncated": bounded}
                if out.hint:
                    data["how_to_get_everything"] = out.hint
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=data,
        is_error=out.is_error,
    )
