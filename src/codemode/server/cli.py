"""``codemode serve``: give MCP clients code mode over stdio or streamable HTTP."""

from __future__ import annotations

import errno
import logging
import os
import secrets
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import click

from codemode.errors import CodemodeError, ConfigError, ExecutorError
from codemode.output import DEFAULT_LIMIT

if TYPE_CHECKING:
    from codemode.config import Settings
    from codemode.execution.base import Executor
    from codemode.memory import Memory
    from codemode.tools.registry import ToolRegistry
    from codemode.workspace import Workspace

EXECUTORS = ("inprocess", "subprocess", "sandbox")
"""Names accepted by ``--executor`` (built by ``codemode.execution.executor_by_name``)."""

TOKEN_ENV = "CODEMODE_TOKEN"
DEFAULT_PORT = 8765

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _say(message: str) -> None:
    """Talk to the human on stderr: stdout belongs to the MCP protocol on stdio."""
    click.echo(f"codemode: {message}", err=True)


def choose_executor(name: str | None) -> str | None:
    """``--executor`` as given; None means the workspace's ``executor`` setting."""
    return name


async def start_executor(
    name: str | None, workspace: Workspace, *, chosen: bool
) -> tuple[str, Executor]:
    """Build and warm the executor (``name``, or the workspace's setting: the sandbox by
    default). A sandbox that cannot start refuses with the reason and the fix; codemode
    never falls back to running agents' code unsandboxed on its own."""
    if name is None:
        name = workspace.settings.executor
    try:
        executor = make_executor(name, workspace)
        warm = getattr(executor, "warm", None)
        if warm is not None:
            await warm()
    except (ExecutorError, ConfigError) as exc:
        if name == "sandbox" and not chosen:
            raise ExecutorError(
                f"{exc}\nTo run agents' code without the sandbox (NOT a security boundary), "
                "choose it explicitly: --executor subprocess, or CODEMODE_EXECUTOR=subprocess."
            ) from exc
        raise
    return name, executor


def make_executor(name: str, workspace: Workspace) -> Executor:
    from codemode.execution import executor_by_name

    return executor_by_name(name, workspace=workspace)


@dataclass
class ServeOptions:
    base: Path | None
    transport: Literal["stdio", "http"]
    host: str
    port: int
    executor: str | None
    executor_chosen: bool
    token: str | None
    idle_timeout: float | None
    max_sessions: int
    timeout: float | None
    log_level: LogLevel
    tools: Literal["all", "core", "minimal"] = "all"


