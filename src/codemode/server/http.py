"""Streamable HTTP for ``codemode serve``: auth, health, client tracking, graceful stop.

Rules (docs/server.md, "HTTP"):

- Every request except ``GET /healthz`` and ``GET /readyz`` needs ``Authorization:
  Bearer <token>``. The only way to turn that off is ``--no-auth`` on a loopback
  address; ``serve`` refuses ``--no-auth`` on any other address.
- No CORS headers are sent, so browsers on other origins cannot call the server. On a
  loopback address every route (``/mcp``, ``/ui``, ``/api/*``, ``/metrics``) refuses a
  ``Host`` or ``Origin`` that names another host (:class:`LoopbackHosts`): a web page
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

import functools
import hmac
import ipaddress
import json
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
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemode.capability import HttpEndpoint

from .calls import CallTracker, ClientLink
from .health import DEFAULT_STALL_AFTER, Facts, HealthPort
from .lifecycle import ANSWER_FLUSH, GracefulStop, drain
from .sessions import SessionManager
from .toolset import LINK_SCOPE_KEY, ServerContext

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
    "BearerAuth",
    "ClientWatch",
    "HealthCheck",
    "LoopbackHosts",
    "Traffic",
    "bind_socket",
    "build_http_app",
    "health_facts",
    "is_loopback",
    "serve_http",
]


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def _send_json(
    send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(data).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BearerAuth:
    """ASGI middleware: refuse HTTP requests without the right bearer token.

    ``token=None`` lets everything through (``--no-auth`` on loopback only).
    """

    def __init__(
        self, app: ASGIApp, token: str | None, *, open_paths: frozenset[str] = frozenset()
    ) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode() if token is not None else None
        self._open = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._expected is None or scope["path"] in self._open:
            await self.app(scope, receive, send)
            return
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
                break
        if hmac.compare_digest(given, self._expected):
            await self.app(scope, receive, send)
            return
        error = {
            "error": "invalid_token",
            "error_description": "codemode serve needs 'Authorization: Bearer <token>' "
            "(the token is CODEMODE_TOKEN, or the one printed at start).",
        }
        # error="invalid_token" and no resource_metadata: a client must not start an OAuth
        # login this server cannot complete (RFC 6750, RFC 9728).
        challenge = b'Bearer realm="codemode", error="invalid_token"'
        await _send_json(send, 401, error, [(b"www-authenticate", challenge)])


def _loopback_name(host: str) -> bool:
    """``localhost`` (any case, and ``localhost.``, its fully qualified spelling), or a
    loopback address. ``localhost.evil.example`` and the like are other hosts."""
    name = host.lower()
    return name in ("localhost", "localhost.") or is_loopback(host)


def _loopback_authority(authority: str) -> bool:
    """Whether a ``Host`` value names a loopback host. Remembered, since every request
    of a client sends the same one (parsing it as an address cost ~2 % of a call); only
    values a host and port can be, so the cache stays small whatever clients send."""
    if len(authority) > 300:
        return _is_loopback_authority(authority)
    return _remembered_authority(authority)


def _is_loopback_authority(authority: str) -> bool:
    name = _host_of(authority)
    return name is not None and _loopback_name(name)


_remembered_authority = functools.lru_cache(maxsize=256)(_is_loopback_authority)


def _host_of(authority: str) -> str | None:
    """The host of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``)."""
    if authority.startswith("["):
        end = authority.find("]")
        return authority[1:end] if end > 0 else None
    host, _, port = authority.partition(":")
    if ":" in port or (port and not port.isdigit()):
        return None
    return host or None


def _origin_is_loopback(origin: str) -> bool:
    scheme, sep, rest = origin.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or "/" in rest or "@" in rest:
        return False
    host = _host_of(rest)
    return host is not None and _loopback_name(host)


class LoopbackHosts:
    """ASGI middleware for a server bound to a loopback address: refuse any request whose
    ``Host`` (or ``Origin``, when sent) names a host that is not loopback.

    Why: a browser sends a page's requests to whatever its host name resolves to. A page
    on ``evil.example`` that re-points its name at 127.0.0.1 (DNS rebinding) is, to the
    browser, same-origin with the server, so the missing CORS headers stop nothing; the
    ``Host`` it sends still says ``evil.example``. Covers every route, not just ``/mcp``.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        host = _header(headers, b"host")
        if host is None or not _loopback_authority(host):
            await _send_json(send, 421, _refusal("Host", host), [])
            return
        origin = _header(headers, b"origin")
        if origin is not None and not _origin_is_loopback(origin):
            await _send_json(send, 403, _refusal("Origin", origin), [])
            return
        await self.app(scope, receive, send)


def _refusal(header: str, value: str | None) -> dict[str, str]:
    return {
        "error": "misdirected_request",
        "error_description": f"this codemode server listens on a loopback address and "
        f"answers only requests whose {header} is loopback (127.0.0.1, [::1], localhost), "
        f"not {value!r}: a web page that re-pointed its name here (DNS rebinding) is refused",
    }


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


