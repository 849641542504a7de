"""Streamable HTTP for ``codemode serve``: auth, health, client tracking, graceful stop.

Rules (docs/server.md, "HTTP"):

- Every request except ``GET /healthz`` and ``GET /readyz`` needs ``Authorization:
  Bearer <token>``. The only way to turn that off is ``--no-auth`` on a loopback
  address; ``serve`` refuses ``--no-auth`` on any other address.
- No CORS headers are sent, so browsers on other origins cannot call the server. On a
  loopback address every route (``/mcp``, ``/ui``, ``/api/*``, ``/metrics``) refuses a
  ``Host`` or ``Origin`` that names another host (:class:`~.front.Front`): a web page
  whose name was re-pointed at 127.0.0.1 (DNS rebinding) reads and runs nothing, even
  under ``--no-auth``. (The SDK's own check, which covers only ``/mcp`` and three exact
  hosts, is turned off there: this one is wider and refuses what it refused.)
- ``/healthz`` and ``/readyz`` are answered by the outermost layer from counters, never
  behind a lock, the session manager or the SDK; still on the event loop. With a
  ``health`` socket (``--health-port``) a process of its own answers them too, off the
  loop (:mod:`.health`).
- Every ``/mcp`` request carries a :class:`~codemode.server.calls.ClientLink`: when its
  client disconnects before the answer was sent, the call it carries is cancelled.
  Requests and event streams naming an ``Mcp-Session-Id`` tell the session manager
  whether that client is still connected (``reclaim_after``). A client that ends its
  MCP session (``DELETE /mcp``) has its codemode session closed at once.
- On SIGTERM/SIGINT the server stops taking new clients (``503``) and new calls (a
  "shutting down" tool error), lets running calls finish (up to the grace period),
  cancels the rest with a clear error, and keeps answering the clients' other requests
  meanwhile, so every answer reaches its client. Then it closes the listening socket,
  ends the event streams, and closes every session before the upstream servers are
  disconnected. Exit status 0.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp

from codemode.capability import HttpEndpoint

from .calls import CallTracker
from .forwarded import TrustedProxies
from .front import Front, Traffic, is_loopback
from .health import DEFAULT_STALL_AFTER, Facts, HealthPort
from .lifecycle import ANSWER_FLUSH, GracefulStop, drain
from .sessions import SessionManager
from .toolset import ServerContext

if TYPE_CHECKING:
    from .connections import ConnectionLimits

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
SDK_IDLE_AFTER_OURS = 600.0
"""The SDK forgets an MCP session id with no request nor stream in flight this long after
ours would have expired (ours expire first: a clearer error)."""
SDK_SESSIONS_PER_SLOT = 16
SDK_MIN_SESSIONS = 1024
"""MCP session ids the SDK keeps at once: 16 per session slot and queue place, at least
1024 (about 40 KB each). Beyond that a new client gets ``503`` until one ends or goes
idle: a client that only says ``initialize``, over and over, cannot grow the server's
memory without bound (nor, under ``--tenants``, take other tenants' memory)."""
LISTEN_BACKLOG = 2048

__all__ = [
    "HEALTH_PATH",
    "MCP_PATH",
    "READY_PATH",
    "Front",
    "Traffic",
    "bind_socket",
    "build_http_app",
    "health_facts",
    "is_loopback",
    "serve_http",
]


def health_facts(sessions: SessionManager, calls: CallTracker) -> Facts:
    """``facts(path)`` for ``/healthz`` and ``/readyz``, read from counters only: the ASGI
    layer and the health port (``--health-port``) answer alike.

    ``/readyz`` is 503 while the server stops or when a new client could neither get a
    session nor a place in the queue, so a load balancer sends it elsewhere.
    """

    def facts(path: str) -> tuple[int, dict[str, Any]] | None:
        if path not in (HEALTH_PATH, READY_PATH):
            return None
        s = sessions
        data: dict[str, Any] = {
            "status": "ok",
            "sessions": len(s),
            "max_sessions": s.max_sessions,
            "queued": s.queued,
            "calls": len(calls),
            "stopping": s.draining,
        }
        status = 200
        if path == READY_PATH:
            ready = s.accepting
            data["status"] = "ready" if ready else ("stopping" if s.draining else "busy")
            status = 200 if ready else 503
        return status, data

    return facts


def sdk_idle_timeout(ours: float | None) -> float | None:
    """How long the SDK keeps an MCP session id nothing uses (None: until it is ended)."""
    return None if ours is None else ours + SDK_IDLE_AFTER_OURS


def mcp_sessions_cap(sessions: SessionManager) -> int:
    """How many MCP session ids the SDK keeps at once (``CODEMODE_HTTP_MAX_MCP_SESSIONS``)."""
    from .connections import MAX_MCP_SESSIONS_ENV, env_number

    slots = sessions.max_sessions + sessions.queue_size
    default = max(SDK_MIN_SESSIONS, SDK_SESSIONS_PER_SLOT * slots)
    cap: int = env_number(os.environ, MAX_MCP_SESSIONS_ENV, int, default)
    return cap


def build_http_app(
    server: MCPServer[Any],
    context: ServerContext,
    *,
    host: str = "127.0.0.1",
    token: str | None,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    on_ready: Callable[[], None] | None = None,
    stop: GracefulStop | None = None,
    health: socket.socket | None = None,
    stall_after: float = DEFAULT_STALL_AFTER,
    proxies: TrustedProxies | None = None,
) -> Starlette:
    """The ASGI app: ``/mcp`` (streamable HTTP), ``/healthz``, ``/readyz``.

    The app's lifespan runs the SDK's session manager, the session reaper and the
    graceful stop (``stop``, requested by :func:`serve_http` on a signal); at the end it
    closes every codemode session, then calls ``on_shutdown`` (upstream servers...).
    ``health``: a listening socket where a process of its own answers ``/healthz`` and
    ``/readyz`` off the event loop (:mod:`.health`), from the start of the lifespan to
    its very end (through the graceful stop). ``proxies``: the reverse proxies whose
    forwarded header names the client (:mod:`.forwarded`).
    """
    from sse_starlette.sse import AppStatus

    # Event streams must outlive the signal: they carry the answers of running calls.
    # ``drain`` ends them (AppStatus.should_exit) once those answers are out.
    AppStatus.disable_automatic_graceful_drain()  # type: ignore[no-untyped-call]
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        session_idle_timeout=sdk_idle_timeout(context.sessions.idle_timeout),
        max_sessions=mcp_sessions_cap(context.sessions),
        # On loopback, Front checks every route; the SDK's own check (``/mcp``
        # only, three exact hosts) would refuse loopback spellings it accepts, such as
        # ``localhost.`` or an Origin without a port.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False)
        if is_loopback(host)
        else None,
    )
    sessions = context.sessions
    traffic = Traffic()
    stop = stop if stop is not None else GracefulStop()

    async def graceful() -> None:
        await stop.wait()
        try:
            await drain(context, stop, traffic.wait_quiet)
        finally:
            AppStatus.should_exit = True  # ends the remaining event streams (GET)
            stop.drained()

    health_port = (
        HealthPort(
            health, health_facts(sessions, context.calls), (HEALTH_PATH, READY_PATH), stall_after
        )
        if health is not None
        else None
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as beat:  # the health port's heartbeat
            if health_port is not None:
                health_port.start()
                beat.start_soon(health_port.run)
            try:
                async with serving(app):
                    yield
            finally:
                beat.cancel_scope.cancel()
                if health_port is not None:
                    health_port.close()

    @asynccontextmanager
    async def serving(app: Starlette) -> AsyncIterator[None]:
        stop.bind()
        try:
            async with server.session_manager.run(), anyio.create_task_group() as tg:
                tg.start_soon(sessions.run_reaper)
                tg.start_soon(graceful)
                if on_ready is not None:
                    on_ready()
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                await sessions.aclose()
                if on_shutdown is not None:
                    await on_shutdown()
            AppStatus.should_exit = False

    routes: list[BaseRoute] = [*sdk_app.routes]
    open_paths: set[str] = set()
    for ep in capability_endpoints(context):
        routes.append(Route(ep.path, ep.handler, methods=["GET"]))
        if ep.own_auth:
            open_paths.add(ep.path)
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.graceful_stop = stop
    app.state.open_paths = frozenset(open_paths)
    shared = context.extras.get("shared_sessions")
    if shared is not None:  # stateless replicas: adopt the sessions others opened
        from .replicas import SessionAdoption

        app.add_middleware(
            SessionAdoption, manager=server.session_manager, shared=shared, path=MCP_PATH
        )
    app.add_middleware(
        Front,
        facts=health_facts(sessions, context.calls),
        sessions=sessions,
        traffic=traffic,
        token=token,
        loopback=is_loopback(host),
        open_paths=frozenset(open_paths),
        mcp_path=MCP_PATH,
        proxies=proxies,
    )
    return app


def capability_endpoints(context: ServerContext) -> list[HttpEndpoint]:
    """The routes the workspace's capabilities add (``/metrics``...)."""
    from codemode.assembly import http_endpoints, installed

    ws = context.workspace
    if ws is None:
        return http_endpoints(context, installed(), {})
    return http_endpoints(context, ws.capabilities, ws.sections)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket for ``host:port`` (port 0 picks a free one)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, socktype, proto, _, addr = infos[0]
    sock = socket.socket(family, socktype, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve_http(
    app: ASGIApp,
    sock: socket.socket,
    *,
    log_level: str = "warning",
    stop: GracefulStop | None = None,
    limits: ConnectionLimits | None = None,
    proxies: TrustedProxies | None = None,
) -> None:
    """Run ``app`` with uvicorn on an already-bound socket until SIGINT/SIGTERM.

    Connections are bounded by ``limits`` (by default from the environment): a head
    deadline and caps on open connections (:mod:`.connections`); the per-address cap does
    not apply to ``proxies`` (many clients share their address). Forwarded headers are
    read by :class:`.front.Front` alone (:mod:`.forwarded`): uvicorn's own reading, which
    trusts ``127.0.0.1`` unless told otherwise, is off.

    A signal starts the app's graceful stop (``stop``, by default the one
    :func:`build_http_app` put in the app's state; see the module doc); once it is over,
    uvicorn closes the listening socket and the connections, and runs the app's
    shutdown. The signal is not re-raised afterwards: a graceful stop exits with 0.
    """
    import uvicorn

    from .connections import ConnectionLimits, guarded_protocol

    if stop is None:
        assert isinstance(app, Starlette), "an app not built by build_http_app needs a stop"
        stop = app.state.graceful_stop
    assert stop is not None
    graceful: GracefulStop = stop

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            self.should_exit = True
            graceful.request()

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            if graceful.requests == 0:
                graceful.request()
            with anyio.move_on_after(graceful.grace + ANSWER_FLUSH + 5):
                await graceful.wait_drained()
            await super().shutdown(sockets)

    config = uvicorn.Config(
        app,
        log_level=log_level,
        lifespan="on",
        timeout_graceful_shutdown=5,
        access_log=False,
        backlog=LISTEN_BACKLOG,
        http=guarded_protocol(limits or ConnectionLimits.from_env(), proxies),
        proxy_headers=False,
    )
    await Server(config).serve(sockets=[sock])
