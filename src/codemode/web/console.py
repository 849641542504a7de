"""The console's routes: the page (static, no data, no token) and ``/api/console``.

The page's script asks ``/api/console`` for everything it shows, with the token the person
typed; that route sits behind the server's bearer auth like ``/mcp``. The page is plain
HTML, CSS and one script, served with a Content-Security-Policy that allows nothing else
(no inline script, no other origin), and the script writes what it got as text, never as
HTML: code and output of agents' runs cannot script the operator's browser.
"""

from __future__ import annotations

import time
from importlib import resources
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..capability import SHARED_PROCESS, HttpEndpoint
from .runs import RunLog, short_id

if TYPE_CHECKING:
    from ..server.toolset import ServerContext

UI_PATH = "/ui"
API_PATH = "/api/console"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_STATIC = {
    UI_PATH: ("index.html", "text/html; charset=utf-8"),
    f"{UI_PATH}/app.js": ("app.js", "text/javascript; charset=utf-8"),
    f"{UI_PATH}/app.css": ("app.css", "text/css; charset=utf-8"),
}
PAGE_PATHS = frozenset(_STATIC)
"""The page's own files: the same bytes for everyone, no data, so served without a token
(also by the tenants' router, before it knows whose token a request will carry)."""
HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def static_endpoints() -> list[HttpEndpoint]:
    """The page, its script and its style: files of this package, read once."""
    files = resources.files(__package__).joinpath("static")
    out = []
    for path, (name, media) in _STATIC.items():
        body = files.joinpath(name).read_bytes()

        async def handler(request: Request, body: bytes = body, media: str = media) -> Response:
            return Response(body, media_type=media, headers=HEADERS)

        out.append(HttpEndpoint(path, handler, own_auth=True))
    return out


SHARED_NOTE = "this process serves several tenants: its metrics are all of theirs (/metrics)"


def state(ctx: ServerContext, runs: RunLog) -> dict[str, Any]:
    """Everything the console shows, as JSON-ready data: only this server's tenant's runs
    and questions. Metrics are process-wide, so a server shared by several tenants
    (``codemode serve --tenants``) leaves them out."""
    from ..approval.layer import pending_approvals
    from ..observability.metrics import default_metrics
    from ..observability.summary import samples_of_registry, summarize

    tenant = ctx.settings.tenant if ctx.settings is not None else None
    shared = bool(ctx.extras.get(SHARED_PROCESS))
    now, wall = ctx.sessions.now(), time.time()
    sessions = [
        {
            "id": short_id(key),
            "age_s": round(now - created, 1),
            "idle_s": round(now - used, 1) if busy == 0 else 0.0,
            "calls": busy,
        }
        for key, created, used, busy in ctx.sessions.snapshot()
    ]
    calls = [{"tool": name, "running_s": round(wall - t, 1)} for name, t in ctx.calls.running()]
    approvals = [
        {
            "tool": f"{p['server']}.{p['tool']}",
            "tenant": p["tenant"],
            "waiting_s": round(wall - p["since"], 1),
        }
        for p in pending_approvals()
        if tenant is None or p["tenant"] == tenant
    ]
    rows = [] if shared else summarize(samples_of_registry(default_metrics().registry))
    return {
        "time": wall,
        "sessions": sessions,
        "sessions_max": ctx.sessions.max_sessions,
        "calls": calls,
        "runs": runs.snapshot(tenant),
        "approvals": approvals,
        "metrics": [r.as_dict() for r in rows],
        "metrics_note": SHARED_NOTE if shared else "",
    }


def api_endpoint(ctx: ServerContext, runs: RunLog) -> HttpEndpoint:
    async def handler(request: Request) -> Response:
        return JSONResponse(state(ctx, runs), headers={"cache-control": "no-store"})

    return HttpEndpoint(API_PATH, handler)


__all__ = [
    "API_PATH",
    "CSP",
    "SHARED_PROCESS",
    "UI_PATH",
    "api_endpoint",
    "state",
    "static_endpoints",
]
