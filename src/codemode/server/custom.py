"""``create_server``: codemode's MCP server as a Python object, with your own tools on it.

For programs that embed the server (code-execution-mcp's ``create_server`` shape)::

    server = create_server(config=Settings(executor="subprocess"), base="./ws",
                           custom_tools=[my_tool])
    server.register_tool(another)         # any time, also after clients connected
    await server.run_stdio()              # or: async with Client(server.mcp) as client

A custom tool is a plain function (sync or async) typed by its signature and docstring.
It becomes an MCP tool of the server (its input schema from the signature) and a tool
the code in every session can call: ``tools.custom.<name>(...)``. Sync functions run in
a worker thread, never on the event loop.

``config`` takes the typed objects of codemode's one config schema: a ``Settings``, a
loaded ``Config`` (settings plus sections), or a mapping of settings; fields set on it
override the workspace's config file and environment. Capability sections go by name
(``create_server(llm=LLMConfig(...))``).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

from ..config import Config, Settings

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..session import Session
    from ..tools.spec import ToolSpec
    from ..workspace import Workspace
    from .toolset import ServerContext

CUSTOM_SERVER = "custom"


class CodemodeServer:
    """One codemode MCP server, built in-process (see module doc)."""

    def __init__(self, mcp: MCPServer[Any], context: ServerContext, workspace: Workspace) -> None:
        self.mcp = mcp
        """The SDK's server: ``mcp.Client(server.mcp)`` talks to it in-process."""
        self.context = context
        self.workspace = workspace

    @property
    def config(self) -> Settings:
        return self.workspace.settings

    def register_tool(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
    ) -> ToolSpec:
        """Expose ``fn`` as an MCP tool of this server and as ``tools.custom.<name>``."""
        registry = self.context.tools
        assert registry is not None
        spec = registry.register(fn, server=CUSTOM_SERVER, name=name, description=description)
        handler = _through_chain(fn, self.context, spec.name)
        self.mcp.add_tool(handler, name=spec.name, description=spec.description or None)
        return spec

    def register_tools(self, fns: Iterable[Callable[..., Any]]) -> list[ToolSpec]:
        return [self.register_tool(fn) for fn in fns]

    async def run_stdio(self) -> None:
        """Serve one client on stdin/stdout until it leaves."""
        try:
            await self.mcp.run_stdio_async()
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        await self.context.sessions.aclose()
        if self.context.tools is not None:
            await self.context.tools.aclose()

    async def __aenter__(self) -> CodemodeServer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


def create_server(
    config: Settings | Config | Mapping[str, Any] | None = None,
    *,
    base: str | PathLike[str] | None = None,
    custom_tools: Iterable[Callable[..., Any]] = (),
    tools: Literal["all", "core"] = "all",
    max_sessions: int = 32,
    idle_timeout: float | None = 1800.0,
    **sections: BaseModel | Mapping[str, Any],
) -> CodemodeServer:
    """Build codemode's MCP server on the workspace at ``base`` (see module doc)."""
    from ..execution import executor_by_name
    from ..memory import Memory
    from ..workspace import Workspace
    from .app import build_server

    overrides = {**_settings(config), **{k: _dump(v) for k, v in sections.items()}}
    workspace = Workspace.open(base, **overrides)
    settings = workspace.settings
    memory = Memory.for_workspace(workspace)
    executor = executor_by_name(settings.executor, workspace=workspace)
    context = server_context(
        workspace,
        executor,
        memory=memory,
        run_timeout=settings.run_timeout,
        idle_timeout=idle_timeout,
        max_sessions=max_sessions,
    )
    mcp = build_server(context, capability_tools=tools == "all")
    server = CodemodeServer(mcp, context, workspace)
    server.register_tools(custom_tools)
    return server


