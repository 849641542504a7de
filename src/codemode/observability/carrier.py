"""The trace context an upstream MCP request carries, when the run's span identity can
say it without OpenTelemetry's propagator (set by ``identity.install_carrier``).

Why: the MCP SDK injects ``traceparent`` into each request's ``_meta`` through the global
propagator: some fifteen Python calls per tool call on the event loop's thread (span
lookups, ABC checks, the ids formatted again), run with caches cold after the wait for
the previous answer, ~1.3 µs each call when hot. Here the run's ``Identity`` formats its
header once, and a call passes it to the SDK as the request's ``_meta`` with no span
current, so the SDK injects nothing; its checks per call are mostly C calls. What
is sent is the same: only when the SDK would send exactly that
(``identity.install_carrier``). Measured on the upstream row of
``benchmarks/bench_observability.py`` (5 calls over stdio, 5 pairs against the SDK's
inject, load ~3): the loop CPU propagation adds, 50 -> 35 µs a run (medians); the
rest of propagation's cost is the upstream server reading the header.

Imports nothing: the MCP tool source reads ``carry`` on every call, with or without the
``otel`` extra.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

carry: Callable[[], tuple[dict[str, str], Any] | None] | None = None
"""None until tracing is set up; then, per call: the ``_meta`` to send and a token for
``restore`` (no span is current until then), or None (the SDK passes the trace on, or
there is none)."""

restore: Callable[[Any], Any] = lambda token: None  # noqa: E731
"""Makes current again what was before ``carry`` (in the same task)."""

__all__ = ["carry", "restore"]
