"""The one ASGI layer in front of ``codemode serve``'s HTTP app: health, loopback names,
auth and client tracking, checked in that order in one pass.

Why one layer: the order of these checks is a security rule (health before auth,
rebinding before auth, auth before anything reaches a session), and one ``__call__``
states it where four stacked middleware classes left it to the order of
``add_middleware`` calls. Each request also goes through one coroutine instead of four;
that saves under 1 us of CPU per request (of a ~1.6-2 ms call at 50 sessions, issue 13), so
it is not a reason to fold further layers in here.

The rules (docs/server.md, "HTTP"), outermost first:

1. ``GET``/``HEAD`` ``/healthz`` and ``/readyz``: answered from counters, before auth
   and before anything that can wait.
2. On a loopback address, a ``Host`` (or ``Origin``) naming another host is refused
   (``421``/``403``) on every route: a page re-pointed at 127.0.0.1 (DNS rebinding)
   reads and runs nothing, even under ``--no-auth``.
3. ``Authorization: Bearer <token>`` on every route but the open ones (``401``).
4. ``/mcp``: each request carries a :class:`~codemode.server.calls.ClientLink` and
   tells the session manager whether its client is still there (see :mod:`.http`); a
   POST whose event stream would carry only its answer is answered as JSON
   (:mod:`.answers`: its connection is reused).
5. ``POST /mcp``: a batch, an id MCP does not allow, or an id still in progress in the
   same MCP session is answered here (:mod:`.posts`), never by the SDK.
"""

from __future__ import annotations

import functools
import hmac
import ipaddress
import json
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .answers import answer_plainly
from .calls import ClientLink
from .forwarded import TrustedProxies
from .posts import MAX_BODY, BodyCheck, InFlightIds, read_body
from .sessions import SessionManager
from .toolset import LINK_SCOPE_KEY

Facts = Callable[[str], "tuple[int, dict[str, Any]] | None"]

__all__ = ["Front", "Traffic", "is_loopback"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def send_json(send: Send, status: int, data: Any, headers: list[tuple[bytes, bytes]]) -> None:
    await send_json_body(
        send, status, json.dumps(data).encode(), [(b"cache-control", b"no-store"), *headers]
    )


async def send_json_body(
    send: Send, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    """A whole JSON answer whose body is already encoded (the tenants' router keeps some)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


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
    """The host of a ``Host`` header value (``name``, ``name:port``, ``[v6]:port``); None
    when it is none of those (``[::1].evil.example`` is not ``[::1]``)."""
    if authority.startswith("["):
        end = authority.find("]")
        rest = authority[end + 1 :]
        if end < 0 or (rest and not (rest[0] == ":" and (rest[1:].isdigit() or rest == ":"))):
            return None
        return authority[1:end]
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


def _refusal(header: str, value: str | None) -> dict[str, str]:
    return {
        "error": "misdirected_request",
        "error_description": f"this codemode server listens on a loopback address and "
        f"answers only requests whose {header} is loopback (127.0.0.1, [::1], localhost), "
        f"not {value!r}: a web page that re-pointed its name here (DNS rebinding) is refused",
    }


_AUTH_ERROR = {
    "error": "invalid_token",
    "error_description": "codemode serve needs 'Authorization: Bearer <token>' "
    "(the token is CODEMODE_TOKEN, or the one printed at start).",
}
# error="invalid_token" and no resource_metadata: a client must not start an OAuth
# login this server cannot complete (RFC 6750, RFC 9728).
_CHALLENGE = [(b"www-authenticate", b'Bearer realm="codemode", error="invalid_token"')]


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None


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


class Front:
    """The checks of the module doc, then ``app``.

    ``token=None`` lets every request through auth (``--no-auth`` on loopback only);
    ``loopback``: the server listens on a loopback address (rule 2 applies);
    ``open_paths``: routes that check their own credentials.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        facts: Facts,
        sessions: SessionManager,
        traffic: Traffic,
        token: str | None,
        loopback: bool,
        open_paths: frozenset[str] = frozenset(),
        mcp_path: str = "/mcp",
        proxies: TrustedProxies | None = None,
    ) -> None:
        self.app = app
        self._facts = facts
        self._sessions = sessions
        self._traffic = traffic
        self._expected = f"Bearer {token}".encode() if token is not None else None
        self._loopback = loopback
        self._open = open_paths
        self._mcp = mcp_path
        self._proxies = proxies
        self._ids = InFlightIds()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if scope["method"] in ("GET", "HEAD"):
                found = self._facts(path)
                if found is not None:
                    await send_json(send, found[0], found[1], [])
                    return
        elif kind != "websocket":  # lifespan
            await self.app(scope, receive, send)
            return
        headers = scope["headers"]
        if self._loopback:
            host = header(headers, b"host")
            if host is None or not _loopback_authority(host):
                await send_json(send, 421, _refusal("Host", host), [])
                return
            origin = header(headers, b"origin")
            if origin is not None and not _origin_is_loopback(origin):
                await send_json(send, 403, _refusal("Origin", origin), [])
                return
        if kind != "http":
            await self.app(scope, receive, send)
            return
        if self._expected is not None and path not in self._open:
            given = b""
            for name, value in headers:
                if name == b"authorization":
                    given = value
                    break
            if not hmac.compare_digest(given, self._expected):
                await send_json(send, 401, _AUTH_ERROR, _CHALLENGE)
                return
        if path == self._mcp:
            await self._watch(scope, receive, send)
        else:
            await self.app(scope, receive, send)

    async def _watch(self, scope: Scope, receive: Receive, send: Send) -> None:
        """An ``/mcp`` request: link it to its client (rule 4)."""
        sessions = self._sessions
        method = scope["method"]
        sid = header(scope["headers"], b"mcp-session-id")
        keys = [f"mcp:{sid}"] if sid else []
        peer = scope.get("client")
        client = str(peer[0]) if peer else None
        if self._proxies:  # behind a reverse proxy named by --forwarded-allow-ips
            client = self._proxies.client(client, scope["headers"])
        link = ClientLink(client)
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
                new = None if sid else header(message.get("headers", []), b"mcp-session-id")
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
            await send_json(send, 503, error, [(b"retry-after", b"5")])
            return
        key = None
        if method == "POST":
            body, receive = await read_body(receive, MAX_BODY)
            check = BodyCheck(body)
            if check.error is not None:
                await send_json(send, 400, check.error, [])
                return
            key = check.key if sid else None
        elif method == "GET":  # no event store: a stream is never resumed, only opened
            scope["headers"] = [h for h in scope["headers"] if h[0] != b"last-event-id"]
        holding = self._ids.hold(sid, key) if sid and key is not None else nullcontext(True)
        with holding as free:
            if not free:
                await send_json(send, 400, check.reused(), [])
                return
            stream = method == "GET"
            if keys:
                sessions.attach(keys[0])
            if not stream:
                self._traffic.begin()
            try:
                answer = answer_plainly(watch_send) if method == "POST" else watch_send
                await self.app(scope, watch_receive, answer)
            finally:
                if not stream:
                    self._traffic.end()
                for k in keys:  # an unknown session id (404) leaves no trace
                    sessions.detach(k, known=status < 400)
        if method == "DELETE" and sid and 200 <= status < 300:
            await sessions.drop(f"mcp:{sid}")
