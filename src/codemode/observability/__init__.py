"""Observability: Prometheus metrics of runs and tool calls (``codemode_*``).

SDK use: ``default_metrics()`` is what workspace sessions count into (its ``registry``
is a ``prometheus_client.CollectorRegistry`` to expose any way you like); or build a
``Metrics()`` and add ``metrics.tool_layer`` / ``metrics.run_hook`` at stage ``observe``.
Names load on first use, so importing the capability (or ``signals``, which the executor
and the server call) stays cheap: no pydantic, no prometheus_client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import ObservabilityConfig
    from .metrics import Metrics, default_metrics


def __getattr__(name: str) -> Any:
    if name in ("Metrics", "default_metrics"):
        from . import metrics

        return getattr(metrics, name)
    if name == "ObservabilityConfig":
        from .config import ObservabilityConfig

        return ObservabilityConfig
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Metrics", "ObservabilityConfig", "default_metrics"]
