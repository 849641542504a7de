"""One HTTP endpoint, one app per tenant: authenticate, then hand the request to the
caller's own app (its own MCP sessions, workspace, upstream servers, executor).

A tenant's requests never reach another tenant's app: an MCP session id of another tenant
is unknown there. ``/healthz`` is open; with OAuth, so is the protected-resource metadata
(RFC 9728). 401 answers follow RFC 6750: ``error="invalid_token"``, and
``resource_metadata`` only when OAuth is configured (with static tokens only, a client must
not start an OAuth login it cannot complete).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from typing import Any
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from ..redact import secrets_of
from ..server.front import send_json_body
from .auth import Authenticator, Refusal
from .config import OAuthConfig

HEALTH_PATH = "/healthz"
METADATA_ROOT = "/.well-known/oauth-protected-resource"


def metadata_url(oauth: OAuthConfig) -> str:
    """Where the protected-resource metadata of ``oauth.resource`` is (RFC 9728 3.1)."""
    parts = urlsplit(oauth.resource)
    return f"{parts.scheme}://{parts.netloc}{METADATA_ROOT}{parts.path.rstrip('/')}"


class TenantRouter:
    """ASGI: auth in front of ``apps`` (tenant -> Starlette app, whose lifespans it runs)."""

    def __init__(
        self,
        apps: Mapping[str, Any],
        auth: Authenticator,
        *,
        on_ready: Callable[[], None] | None = None,
        open_routes: Mapping[str, ASGIApp] | None = None,
        counts: Callable[[], dict[str, int]] | None = None,
    ) -> None:
        """``counts``: process-wide figures ``/healthz`` adds (sessions, queued)."""
        self.apps = dict(apps)
        self.open_routes = dict(open_routes or {})
        """``GET``/``HEAD`` paths served without a token, and the app that serves them: the
        console's page, which holds no data (its script asks ``/api/console`` with the
        token the person types, and that request is routed to the token's tenant)."""
        self._counts = counts
        self.auth = auth
        self.on_ready = on_ready
        oauth = auth.oauth
        self._metadata: bytes | None = None
        self._metadata_paths: frozenset[str] = frozenset()
        self._challenge = b'Bearer realm="codemode", error="invalid_token"'
        if oauth is not None:
            url = metadata_url(oauth)
            self._metadata = json.dumps(
                {
                    "resource": oauth.resource,
                    "authorization_servers": [oauth.issuer],
                    "bearer_methods_supported": ["header"],
                    "resource_signing_alg_values_supported": [oauth.algorithm],
                }
            ).encode()
            self._metadata_paths = frozenset({METADATA_ROOT, urlsplit(url).path})
            self._resource_metadata = f'resource_metadata="{url}"'.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path = scope["path"]
        if path == HEALTH_PATH:
            facts = {"status": "ok", "tenants": len(self.apps)}
            if self._counts is not None:
                facts |= self._counts()
            await send_json_body(send, 200, json.dumps(facts).encode())
            return
        if self._metadata is not None and path in self._metadata_paths:
            await send_json_body(send, 200, self._metadata)
            return
        page = self.open_routes.get(path)
        if page is not None and scope["method"] in ("GET", "HEAD"):
            await page(scope, receive, send)
            return
        given = next((v for k, v in scope["headers"] if k == b"authorization"), b"")
        who = await self.auth.authenticate(given)
        if isinstance(who, Refusal):
            await self._refuse(send, who)
            return
        app: ASGIApp = self.apps[who]
        with secrets_of(who):  # its text is searched for its own secrets and the host's
            await app(scope, receive, send)

    async def _refuse(self, send: Send, why: Refusal) -> None:
        if self._metadata is None:
            challenge = self._challenge
        elif not why.token_given:  # RFC 6750 3.1: no error code when no token was sent
            challenge = b'Bearer realm="codemode", ' + self._resource_metadata
        else:
            challenge = self._challenge + b", " + self._resource_metadata
        body = json.dumps({"error": "invalid_token", "error_description": why.description})
        await send_json_body(send, 401, body.encode(), [(b"www-authenticate", challenge)])

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        await receive()  # lifespan.startup
        async with AsyncExitStack() as stack:
            # A tenant whose app cannot start stops the server (uvicorn reports the error).
            for app in self.apps.values():
                await stack.enter_async_context(app.router.lifespan_context(app))
            await send({"type": "lifespan.startup.complete"})
            if self.on_ready is not None:
                self.on_ready()
            await receive()  # lifespan.shutdown
        await send({"type": "lifespan.shutdown.complete"})


__all__ = ["HEALTH_PATH", "METADATA_ROOT", "TenantRouter", "metadata_url"]