def server_context(
    workspace: Workspace,
    executor: Any,
    *,
    memory: Any,
    run_timeout: float,
    idle_timeout: float | None,
    max_sessions: int,
    shared: Any = None,
    **admission: Any,
) -> ServerContext:
    """What every tool of one server shares: the workspace's registry and memory, and a
    session manager opening one session per client (run hooks of every capability).
    ``admission``: the session manager's reclaim and queue settings (``codemode serve``).
    ``shared`` (``codemode.cluster.shared.SharedSessions``): keyed sessions live in
    detached Ray actors that every replica finds (stateless replicas)."""
    from ..assembly import configure_session
    from ..budget.capability import BUDGET
    from ..context import CallContext, ephemeral_client
    from ..output import DEFAULT_LIMIT
    from ..session import Session
    from .sessions import SessionManager
    from .toolset import ServerContext, max_run_timeout

    registry, settings = workspace.registry(), workspace.settings
    base_context = CallContext(tenant=settings.tenant, workspace=str(workspace.path))

    def new_idle(key: str | None) -> Session:
        session = Session(
            shared.for_key(key) if shared is not None and key is not None else executor,
            tools=registry,
            memory=memory,
            default_timeout=run_timeout,
            context=replace(base_context, client=key or ephemeral_client()),
        )
        configure_session(session, workspace.capabilities, workspace.sections)
        return session

    async def new_session(key: str | None) -> Session:
        session = new_idle(key)
        await session.start()
        return session

    # One session built now and dropped (never started: no worker): whatever building
    # one imports or compiles on first use is done before the first client, not on the
    # event loop while a burst of new clients waits.
    new_idle(None)

    sessions = SessionManager(
        new_session,
        idle_timeout=idle_timeout,
        max_sessions=max_sessions,
        shared=shared is not None,
        **admission,
    )
    context = ServerContext(
        sessions,
        base=workspace.path,
        tools=registry,
        workspace=workspace,
        memory=memory,
        settings=settings,
        run_timeout=run_timeout,
        max_run_timeout=max_run_timeout(workspace.section(BUDGET).run.wall_time, run_timeout),
        output_limit=int(getattr(settings, "output_limit", DEFAULT_LIMIT)),
    )
    if shared is not None:
        context.extras["shared_sessions"] = shared
    return context


def _settings(config: Settings | Config | Mapping[str, Any] | None) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, Config):
        out = _settings(config.settings)
        out.update({name: _dump(section) for name, section in config.sections.items()})
        return out
    if isinstance(config, Settings):
        return config.model_dump(exclude_unset=True)
    return dict(config)


def _dump(value: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(value, BaseModel):
        return value.model_dump(exclude_unset=True)
    return dict(value)


def _through_chain(fn: Callable[..., Any], context: ServerContext, name: str) -> Callable[..., Any]:
    """The MCP tool of custom tool ``name``: a call from the client goes through the
    registry's chain (policy, approval, budget, audit, privacy) as one from code does, so
    a rule that denies ``custom.<name>`` (or asks first) holds whichever way it is called,
    and the person behind the client is asked as for a call from ``run_code``; its answer
    then passes the server's reply layers (privacy's net), like every other tool's.

    The signature the SDK reads is ``fn``'s (its input schema), plus the request context."""
    from mcp.server.mcpserver import Context
    from pydantic_core import to_jsonable_python

    from ..approval.types import current_approver
    from ..context import CallContext, ephemeral_client
    from ..errors import CodemodeError
    from .app import session_key
    from .approve import client_approver
    from .toolset import Call, Reply, error_reply, to_result

    layers = tuple(context.extras.get("reply_layers", ()))
    settings, workspace = context.settings, context.workspace
    base = CallContext(
        tenant=settings.tenant if settings is not None else "default",
        workspace=str(workspace.path) if workspace is not None else None,
    )
    ctx_name = "mcp_request_context"
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, Any))
        for p in inspect.signature(fn).parameters.values()
    ]
    params.append(inspect.Parameter(ctx_name, inspect.Parameter.KEYWORD_ONLY, annotation=Context))
    returns = hints.get("return", inspect.Signature.empty)

    async def run(**kwargs: Any) -> Any:
        mcp_ctx = kwargs.pop(ctx_name)
        registry = context.tools
        assert registry is not None
        key = session_key(mcp_ctx)
        call = Call(context, key, mcp_ctx, tool=name, layers=layers)
        # Whose call it is as the client's sessions name it (privacy's session vaults).
        ctx = replace(base, client=key or ephemeral_client())
        asking = current_approver.set(client_approver(mcp_ctx))
        try:
            # As JSON, as code sends them: the SDK hands over parsed values (models...).
            args = to_jsonable_python(kwargs)
            out: Any = await registry.call(CUSTOM_SERVER, name, args, context=ctx)
        except CodemodeError as exc:
            out = error_reply(exc)
        finally:
            current_approver.reset(asking)
        try:
            for layer in layers:
                out = await layer(call, name, out)
        except CodemodeError as exc:  # a layer withheld the answer (privacy: block)
            out = error_reply(exc)
        return to_result(out, context.output_limit) if isinstance(out, Reply) else out

    run.__name__ = run.__qualname__ = getattr(fn, "__name__", name)
    run.__doc__ = fn.__doc__
    run.__signature__ = inspect.Signature(params, return_annotation=returns)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params} | (
        {"return": returns} if returns is not inspect.Signature.empty else {}
    )
    return run


__all__ = ["CUSTOM_SERVER", "CodemodeServer", "create_server", "server_context"]
