"""Stateless ``serve`` replicas: an MCP session id issued by one replica works on all.

The MCP SDK's streamable HTTP session manager answers 404 to a session id it did not
issue itself. With shared sessions on (``executor: ray`` and Redis storage), this ASGI
layer sits in front of it and:

- writes down each session the SDK opens: the id (hashed) and the client's
  ``initialize`` parameters, in the shared directory (Redis), before the client learns
  the id;
- adopts an id this replica does not know but the directory does: it opens the SDK's
  transport under that id with the handshake already done (the recorded parameters and
  the request's ``MCP-Protocol-Version``), so the request goes on as if this replica had
  issued it. The codemode session behind it finds its interpreter through the same
  directory (``codemode.cluster.shared``);
- ends the session's actor when its client ends the MCP session (``DELETE``).

Requests in flight, and the elicitation and sampling they wait on, stay on the replica
that holds their stream: a load balancer keeps ``Mcp-Session-Id`` affinity for those
(docs/ray.md, "Stateless serve replicas").

This is the one module that reaches into the SDK's session manager (its transports
table, task group and lifespan state, 2.x); ``tests/cluster/test_replicas.py`` runs it
against real replicas.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import anyio
from mcp.server.connection import Connection
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import InitializeRequestParams
from pydantic import ValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from codemode.errors import StorageUnavailable

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    from codemode.cluster.shared import SharedSessions

logger = logging.getLogger(__name__)

UNAVAILABLE = -32000
"""JSON-RPC server error code of a request refused because the shared directory is down."""
MAX_HANDSHAKE_BYTES = 64 * 1024
"""An ``initialize`` request larger than this is served but not shared."""


def _header(scope: Scope | Message, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


class SessionAdoption:
    """ASGI layer on ``/mcp`` in front of the SDK (see the module doc)."""

    def __init__(
        self, app: ASGIApp, manager: StreamableHTTPSessionManager, shared: SharedSessions, path: str
    ) -> None:
        self.app = app
        self._manager = manager
        self._shared = shared
        self._path = path
        self._lock = anyio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != self._path:
            await self.app(scope, receive, send)
            return
        sid = _header(scope, b"mcp-session-id")
        if sid is None:
            if scope["method"] == "POST":
                await self._opening(scope, receive, send)
                return
        elif sid not in self._manager._server_instances:
            try:
                await self._adopt(sid, scope)
            except StorageUnavailable as exc:
                await _unavailable(send, str(exc))
                return
        status = 0

        async def watch(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        await self.app(scope, receive, watch)
        if sid is not None and scope["method"] == "DELETE" and 200 <= status < 300:
            try:
                await self._shared.directory.forget_mcp_session(sid)
                await self._shared.end(f"mcp:{sid}")
            except StorageUnavailable as exc:  # the answer is sent: the records expire
                logger.warning("an ended session stays recorded until it expires: %s", exc)

    # -- a new session ---------------------------------------------------------------
    async def _opening(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = bytearray()

        async def seen() -> Message:
            message = await receive()
            if message["type"] == "http.request" and len(body) <= MAX_HANDSHAKE_BYTES:
                body.extend(message.get("body", b""))
            return message

        async def record(message: Message) -> None:
            if message["type"] == "http.response.start":
                new = _header(message, b"mcp-session-id")
                params = _initialize_params(bytes(body))
                if new and params is not None:
                    # Before the client learns the id: any replica may see it next.
                    try:
                        await self._shared.directory.add_mcp_session(new, {"params": params})
                    except StorageUnavailable as exc:
                        logger.warning("a new session is served by this replica only: %s", exc)
            await send(message)

        await self.app(scope, seen, record)

    # -- another replica's session ---------------------------------------------------
    async def _adopt(self, sid: str, scope: Scope) -> None:
        record = await self._shared.directory.mcp_session(sid)
        if record is None:
            return  # unknown everywhere: the SDK answers 404
        async with self._lock:
            manager = self._manager
            if sid in manager._server_instances or manager._task_group is None:
                return
            version = _header(scope, b"mcp-protocol-version")
            transport = StreamableHTTPServerTransport(
                mcp_session_id=sid,
                is_json_response_enabled=manager.json_response,
                event_store=manager.event_store,
                security_settings=manager.security_settings,
                retry_interval=manager.retry_interval,
                idle_timeout=manager.session_idle_timeout,
            )
            manager._server_instances[sid] = transport

            async def run_server(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
                async with transport.connect() as (read_stream, write_stream):
                    task_status.started()
                    try:
                        idle = transport.idle_scope or anyio.CancelScope()
                        with idle:
                            dispatcher: JSONRPCDispatcher[Any] = JSONRPCDispatcher(
                                read_stream, write_stream, inline_methods=frozenset({"initialize"})
                            )
                            connection = _handshaken(dispatcher, sid, record, version)
                            await serve_connection(
                                manager.app,
                                dispatcher,
                                connection=connection,
                                lifespan_state=manager._lifespan_state,
                            )
                    except Exception:
                        logger.exception("adopted session crashed")
                    finally:
                        await manager._discard_session(sid, transport)

            await manager._task_group.start(run_server)
        logger.info("adopted an MCP session another replica opened")


async def _unavailable(send: Send, why: str) -> None:
    """503 with a JSON-RPC error saying why: the client may retry, nothing was run."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": UNAVAILABLE, "message": why}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"retry-after", b"5"),
               (b"content-length", str(len(body)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _initialize_params(body: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if isinstance(message, dict) and message.get("method") == "initialize":
        params = message.get("params")
        return params if isinstance(params, dict) else None
    return None


def _handshaken(
    dispatcher: JSONRPCDispatcher[Any], sid: str, record: dict[str, Any], version: str | None
) -> Connection:
    """A connection whose handshake another replica did: born ready."""
    params: InitializeRequestParams | None = None
    try:
        params = InitializeRequestParams.model_validate(record.get("params") or {})
    except ValidationError:
        params = None
    if version is None and params is not None:
        version = params.protocol_version
    connection = Connection.for_loop(dispatcher, session_id=sid, protocol_version_hint=version)
    connection.client_params = params
    connection.initialized.set()
    return connection