class HealthCheck:
    """Outermost ASGI layer: ``/healthz`` (alive) and ``/readyz`` (takes new clients).

    Both are answered from counters (:func:`health_facts`) before auth and before anything
    that can wait; still on the event loop (the health port's process is not).
    """

    def __init__(self, app: ASGIApp, sessions: SessionManager, calls: CallTracker) -> None:
        self.app = app
        self._facts = health_facts(sessions, calls)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        found = self._facts(path) if isinstance(path, str) else None
        if found is None or scope["method"] not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        status, data = found
        await _send_json(send, status, data, [])


class Traffic:
    """How many ``/mcp`` requests (not event streams) are in flight."""

    def __init__(self) -> None:
        self.requests = 0
        self._quiet: anyio.Event | None = None

    def begin(self) -> None:
        self.requests += 1

    def end(self) -> None:
        self.requests -= 1
        if self.requests == 0 and self._quiet is not None:
            self._quiet.set()
            self._quiet = None

    async def wait_quiet(self) -> None:
        """Return once no request is in flight (every answer has been sent)."""
        while self.requests:
            if self._quiet is None:
                self._quiet = anyio.Event()
            await self._quiet.wait()


def _header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


class ClientWatch:
    """ASGI middleware on ``/mcp``: links each request to its client (see module doc)."""

    def __init__(
        self, app: ASGIApp, sessions: SessionManager, traffic: Traffic, path: str = MCP_PATH
    ) -> None:
        self.app = app
        self._sessions = sessions
        self._traffic = traffic
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        sessions = self._sessions
        method = scope["method"]
        sid = _header(scope["headers"], b"mcp-session-id")
        keys = [f"mcp:{sid}"] if sid else []
        peer = scope.get("client")
        link = ClientLink(str(peer[0]) if peer else None)
        scope[LINK_SCOPE_KEY] = link
        answered = False
        status = 0

        async def watch_receive() -> Message:
            message = await receive()
            if message["type"] == "http.disconnect" and not answered:
                link.lost()
            return message

        async def watch_send(message: Message) -> None:
            nonlocal answered, status
            if message["type"] == "http.response.start":
                status = message["status"]
                new = None if sid else _header(message.get("headers", []), b"mcp-session-id")
                if new:  # the answer to initialize: the client is here from now on
                    keys.append(f"mcp:{new}")
                    sessions.attach(keys[-1])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True
            await send(message)

        if sid is None and method == "POST" and sessions.draining:
            error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": (
                "the codemode server is shutting down and takes no new clients; retry in a "
                "moment (or on another server)")}}  # fmt: skip
            await _send_json(send, 503, error, [(b"retry-after", b"5")])
            return
        stream = method == "GET"
        if keys:
            sessions.attach(keys[0])
        if not stream:
            self._traffic.begin()
        try:
            await self.app(scope, watch_receive, watch_send)
        finally:
            if not stream:
                self._traffic.end()
            for key in keys:  # an unknown session id (404) leaves no trace
                sessions.detach(key, known=status < 400)
        if method == "DELETE" and sid and 200 <= status < 300:
            await sessions.drop(f"mcp:{sid}")


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
) -> Starlette:
    """The ASGI app: ``/mcp`` (streamable HTTP), ``/healthz``, ``/readyz``.

    The app's lifespan runs the SDK's session manager, the session reaper and the
    graceful stop (``stop``, requested by :func:`serve_http` on a signal); at the end it
    closes every codemode session, then calls ``on_shutdown`` (upstream servers...).
    ``health``: a listening socket where a process of its own answers ``/healthz`` and
    ``/readyz`` off the event loop (:mod:`.health`), from the start of the lifespan to
    its very end (through the graceful stop).
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
        # On loopback, LoopbackHosts checks every route; the SDK's own check (``/mcp``
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
    shared = context.extras.get("shared_sessions")
    if shared is not None:  # stateless replicas: adopt the sessions others opened
        from .replicas import SessionAdoption

        app.add_middleware(
            SessionAdoption, manager=server.session_manager, shared=shared, path=MCP_PATH
        )
    app.add_middleware(ClientWatch, sessions=sessions, traffic=traffic, path=MCP_PATH)
    app.add_middleware(BearerAuth, token=token, open_paths=frozenset(open_paths))
    if is_loopback(host):
        app.add_middleware(LoopbackHosts)
    app.add_middleware(HealthCheck, sessions=sessions, calls=context.calls)
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
) -> None:
    """Run ``app`` with uvicorn on an already-bound socket until SIGINT/SIGTERM.

    Connections are bounded by ``limits`` (by default from the environment): a head
    deadline and caps on open connections (:mod:`.connections`).

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
        http=guarded_protocol(limits or ConnectionLimits.from_env()),
    )
    await Server(config).serve(sockets=[sock])
