"""Observability as a capability: metrics layers at the ``observe`` stage, ``/metrics``.

Cheap to import: ``prometheus_client`` loads when the first layer or endpoint is built.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..capability import Capability, HttpEndpoint
from ..chain import RunHook
from .config import ObservabilityConfig

if TYPE_CHECKING:
    from ..server.toolset import ServerContext
    from ..tools.registry import Middleware

METRICS_PATH = "/metrics"


def _tool_layers(config: ObservabilityConfig) -> Iterator[tuple[str, Middleware]]:
    if config.metrics:
        from .metrics import default_metrics

        metrics = default_metrics()
        metrics.tool_labels.cap = config.max_tool_labels
        yield "observe", metrics.tool_layer


def _run_hooks(config: ObservabilityConfig) -> Iterator[tuple[str, RunHook]]:
    if config.metrics:
        from .metrics import default_metrics

        yield "observe", default_metrics().run_hook


def _http_endpoints(config: ObservabilityConfig, ctx: ServerContext) -> Iterator[HttpEndpoint]:
    if config.metrics:
        from .http import metrics_endpoint

        yield metrics_endpoint(config, ctx)


OBSERVABILITY = Capability(
    name="observability",
    config=ObservabilityConfig,
    tool_layers=_tool_layers,
    run_hooks=_run_hooks,
    http_endpoints=_http_endpoints,
)

__all__ = ["METRICS_PATH", "OBSERVABILITY"]
