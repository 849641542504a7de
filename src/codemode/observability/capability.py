"""Observability as a capability: metrics and tracing layers at the ``observe`` stage
(metrics outermost), and ``/metrics``.

Cheap to import: ``prometheus_client`` and OpenTelemetry load when a layer is built.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..capability import Capability, HttpEndpoint
from ..chain import RunHook
from .config import ObservabilityConfig

if TYPE_CHECKING:
    import click

    from ..hostapi import HostLayer
    from ..server.toolset import ServerContext
    from ..tools.registry import Middleware
    from .tracing import Tracing

METRICS_PATH = "/metrics"


def _layers(config: ObservabilityConfig) -> list[Any]:
    """The objects whose layers go at stage ``observe``, outermost first: metrics and
    tracing as one (``observe.Observe``: one frame a tool call) when both are on."""
    layers: list[Any] = []
    if config.metrics:
        from .metrics import default_metrics

        metrics = default_metrics()
        metrics.tool_labels.cap = config.max_tool_labels
        layers.append(metrics)
    if config.tracing != "off":
        layers.append(_tracing(config))
    if len(layers) == 2:
        from .observe import Observe

        return [Observe(*layers)]
    return layers


def _tool_layers(config: ObservabilityConfig) -> Iterator[tuple[str, Middleware]]:
    for each in _layers(config):
        yield "observe", each.tool_layer


def _run_hooks(config: ObservabilityConfig) -> Iterator[tuple[str, RunHook]]:
    for each in _layers(config):
        yield "observe", each.run_hook


def _host_layers(config: ObservabilityConfig) -> Iterator[HostLayer]:
    for each in _layers(config):
        yield each.host_layer


_tracers: dict[tuple[tuple[str, str, str | None, float, bool], bool], Tracing] = {}


def _tracing(config: ObservabilityConfig) -> Tracing:
    """One ``Tracing`` per exporter setting in this process (registry and sessions share it)."""
    from .providers import exporting_provider
    from .tracing import Tracing

    key = (config.tracing, config.service_name, config.otlp_endpoint, config.trace_sample_ratio)
    got = _tracers.get(((*key, config.trace_export_process), config.trace_propagation))
    if got is None:
        if config.trace_export_process:
            got = Tracing.exporting(*key, propagate=config.trace_propagation)
        else:
            got = Tracing(exporting_provider(*key), propagate=config.trace_propagation)
        _tracers[((*key, config.trace_export_process), config.trace_propagation)] = got
    return got


def _http_endpoints(config: ObservabilityConfig, ctx: ServerContext) -> Iterator[HttpEndpoint]:
    from .http import metrics_endpoint, tools_search_endpoint

    if config.metrics:
        yield metrics_endpoint(config, ctx)
    yield tools_search_endpoint(ctx)


def _command(name: str) -> click.Command:
    from .cli import stats

    return stats


OBSERVABILITY = Capability(
    name="observability",
    config=ObservabilityConfig,
    tool_layers=_tool_layers,
    run_hooks=_run_hooks,
    http_endpoints=_http_endpoints,
    host_layers=_host_layers,
    commands={"stats": "Show a codemode server's counters (runs, tools, sessions)."},
    command=_command,
)

__all__ = ["METRICS_PATH", "OBSERVABILITY"]
