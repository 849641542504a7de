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

from ..capability import SHARED_PROCESS, HttpEndpoint
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

    shared = bool(ctx.extras.get(SHARED_PROCESS))

    async def handler(request: Request) -> Response:
        if shared:  # every tenant's calls, by server and tool: not one tenant's to read
            return JSONResponse(
                {
                    "error": "forbidden",
                    "error_description": "this process serves several tenants (--tenants): "
                    "its metrics count all of their calls, so no tenant's token reads them",
                },
                status_code=403,
            )
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


SEARCH_PATH = "/api/tools/search"
MAX_LIMIT = 100


def tools_search_endpoint(ctx: ServerContext) -> HttpEndpoint:
    """``GET /api/tools/search?query=&detail_level=&limit=``: the seeds' debugging view of
    tool discovery, ranked as ``search_tools`` ranks (behind the server's token)."""
    from ..tools.search import DETAILS

    async def handler(request: Request) -> Response:
        q = request.query_params
        detail = q.get("detail_level", "name")
        raw_limit = q.get("limit", "10")
        problems = []
        if detail not in DETAILS:
            problems.append(f"detail_level must be one of {', '.join(DETAILS)}, not {detail!r}")
        # isdecimal, not isdigit ("²" is a digit int() refuses); short, as int() refuses
        # more than 4,300 digits: a bad limit is a 400, never a 500.
        limit = int(raw_limit) if raw_limit.isdecimal() and len(raw_limit) <= 6 else -1
        if not 1 <= limit <= MAX_LIMIT:
            problems.append(
                f"limit must be a whole number from 1 to {MAX_LIMIT}, not {raw_limit!r}"
            )
        if problems:
            return JSONResponse({"error": "bad_request", "problems": problems}, status_code=400)
        if ctx.tools is None:
            return JSONResponse({"query": q.get("query", ""), "tools": []})
        found = await ctx.tools.search(q.get("query", ""), detail, limit)
        return JSONResponse({"query": q.get("query", ""), "tools": found})

    return HttpEndpoint(SEARCH_PATH, handler)


__all__ = ["SEARCH_PATH", "metrics_endpoint", "tools_search_endpoint"]
