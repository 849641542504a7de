"""``GET /metrics`` on ``codemode serve --transport http``, with its own auth setting.

``metrics_auth``: ``server`` leaves it behind the server's bearer token (the default);
``token`` lets only ``metrics_token`` read it, so a Prometheus server never holds the
token that runs code; ``none`` opens it to anyone who reaches the port.
"""

from __future__ import annotations

import hmac
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..capability import HttpEndpoint
from .capability import METRICS_PATH
from .config import ObservabilityConfig
from .metrics import Metrics, default_metrics

if TYPE_CHECKING:
    from ..server.toolset import ServerContext


def metrics_endpoint(
    config: ObservabilityConfig, ctx: ServerContext, metrics: Metrics | None = None
) -> HttpEndpoint:
    """The route; it also makes the server's live sessions a gauge of ``metrics``."""
    m = metrics if metrics is not None else default_metrics()
    sessions = ctx.sessions
    m.gauge_function("codemode_sessions_active", "Open codemode sessions.", lambda: len(sessions))
    m.gauge_function(
        "codemode_sessions_max", "Most sessions the server holds.", lambda: sessions.max_sessions
    )
    expected: bytes | None = None
    if config.metrics_auth == "token" and config.metrics_token is not None:
        expected = f"Bearer {config.metrics_token.get_secret_value()}".encode()

    async def handler(request: Request) -> Response:
        if expected is not None:
            given = request.headers.get("authorization", "").encode("latin-1", "replace")
            if not hmac.compare_digest(given, expected):
                return JSONResponse(
                    {
                        "error": "unauthorized",
                        "error_description": "/metrics needs 'Authorization: Bearer <token>' "
                        "with the metrics token (observability.metrics_token).",
                    },
                    status_code=401,
                    headers={"www-authenticate": 'Bearer realm="codemode-metrics"'},
                )
        return Response(m.exposition(), media_type=m.content_type)

    return HttpEndpoint(METRICS_PATH, handler, own_auth=config.metrics_auth != "server")


__all__ = ["metrics_endpoint"]
