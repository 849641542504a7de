"""The ``codemode_*`` metrics as a short table for people: ``codemode stats`` prints it,
the web console shows it.

Both read samples, not ``Metrics`` objects: the console from this process's registry, the
CLI from a server's ``/metrics`` text, so the two show the same rows for the same numbers.
Percentiles are estimated from histogram buckets (the upper bound of the bucket that holds
the rank), as Prometheus' ``histogram_quantile`` would, without interpolation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from ..printable import printable

Sample = tuple[str, Mapping[str, str], float]
"""(sample name, labels, value): ``codemode_runs_total``, ``{"outcome": "ok"}``, ``3.0``."""


@dataclass(frozen=True, slots=True)
class Row:
    section: str
    name: str
    value: float | str

    def as_dict(self) -> dict[str, float | str]:
        return {"section": self.section, "name": self.name, "value": self.value}


def samples_of_registry(registry: CollectorRegistry) -> list[Sample]:
    return [
        (s.name, s.labels, s.value)
        for family in registry.collect()
        if family.name.startswith("codemode_")
        for s in family.samples
    ]


def samples_of_text(text: str) -> list[Sample]:
    """Samples of a Prometheus text exposition (what ``/metrics`` answers)."""
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        if family.name.startswith("codemode_")
        for s in family.samples
    ]


class _Index:
    def __init__(self, samples: Iterable[Sample]) -> None:
        self.by_name: dict[str, list[tuple[Mapping[str, str], float]]] = {}
        for name, labels, value in samples:
            self.by_name.setdefault(name, []).append((labels, value))

    def total(self, name: str, **match: str) -> float:
        return float(
            sum(
                v
                for labels, v in self.by_name.get(name, ())
                if all(labels.get(k) == want for k, want in match.items())
            )
        )

    def by(self, name: str, label: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, v in self.by_name.get(name, ()):
            key = labels.get(label, "")
            out[key] = out.get(key, 0.0) + v
        return out

    def quantile(self, name: str, q: float) -> float | None:
        """The bucket bound at quantile ``q`` of histogram ``name`` (all label sets)."""
        buckets: dict[float, float] = {}
        for labels, v in self.by_name.get(f"{name}_bucket", ()):
            bound = float(labels.get("le", "+Inf"))
            buckets[bound] = buckets.get(bound, 0.0) + v
        if not buckets:
            return None
        bounds = sorted(buckets)
        count = buckets[bounds[-1]]
        if count <= 0:
            return None
        rank = q * count
        for bound in bounds:
            if buckets[bound] >= rank:
                return bound
        return bounds[-1]


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if math.isinf(seconds):
        return "> largest bucket"
    return f"<= {seconds * 1000:g} ms"


def summarize(samples: Iterable[Sample], *, top_tools: int = 10) -> list[Row]:
    """The rows of ``codemode stats``: counts by section, zero counts left out where a
    label splits them (an outcome nobody had), kept where they are the headline."""
    ix = _Index(samples)
    rows: list[Row] = []

    def add(section: str, name: str, value: float | str) -> None:
        rows.append(Row(section, name, value))

    add("runs", "total", ix.total("codemode_runs_total"))
    for outcome, n in sorted(ix.by("codemode_runs_total", "outcome").items()):
        if n:
            add("runs", f"outcome {outcome}", n)
    add("runs", "in progress", ix.total("codemode_runs_in_progress"))
    count = ix.total("codemode_run_duration_seconds_count")
    if count:
        mean = ix.total("codemode_run_duration_seconds_sum") / count
        add("runs", "duration mean", f"{mean * 1000:.1f} ms")
        add("runs", "duration p50", _ms(ix.quantile("codemode_run_duration_seconds", 0.5)))
        add("runs", "duration p95", _ms(ix.quantile("codemode_run_duration_seconds", 0.95)))
    add("runs", "output tokens (estimated)", ix.total("codemode_run_output_tokens_estimated_total"))
    ratio = ix.total("codemode_context_efficiency_ratio")
    add("runs", "context kept in sandbox", f"{ratio * 100:.1f} %")

    add("tool calls", "total", ix.total("codemode_tool_calls_total"))
    for outcome, n in sorted(ix.by("codemode_tool_calls_total", "outcome").items()):
        if n:
            add("tool calls", f"outcome {outcome}", n)
    per_tool: dict[str, float] = {}
    for labels, v in ix.by_name.get("codemode_tool_calls_total", ()):
        key = f"{labels.get('server', '')}.{labels.get('tool', '')}"
        per_tool[key] = per_tool.get(key, 0.0) + v
    for key, n in sorted(per_tool.items(), key=lambda kv: (-kv[1], kv[0]))[:top_tools]:
        add("tool calls", f"tool {key}", n)
    for reason, n in sorted(ix.by("codemode_tool_denials_total", "reason").items()):
        if n:
            add("tool calls", f"denied by {reason}", n)
    for budget, n in sorted(ix.by("codemode_budget_hits_total", "budget").items()):
        if n:
            add("tool calls", f"budget hit {budget}", n)

    for decision, n in sorted(ix.by("codemode_approvals_total", "decision").items()):
        if n:
            add("approvals", decision, n)
    for entity, n in sorted(ix.by("codemode_pii_tokenized_total", "entity").items()):
        if n:
            add("privacy", f"tokenized {entity}", n)

    add("sessions", "active", ix.total("codemode_sessions_active"))
    add("sessions", "created", ix.total("codemode_sessions_created_total"))
    for reason, n in sorted(ix.by("codemode_sessions_ended_total", "reason").items()):
        if n:
            add("sessions", f"ended {reason}", n)
    for source, n in sorted(ix.by("codemode_worker_acquire_seconds_count", "source").items()):
        if n:
            total = ix.total("codemode_worker_acquire_seconds_sum", source=source)
            add("workers", f"from {source}", n)
            add("workers", f"from {source} mean wait", f"{total / n * 1000:.1f} ms")
    add("workers", "ready in pool", ix.total("codemode_pool_ready_workers"))

    memory = ix.by("codemode_memory_operations_total", "method")
    add("memory", "operations", float(sum(memory.values())))
    for method, n in sorted(memory.items()):
        if n:
            add("memory", method, n)
    return rows


def table(rows: Iterable[Row]) -> str:
    """Rows as aligned text: section, name, value. Names hold upstream servers' tool names,
    which may carry any character: shown with :func:`~codemode.printable.printable`."""
    rows = [Row(r.section, printable(r.name), r.value) for r in rows]
    width = max((len(r.name) for r in rows), default=0)
    lines, last = [], None
    for r in rows:
        if r.section != last:
            lines.append(f"{r.section}")
            last = r.section
        value = f"{r.value:g}" if isinstance(r.value, float) else r.value
        lines.append(f"  {r.name.ljust(width)}  {value}")
    return "\n".join(lines)


__all__ = ["Row", "Sample", "samples_of_registry", "samples_of_text", "summarize", "table"]
