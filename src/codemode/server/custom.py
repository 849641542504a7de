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

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import anyio.to_thread
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
        handler = _replied(_off_loop(fn), self.context, spec.name)
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
    from ..context import CallContext
    from ..output import DEFAULT_LIMIT
    from ..session import Session
    from .sessions import SessionManager
    from .toolset import ServerContext

    registry, settings = workspace.registry(), workspace.settings
    base_context = CallContext(tenant=settings.tenant, workspace=str(workspace.path))

    def new_idle(key: str | None) -> Session:
        session = Session(
            shared.for_key(key) if shared is not None and key is not None else executor,
            tools=registry,
            memory=memory,
            default_timeout=run_timeout,
            context=replace(base_context, client=key or "ephemeral"),
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


def _replied(fn: Callable[..., Any], context: ServerContext, name: str) -> Callable[..., Any]:
    """``fn`` whose answer to an MCP client passes the server's reply layers (privacy's
    net), like every other tool's: called by the client, a custom tool's result goes
    straight to the model. (Called from code, it passes the tool-call chain instead.)"""
    layers = tuple(context.extras.get("reply_layers", ()))
    if not layers:
        return fn

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        from .toolset import Call

        out = await fn(*args, **kwargs)
        call = Call(context, None, tool=name, layers=layers)
        for layer in layers:
            out = await layer(call, name, out)
        return out

    return run


def _off_loop(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A sync ``fn`` as an async function of the same signature that runs in a thread."""
    if inspect.iscoroutinefunction(fn):
        return fn

    @functools.wraps(fn)
    async def run(*args: Any, **kwargs: Any) -> Any:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    return run


__all__ = ["CUSTOM_SERVER", "CodemodeServer", "create_server", "server_context"]