@click.command("serve")
@click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default: $CODEMODE_BASE or ~/.codemode).",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio for one local client; http for several.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP: address to bind.")
@click.option(
    "--port",
    type=int,
    default=DEFAULT_PORT,
    show_default=True,
    help="HTTP: port (0 picks a free one).",
)
@click.option(
    "--executor",
    type=click.Choice(sorted(EXECUTORS)),
    default=None,
    help="Where agents' code runs (default: the workspace's setting, the sandbox).",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="HTTP on a loopback address only: accept requests without a token.",
)
@click.option(
    "--idle-timeout",
    type=float,
    default=1800.0,
    show_default=True,
    help="Close a client's session after this many idle seconds (0: never).",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Most sessions (workers) open at once; more clients get a clear error.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Default timeout of one run_code in seconds (default: settings' run_timeout).",
)
@click.option(
    "--tools",
    "tool_profile",
    type=click.Choice(["all", "core", "minimal"]),
    default="all",
    show_default=True,
    help="core: list only run_code and discovery; skills, artifacts, state and deps stay "
    "reachable from the code (smaller context for the model). minimal: only run_code and "
    "search_tools, everything else from the code (smallest context).",
)
@click.option(
    "--log-level",
    type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]),
    default="WARNING",
    show_default=True,
)
def serve(
    base: Path | None,
    transport: Literal["stdio", "http"],
    host: str,
    port: int,
    executor: str | None,
    no_auth: bool,
    idle_timeout: float,
    max_sessions: int,
    timeout: float | None,
    tool_profile: Literal["all", "core", "minimal"],
    log_level: LogLevel,
) -> None:
    """Serve code mode to MCP clients: one Python session per client, every tool inside.

    \b
    Claude Code:  claude mcp add codemode -- codemode serve --base ~/.codemode
    HTTP:         CODEMODE_TOKEN=... codemode serve --transport http --port 8765
    """
    from .http import is_loopback

    token: str | None = None
    if transport == "http":
        if no_auth and not is_loopback(host):
            raise click.UsageError(
                f"--no-auth is only allowed on a loopback address, not {host!r}: "
                f"set {TOKEN_ENV} and let clients send it as a bearer token."
            )
        if not no_auth:
            token = os.environ.get(TOKEN_ENV) or None
            if token is None:
                token = secrets.token_urlsafe(32)
                _say(f"generated bearer token (set {TOKEN_ENV} to choose one): {token}")
    elif no_auth:
        raise click.UsageError("--no-auth only applies to --transport http")
    opts = ServeOptions(
        base=base.expanduser() if base is not None else None,
        transport=transport,
        host=host,
        port=port,
        executor=choose_executor(executor),
        executor_chosen=executor is not None,
        token=token,
        idle_timeout=idle_timeout if idle_timeout > 0 else None,
        max_sessions=max_sessions,
        timeout=timeout,
        log_level=log_level,
        tools=tool_profile,
    )
    import anyio

    try:
        anyio.run(run_server, opts)
    except KeyboardInterrupt:
        pass
    except (CodemodeError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc


async def run_server(opts: ServeOptions) -> None:
    """Open the workspace, build the server, serve until the client leaves or a signal."""
    import anyio

    from codemode.assembly import configure_session
    from codemode.context import CallContext
    from codemode.memory.capability import MEMORY
    from codemode.session import Session

    from .app import build_server
    from .sessions import SessionManager
    from .toolset import ServerContext

    workspace, registry, memory, settings = _open_workspace(opts.base)
    if workspace.section(MEMORY).install_deps:
        added = await memory.prepare(install_deps=True)
        if added:
            _say(f"installed the workspace's deps: {', '.join(added)}")
    run_timeout = opts.timeout or settings.run_timeout
    opts.executor, executor = await start_executor(
        opts.executor, workspace, chosen=opts.executor_chosen
    )

    base_context = CallContext(tenant=settings.tenant, workspace=str(workspace.path))

    async def new_session(key: str | None) -> Session:
        session = Session(
            executor,
            tools=registry,
            memory=memory,
            default_timeout=run_timeout,
            context=replace(base_context, client=key or "ephemeral"),
        )
        configure_session(session, workspace.capabilities, workspace.sections)
        await session.start()
        return session

    sessions = SessionManager(
        new_session, idle_timeout=opts.idle_timeout, max_sessions=opts.max_sessions
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
    server = build_server(
        context,
        transport=opts.transport,
        log_level=opts.log_level,
        capability_tools=opts.tools == "all",
        minimal=opts.tools == "minimal",
    )
    # Some libraries set their own loggers to DEBUG (bm25s does): filter at the handlers.
    for handler in logging.getLogger().handlers:
        handler.setLevel(opts.log_level)

    async def close_upstream() -> None:
        aclose = getattr(registry, "aclose", None)
        if aclose is not None:
            with anyio.move_on_after(10):
                await aclose()

    if opts.transport == "http":
        from .http import bind_socket, build_http_app, serve_http

        try:
            sock = bind_socket(opts.host, opts.port)
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise
            raise ConfigError(
                f"port {opts.port} on {opts.host} is already in use; choose another with "
                "--port N, or --port 0 to pick a free one"
            ) from None
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        url = f"http://{shown}:{bound[1]}/mcp"
        auth = "none, loopback only" if opts.token is None else "Authorization: Bearer <token>"
        app = build_http_app(
            server,
            context,
            host=opts.host,
            token=opts.token,
            on_shutdown=close_upstream,
            on_ready=lambda: _say(
                f"serving MCP on {url} (streamable HTTP; auth: {auth}; executor: {opts.executor})"
            ),
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(_connect_upstream, registry)
            await serve_http(app, sock, log_level=opts.log_level.lower())
            tg.cancel_scope.cancel()
        return

    if sys.stdin.isatty():
        _say(
            "serving MCP over stdio: an MCP client starts this command and talks to it on "
            "stdin/stdout (e.g. claude mcp add codemode -- codemode serve); for clients that "
            "connect over the network: codemode serve --transport http. Ctrl-C stops it."
        )

    closed = False

    async def close_all() -> None:
        nonlocal closed
        if not closed:
            closed = True
            await sessions.aclose()
            await close_upstream()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(sessions.run_reaper)
            tg.start_soon(_exit_on_signal, close_all)
            tg.start_soon(_connect_upstream, registry)
            await server.run_stdio_async()  # returns when the client closes stdin
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await close_all()


async def _connect_upstream(registry: ToolRegistry | None) -> None:
    """Connect every upstream server at start, concurrently, each within its own deadline,
    so the first search does not wait for them; problems are logged and reported to the
    model in discovery results."""
    if registry is not None:
        await registry.connect_all()


async def _exit_on_signal(close_all: Callable[[], Awaitable[None]]) -> None:
    """On SIGTERM/SIGINT/SIGHUP: close sessions and upstream servers, then exit.

    Exiting is forced because the SDK reads stdin in a thread that cannot be cancelled:
    waiting for it would keep the process alive until the client writes or closes stdin.
    """
    import signal

    import anyio

    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for _ in signals:
            with anyio.move_on_after(15), anyio.CancelScope(shield=True):
                await close_all()
            sys.stderr.flush()
            os._exit(0)


def _open_workspace(base: Path | None) -> tuple[Workspace, ToolRegistry, Memory, Settings]:
    """The workspace (created with an example mcp.json on first start), its tool
    registry (one upstream connection per server, shared by all sessions), its memory
    and its settings."""
    from codemode.memory import Memory
    from codemode.workspace import Workspace

    workspace = Workspace.open(base)
    return workspace, workspace.registry(), Memory.for_workspace(workspace), workspace.settings
