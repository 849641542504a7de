"""``codemode serve``: give MCP clients code mode over stdio or streamable HTTP."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click

from .executors import choose_executor, start_executor
from .forwarded import HEADERS, HeaderName, TrustedProxies
from .health import DEFAULT_STALL_AFTER
from .process import bind, set_up_log_handlers, settle_collector
from .sessions import (
    DEFAULT_CLIENT_SHARE,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_QUEUE_TIMEOUT,
    DEFAULT_RECLAIM_AFTER,
    DEFAULT_SHUTDOWN_GRACE,
)

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from codemode.config import Settings
    from codemode.execution.base import Executor
    from codemode.memory import Memory
    from codemode.tools.registry import ToolRegistry
    from codemode.workspace import Workspace

    from .session_cap import SessionCap
    from .toolset import ServerContext

EXECUTORS = ("inprocess", "subprocess", "sandbox", "ray")
"""Names accepted by ``--executor`` (built by ``codemode.execution.executor_by_name``)."""

TOKEN_ENV = "CODEMODE_TOKEN"
DEFAULT_PORT = 8765

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]


def _say(message: str) -> None:
    """Talk to the human on stderr: stdout belongs to the MCP protocol on stdio."""
    click.echo(f"codemode: {message}", err=True)


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
    shutdown_grace: float = DEFAULT_SHUTDOWN_GRACE
    reclaim_after: float | None = DEFAULT_RECLAIM_AFTER
    queue_size: int = DEFAULT_QUEUE_SIZE
    queue_timeout: float = DEFAULT_QUEUE_TIMEOUT
    client_share: float = DEFAULT_CLIENT_SHARE
    proxies: TrustedProxies | None = None
    """HTTP: reverse proxies whose forwarded header names the client (--forwarded-allow-ips)."""
    pool_size: int | None = None
    tenants: Path | None = None
    """A tenants file (codemode.tenants): one workspace per bearer token or JWT tenant."""
    privacy: bool = False
    health_port: int | None = None
    """HTTP: a port where a thread answers /healthz and /readyz off the event loop."""
    health_stall: float = DEFAULT_STALL_AFTER
    max_sessions_total: int | None = None
    """--tenants: sessions (workers) the whole process may hold (None: ``default_total``)."""


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
    type=click.FloatRange(min=0),
    default=DEFAULT_IDLE_TIMEOUT,
    show_default=True,
    help="Close a client's session after this many idle seconds (0: never).",
)
@click.option(
    "--reclaim-after",
    type=click.FloatRange(min=0),
    default=DEFAULT_RECLAIM_AFTER,
    show_default=True,
    help="HTTP: close an Mcp-Session-Id session this many seconds after its client's last "
    "connection or event stream closed (0: never; the idle timeout still applies).",
)
@click.option(
    "--max-sessions",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_SESSIONS,
    show_default=True,
    help="Most sessions (workers) open at once (per tenant with --tenants); more clients "
    "wait in the queue.",
)
@click.option(
    "--max-sessions-total",
    type=click.IntRange(min=1),
    default=None,
    help="--tenants: most sessions (workers) open at once across all tenants (default: "
    "as many 1 GB workers as the machine's memory holds, at least --max-sessions).",
)
@click.option(
    "--queue-size",
    type=click.IntRange(min=0),
    default=DEFAULT_QUEUE_SIZE,
    show_default=True,
    help="Clients that may wait for a session slot; beyond it: 'busy, retry after N s'.",
)
@click.option(
    "--queue-timeout",
    type=click.FloatRange(min=0),
    default=DEFAULT_QUEUE_TIMEOUT,
    show_default=True,
    help="Seconds a client waits for a session slot before it is told to retry later.",
)
@click.option(
    "--client-share",
    type=click.FloatRange(min=0, max=1, min_open=True),
    default=DEFAULT_CLIENT_SHARE,
    show_default=True,
    help="Share of --max-sessions one client (a remote address) may hold while another "
    "client waits, and with --tenants the share of --max-sessions-total one tenant may: "
    "beyond it a new session is refused at once ('busy, retry after N s') and freed slots "
    "go to the others first. 1: no bound.",
)
@click.option(
    "--forwarded-allow-ips",
    default="",
    envvar="CODEMODE_FORWARDED_ALLOW_IPS",
    metavar="IPS",
    help="HTTP behind a reverse proxy: its addresses or networks, comma-separated "
    "(10.0.0.5,10.1.0.0/16). From those peers alone, the client is read from "
    "--forwarded-header, so --client-share counts each client, not the proxy. Default: "
    "none (the header is ignored from everyone).",
)
@click.option(
    "--forwarded-header",
    type=click.Choice(HEADERS),
    default="x-forwarded-for",
    show_default=True,
    help="The header your proxy writes (it must overwrite or append to it): "
    "X-Forwarded-For, or RFC 7239 Forwarded (for=...).",
)
@click.option(
    "--pool-size",
    type=click.IntRange(min=0),
    default=None,
    help="Workers kept pre-started so new sessions start at once (default: the executor's, 2).",
)
@click.option(
    "--shutdown-grace",
    type=click.FloatRange(min=0),
    default=DEFAULT_SHUTDOWN_GRACE,
    show_default=True,
    help="On SIGTERM/SIGINT, seconds running calls may take to finish before they are cancelled.",
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
    "--tenants",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    default=None,
    help="HTTP: a tenants file (docs/tenants.md): one workspace per token or OAuth tenant; "
    "replaces --base and CODEMODE_TOKEN.",
)
@click.option(
    "--privacy",
    is_flag=True,
    default=False,
    help="Tokenize personal data before it reaches the model (the workspace's 'privacy' "
    "settings, turned on). See docs/privacy.md.",
)
@click.option(
    "--health-port",
    type=click.IntRange(min=0, max=65535),
    default=None,
    help="HTTP: also answer /healthz and /readyz on this port (same --host), from a small "
    "process of their own: within milliseconds even when the event loop is saturated (0 "
    "picks a free one). Point liveness and readiness probes here.",
)
@click.option(
    "--health-stall",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_STALL_AFTER,
    show_default=True,
    help="Health port: /healthz answers 503 'stalled' once the event loop has not run for "
    "this many seconds.",
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
    reclaim_after: float,
    max_sessions: int,
    max_sessions_total: int | None,
    queue_size: int,
    queue_timeout: float,
    client_share: float,
    forwarded_allow_ips: str,
    forwarded_header: HeaderName,
    pool_size: int | None,
    shutdown_grace: float,
    timeout: float | None,
    tool_profile: Literal["all", "core", "minimal"],
    tenants: Path | None,
    privacy: bool,
    health_port: int | None,
    health_stall: float,
    log_level: LogLevel,
) -> None:
    """Serve code mode to MCP clients: one Python session per client, every tool inside.

    \b
    Claude Code:  claude mcp add codemode -- codemode serve --base ~/.codemode
    HTTP:         CODEMODE_TOKEN=... codemode serve --transport http --port 8765
    """
    from .http import is_loopback

    token: str | None = None
    if tenants is not None:
        if transport != "http" or no_auth or base is not None:
            raise click.UsageError(
                "--tenants needs --transport http, and takes the place of --base and "
                "--no-auth (each tenant's workspace and token are in the file)"
            )
    elif transport == "http":
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
    else:
        _need_stdio()
    if max_sessions_total is not None and tenants is None:
        raise click.UsageError(
            "--max-sessions-total applies to --tenants (one workspace: --max-sessions is "
            "already the process's limit)"
        )
    if health_port is not None and (transport != "http" or tenants is not None):
        raise click.UsageError("--health-port needs --transport http (and no --tenants)")
    try:
        proxies = TrustedProxies(forwarded_allow_ips, forwarded_header)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--forwarded-allow-ips") from None
    if proxies and transport != "http":
        raise click.UsageError("--forwarded-allow-ips needs --transport http")
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
        max_sessions_total=max_sessions_total,
        timeout=timeout,
        log_level=log_level,
        tools=tool_profile,
        shutdown_grace=shutdown_grace,
        reclaim_after=reclaim_after if reclaim_after > 0 else None,
        queue_size=queue_size,
        queue_timeout=queue_timeout,
        client_share=client_share,
        proxies=proxies or None,
        pool_size=pool_size,
        tenants=tenants,
        privacy=privacy,
        health_port=health_port,
        health_stall=health_stall,
    )
    import anyio

    try:
        anyio.run(run_server, opts)
    except KeyboardInterrupt:
        pass
    except OSError as exc:  # codemode's own errors: one path for every command (codemode.cli)
        raise click.ClickException(str(exc)) from exc


@dataclass
class Served:
    """One workspace made servable: its MCP server, context and how to close upstream."""

    server: MCPServer[Any]
    context: ServerContext
    close_upstream: Callable[[], Awaitable[None]]


async def open_served(
    opts: ServeOptions,
    base: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    tenant: str | None = None,
    cap: SessionCap | None = None,
    allow_unjailed: bool = False,
) -> Served:
    """Open the workspace at ``base`` (as ``tenant``, its ``${VAR}`` from ``env``), start
    its executor and build its MCP server: one per tenant when serving several (``cap``:
    the session slots they share)."""
    import anyio

    from codemode.execution import close_pools
    from codemode.memory.capability import MEMORY

    from .app import build_server
    from .custom import server_context

    workspace, registry, memory, settings = _open_workspace(
        base, env=env, tenant=tenant, privacy=opts.privacy, allow_unjailed=allow_unjailed
    )
    if workspace.section(MEMORY).install_deps:
        added = await memory.prepare(install_deps=True)
        if added:
            _say(f"installed the workspace's deps: {', '.join(added)}")
    run_timeout = opts.timeout or settings.run_timeout
    opts.executor, executor = await start_executor(
        opts.executor, workspace, chosen=opts.executor_chosen, pool_size=opts.pool_size
    )

    shared = _shared_sessions(opts, workspace, executor)
    context = server_context(
        workspace,
        executor,
        memory=memory,
        shared=shared,
        run_timeout=run_timeout,
        idle_timeout=opts.idle_timeout,
        max_sessions=opts.max_sessions,
        reclaim_after=opts.reclaim_after,
        queue_size=opts.queue_size,
        queue_timeout=opts.queue_timeout,
        client_share=opts.client_share,
        cap=cap,
    )
    server = build_server(
        context,
        transport=opts.transport,
        log_level=opts.log_level,
        capability_tools=opts.tools == "all",
        minimal=opts.tools == "minimal",
    )

    async def close_rest() -> None:
        """After the sessions: upstream servers, then the pre-started workers (and their
        cgroups), which interpreter-exit hooks would not reach after a forced exit."""
        try:
            aclose = getattr(registry, "aclose", None)
            if aclose is not None:
                with anyio.move_on_after(10):
                    await aclose()
            if shared is not None:
                await shared.directory.aclose()
        finally:
            close_pools()

    return Served(server, context, close_rest)


def _shared_sessions(opts: ServeOptions, workspace: Workspace, executor: Executor) -> Any:
    """With the ray executor and Redis storage over HTTP, sessions are shared by every
    replica (``codemode.server.replicas``); otherwise None."""
    from codemode.cluster.executor import RayExecutor

    settings = workspace.settings
    if not isinstance(executor, RayExecutor) or opts.transport != "http":
        return None
    if settings.storage != "redis" or not settings.redis_url:
        return None
    from codemode.cluster.directory import SessionDirectory
    from codemode.cluster.shared import SharedSessions

    # Shared sessions start detached actors of their own: actors this replica owns and
    # keeps ready would never be used.
    executor.pool_size = 0
    executor.close()
    ttl = executor.config.idle_timeout or opts.idle_timeout or 1800.0
    directory = SessionDirectory(settings.redis_url, tenant=settings.tenant, ttl=ttl)
    _say("sessions are shared with other replicas (ray executor, Redis storage)")
    return SharedSessions(executor, directory)


async def run_server(opts: ServeOptions) -> None:
    """Open the workspace, build the server, serve until the client leaves or a signal."""
    import anyio

    if opts.tenants is not None:
        from codemode.tenants.serve import serve_tenants

        await serve_tenants(opts)
        return
    from .lifecycle import GracefulStop

    served = await open_served(opts, opts.base)
    server, context, close_rest = served.server, served.context, served.close_upstream
    sessions, registry = context.sessions, context.tools
    set_up_log_handlers(opts.log_level)
    stop = GracefulStop(opts.shutdown_grace, watchdog=True)

    if opts.transport == "http":
        from .http import build_http_app, serve_http

        sock = bind(opts.host, opts.port, "--port")
        health = (
            None if opts.health_port is None else bind(opts.host, opts.health_port, "--health-port")
        )
        bound = sock.getsockname()
        shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        url = f"http://{shown}:{bound[1]}/mcp"
        auth = "none, loopback only" if opts.token is None else "Authorization: Bearer <token>"
        if health is not None:
            auth += f"; health on http://{shown}:{health.getsockname()[1]}/healthz"
        app = build_http_app(
            server,
            context,
            host=opts.host,
            token=opts.token,
            on_shutdown=close_rest,
            on_ready=lambda: _say(
                f"serving MCP on {url} (streamable HTTP; auth: {auth}; executor: {opts.executor})"
            ),
            stop=stop,
            health=health,
            stall_after=opts.health_stall,
            proxies=opts.proxies,
        )
        settle_collector()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_connect_upstream, registry)
            await serve_http(app, sock, log_level=opts.log_level.lower(), proxies=opts.proxies)
            tg.cancel_scope.cancel()
        return

    from .stdio import serve_stdio

    closed = False

    async def close_all() -> None:
        nonlocal closed
        if not closed:
            closed = True
            try:
                await sessions.aclose()
            finally:
                await close_rest()

    settle_collector()
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(_connect_upstream, registry)
            # returns when stdin closes
            await serve_stdio(server, context, stop, close_all, on_ready=_hint_on_a_terminal)
            tg.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await close_all()


def _need_stdio() -> None:
    from ..cli import CLOSED_AT_START

    closed = [name for name in ("stdin", "stdout") if name in CLOSED_AT_START]
    if closed:
        raise click.UsageError(
            f"codemode serve was started with its {' and '.join(closed)} closed: over stdio "
            "an MCP client talks to it through stdin and stdout (let the client start it, "
            "or use --transport http)"
        )


def _hint_on_a_terminal() -> None:
    if sys.stdin.isatty():
        _say(
            "serving MCP over stdio: an MCP client starts this command and talks to it on "
            "stdin/stdout (e.g. claude mcp add codemode -- codemode serve); for clients that "
            "connect over the network: codemode serve --transport http. Ctrl-C stops it."
        )


async def _connect_upstream(registry: ToolRegistry | None) -> None:
    """Connect every upstream server at start, concurrently, each within its own deadline,
    so the first search does not wait for them; problems are logged and reported to the
    model in discovery results."""
    if registry is not None:
        await registry.connect_all()


def _open_workspace(
    base: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    tenant: str | None = None,
    privacy: bool = False,
    allow_unjailed: bool = False,
) -> tuple[Workspace, ToolRegistry, Memory, Settings]:
    """The workspace (created with an example mcp.json on first start), its tool
    registry (one upstream connection per server, shared by all sessions), its memory
    and its settings."""
    from codemode.memory import Memory
    from codemode.workspace import Workspace

    privacy_on = {"enabled": True} if privacy else None
    workspace = Workspace.open(base, env=env, tenant=tenant, privacy=privacy_on)
    if tenant is not None:  # one of serve --tenants (codemode.tenants.serve)
        workspace.serve_as_tenant(allow_unjailed=allow_unjailed)
    return workspace, workspace.registry(), Memory.for_workspace(workspace), workspace.settings
