"""The web console as a capability: its run log's layers (stage ``observe``) and routes.

Cheap to import: the routes and the run log load when the server or a session asks.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..capability import Capability, HttpEndpoint
from ..chain import RunHook
from .config import WebConfig

if TYPE_CHECKING:
    from ..tools.registry import Middleware


def _tool_layers(config: WebConfig) -> Iterator[tuple[str, Middleware]]:
    if config.console:
        from .runs import run_log

        yield "observe", run_log(config.recent_runs).tool_layer


def _run_hooks(config: WebConfig) -> Iterator[tuple[str, RunHook]]:
    if config.console:
        from .runs import run_log

        yield "observe", run_log(config.recent_runs).run_hook


def _http_endpoints(config: WebConfig, ctx: Any) -> Iterator[HttpEndpoint]:
    if not config.console:
        return
    from .console import api_endpoint, static_endpoints
    from .runs import run_log

    yield from static_endpoints()
    yield api_endpoint(ctx, run_log(config.recent_runs))


WEB = Capability(
    name="web",
    config=WebConfig,
    tool_layers=_tool_layers,
    run_hooks=_run_hooks,
    http_endpoints=_http_endpoints,
)

__all__ = ["WEB"]
