"""Streamable HTTP for ``codemode serve``: bearer-token auth, ``/healthz``, clean shutdown.

Rules (docs/server.md, "HTTP"):

- Every request except ``GET /healthz`` needs ``Authorization: Bearer <token>``. The
  only way to turn that off is ``--no-auth`` on a loopback address; ``serve`` refuses
  ``--no-auth`` on any other address.
- No CORS headers are sent, so browsers on other origins cannot call the server. On
  loopback the SDK also checks ``Host``/``Origin`` against DNS rebinding.
- A client that ends its MCP session (``DELETE /mcp``) has its codemode session closed
  at once; others are closed when idle for too long, and all at shutdown, before the
  upstream servers are disconnected.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemode.capability import HttpEndpoint

from .toolset import ServerContext

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
SDK_IDLE_TIMEOUT = 24 * 3600.0
"""The SDK forgets an MCP session id after this long; ours expire first (clearer error)."""

__all__ = ["HEALTH_PATH", "MCP_PATH", "BearerAuth", "bind_socket", "build_http_app", "is_loopback"]


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and ``localhost``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class BearerAuth:
    """ASGI middleware: refuse HTTP requests without the right bearer token.

    ``token=None`` lets everything through (``--no-auth`` on loopback only).
    """

    def __init__(self, app: ASGIApp, token: str | None, *, open_paths: frozenset[str]) -> None:
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
        body = json.dumps(
            {
                "error": "unauthorized",
                "error_description": "codemode serve needs 'Authorization: Bearer <token>' "
                "(the token is CODEMODE_TOKEN, or the one printed at start).",
            }
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="codemode"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


class SessionEndWatcher:
    """ASGI middleware: when a client deletes its MCP session, close its codemode session."""

    def __init__(self, app: ASGIApp, on_end: Callable[[str], Awaitable[Any]], path: str) -> None:
        self.app = app
        self._on_end = on_end
        self._path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "DELETE" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        sid = next(
            (v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-session-id"), None
        )
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if sid and 200 <= status < 300:
            await self._on_end(f"mcp:{sid}")


def build_http_app(
    server: MCPServer[Any],
    context: ServerContext,
    *,
    host: str = "127.0.0.1",
    token: str | None,
    on_shutdown: Callable[[], Awaitable[None]] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> Starlette:
    """The ASGI app: ``/mcp`` (streamable HTTP), ``/healthz``; auth around both but health.

    The app's lifespan runs the SDK's session manager and the idle-session reaper; on
    shutdown it closes every codemode session, then calls ``on_shutdown`` (which closes
    the upstream servers).
    """
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        session_idle_timeout=SDK_IDLE_TIMEOUT,
    )
    sessions = context.sessions

    async def healthz(request: Request) -> Response:
        return JSONResponse(
            {"status": "ok", "sessions": len(sessions), "max_sessions": sessions.max_sessions}
        )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            async with server.session_manager.run(), anyio.create_task_group() as tg:
                tg.start_soon(sessions.run_reaper)
                if on_ready is not None:
                    on_ready()
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            await sessions.aclose()
            if on_shutdown is not None:
                with anyio.CancelScope(shield=True):
                    await on_shutdown()

    routes: list[BaseRoute] = [Route(HEALTH_PATH, healthz, methods=["GET"]), *sdk_app.routes]
    open_paths = {HEALTH_PATH}
    for ep in capability_endpoints(context):
        routes.append(Route(ep.path, ep.handler, methods=["GET"]))
        if ep.own_auth:
            open_paths.add(ep.path)
    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(SessionEndWatcher, on_end=sessions.drop, path=MCP_PATH)
    app.add_middleware(BearerAuth, token=token, open_paths=frozenset(open_paths))
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
        sock.listen(256)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


async def serve_http(app: Starlette, sock: socket.socket, *, log_level: str = "warning") -> None:
    """Run ``app`` with uvicorn on an already-bound socket until SIGINT/SIGTERM."""
    import uvicorn

    config = uvicorn.Config(
        app, log_level=log_level, lifespan="on", timeout_graceful_shutdown=10, access_log=False
    )
    await uvicorn.Server(config).serve(sockets=[sock])
