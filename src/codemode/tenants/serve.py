"""``codemode serve --transport http --tenants FILE``: one endpoint, a workspace per tenant.

Each tenant gets everything a single-workspace server has, built separately: its workspace
(skills, artifacts, state, deps, files, policy, audit), its upstream servers (its own
``mcp.json``, ``${VAR}`` from its own ``env_file``, run as its own uid when codemode is
root), its executor and its MCP sessions. ``TenantRouter`` sends each request to the app
of the tenant its token names.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import TYPE_CHECKING, Any

import anyio

from ..redact import secrets_of
from .asgi import TenantRouter
from .auth import Authenticator
from .config import Tenants, load_tenants

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..server.cli import ServeOptions


async def serve_tenants(opts: ServeOptions) -> None:
    from ..capability import SHARED_PROCESS
    from ..server.cli import _connect_upstream, _say, open_served
    from ..server.http import bind_socket, build_http_app, serve_http
    from ..server.lifecycle import GracefulStop, GracefulStops

    assert opts.tenants is not None
    tenants = load_tenants(opts.tenants)
    check_storage_apart(tenants)
    from ..isolation.servers import keep_private

    keep_private(
        [opts.tenants]
        + [
            path
            for spec in tenants.spec.tenants.values()
            for path in (spec.workspace, spec.token_file, spec.env_file)
            if path is not None
        ]
    )
    from ..server.session_cap import SessionCap, default_total

    total = opts.max_sessions_total or default_total(opts.max_sessions)
    cap = SessionCap(total, opts.client_share)  # the tenants' session managers share it
    apps: dict[str, Any] = {}
    registries: list[Any] = []
    stops: list[GracefulStop] = []
    for name, spec in tenants.spec.tenants.items():
        own = dataclasses.replace(opts, base=spec.workspace, token=None)
        with secrets_of(name):  # the ${VAR} of its configuration are its secrets
            served = await open_served(
                own,
                spec.workspace,
                env=tenants.environment(name),
                tenant=name,
                cap=cap,
                allow_unjailed=spec.allow_unjailed,
            )
            _check_audit_key(served.context.workspace)
            _check_vault_key(served.context.workspace)
        registries.append(served.context.tools)
        stops.append(GracefulStop(opts.shutdown_grace))
        # One process, many tenants: the console leaves out the process-wide metrics.
        served.context.extras[SHARED_PROCESS] = True
        apps[name] = build_http_app(
            served.server,
            served.context,
            host=opts.host,
            token=None,
            on_shutdown=served.close_upstream,
            stop=stops[-1],
            proxies=opts.proxies,
        )
    from ..server.process import set_up_log_handlers, settle_collector

    set_up_log_handlers(opts.log_level)
    sock = bind_socket(opts.host, opts.port)
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{shown}:{bound[1]}/mcp"
    how = "static tokens" + (" and OAuth" if tenants.oauth is not None else "")
    router = TenantRouter(
        apps,
        Authenticator(tenants),
        open_routes=console_pages(apps),
        counts=lambda: {"sessions": cap.used, "queued": cap.queued},
        on_ready=lambda: _say(
            f"serving MCP on {url} for {len(apps)} tenants ({how}); at most "
            f"{opts.max_sessions} sessions per tenant, {total} in all"
        ),
    )
    settle_collector()  # as a single-tenant serve does
    async with anyio.create_task_group() as tg:
        for registry in registries:
            tg.start_soon(_connect_upstream, registry)
        stop = GracefulStops(stops, opts.shutdown_grace, watchdog=True)
        await serve_http(
            router, sock, log_level=opts.log_level.lower(), stop=stop, proxies=opts.proxies
        )
        tg.cancel_scope.cancel()


def _check_audit_key(workspace: Any) -> None:
    """Find a tenant's audit key now (its env_file's, or the server's derived for it): a
    missing one would otherwise fail each of its calls, long after the start."""
    from ..audit.capability import AUDIT, trail_for

    config = workspace.section(AUDIT) if workspace is not None else None
    if config is not None and config.enabled:
        trail_for(config).keys_for(str(workspace.path))


def _check_vault_key(workspace: Any) -> None:
    """Find a tenant's vault key now: a vault written with the server's key before tenants
    had their own keeps that key, and the warning that says so belongs to the start."""
    from ..errors import StorageUnavailable
    from ..privacy.layers import vault_store

    config = workspace.sections.get("privacy") if workspace is not None else None
    if config is None or not config.enabled or config.vault.scope != "workspace":
        return
    try:
        vault_store(
            config, workspace.path, workspace.settings, workspace.settings.tenant, workspace
        )
    except StorageUnavailable as exc:  # its first call says so again
        log.warning("privacy: tenant %s's vault: %s", workspace.settings.tenant, exc)


def console_pages(apps: dict[str, Any]) -> dict[str, Any]:
    """The console page's files, served without a token by a tenant's app that has the
    console on: a browser cannot send a bearer token for a page it navigates to, and the
    page itself holds nothing of any tenant's."""
    from ..web.console import PAGE_PATHS

    pages: dict[str, Any] = {}
    for app in apps.values():
        for path in PAGE_PATHS & app.state.open_paths:
            pages.setdefault(path, app)
    return pages


def check_storage_apart(tenants: Tenants) -> None:
    """Refuse tenants whose Redis key prefixes are equal or nested.

    A workspace on Redis keeps its skills, artifacts, state and checkpoints under its
    ``redis_prefix`` (``codemode`` unless its config.json says otherwise): two tenants left
    at the default would read, run and overwrite each other's skills. Prefixes are compared
    whatever the URLs say, since two spellings of a URL can name one server."""
    from ..errors import ConfigError
    from ..workspace import Workspace

    seen: dict[str, str] = {}
    for name, spec in tenants.spec.tenants.items():
        with secrets_of(name):
            settings = Workspace.open(
                spec.workspace, env=tenants.environment(name), tenant=name
            ).settings
        if settings.storage != "redis":
            continue
        mine = settings.redis_prefix
        for prefix, other in seen.items():
            if mine == prefix or mine.startswith(prefix + ":") or prefix.startswith(mine + ":"):
                raise ConfigError(
                    f"{tenants.source}: tenants {other!r} and {name!r} keep their skills, "
                    f"artifacts and state under the Redis prefixes {prefix!r} and {mine!r}: "
                    "each would read and overwrite the other's; give each tenant its own "
                    "redis_prefix in its config.json"
                )
        seen[mine] = name


__all__ = ["check_storage_apart", "serve_tenants"]
