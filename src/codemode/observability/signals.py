"""What other packages report to the metrics, in one line each at the place it happens.

- privacy calls ``pii_tokenized_counts({entity: n})`` when it replaces personal data with
  tokens;
- the approval layer calls ``approval(decision)`` when a person (or a remembered answer)
  decides;
- ``codemode serve``'s session manager calls ``session_started()`` and
  ``session_ended(reason)``;
- the subprocess executor calls ``worker_acquired(seconds, source)`` when a session gets
  its worker (from the warm pool or freshly spawned);
- tracing calls ``spans_dropped(n, reason)`` when spans will never be exported.

Each counts into ``default_metrics()`` and costs a dict lookup; label values are capped or
taken from a fixed vocabulary, so callers may pass what they have. This module imports
``prometheus_client`` only on the first signal, so low layers may import it freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from .labels import OTHER

if TYPE_CHECKING:
    from .metrics import Metrics

DECISIONS = ("granted", "refused", "timeout", "remembered", "no_approver", "error")
SESSION_END_REASONS = ("expired", "client_gone", "closed", "shutdown")
WORKER_SOURCES = ("pool", "spawn")
DROP_REASONS = ("backlog", "export_process")


def _metrics() -> Metrics:
    from .metrics import default_metrics

    return default_metrics()


def pii_tokenized(entity: str, n: int = 1) -> None:
    """``n`` values of type ``entity`` (EMAIL, PHONE, IBAN...) were tokenized."""
    pii_tokenized_counts({entity: n})


def pii_tokenized_counts(found: Mapping[str, int]) -> None:
    """``pii_tokenized`` of each entity type in ``found``, with one look-up of the metrics
    (a scan reports several types: 2 us each when looked up every time)."""
    m = _metrics()
    children = m.pii_children
    for entity, n in found.items():
        if n:
            child = children.get(entity)
            if child is None:
                # (an admitted type stays admitted: its child is kept)
                admitted = isinstance(entity, str) and m.entities.admit(entity)
                child = m.pii_tokenized.labels(entity if admitted else OTHER)
                if admitted:
                    children[entity] = child
            child.inc(n)


def approval(decision: str) -> None:
    """A call that needed approval was decided: granted, refused, timeout, remembered,
    no_approver (nobody could be asked), error (the approver failed)."""
    _metrics().approvals.labels(decision if decision in DECISIONS else OTHER).inc()


def session_started() -> None:
    """``codemode serve`` opened a session."""
    _metrics().sessions_created.inc()


def session_ended(reason: str) -> None:
    """A server session ended: expired (idle), client_gone, closed (by the client), shutdown."""
    _metrics().sessions_ended.labels(reason if reason in SESSION_END_REASONS else OTHER).inc()


def worker_acquired(seconds: float, source: str) -> None:
    """A session got a ready worker after ``seconds``, from the warm ``pool`` or a ``spawn``."""
    label = source if source in WORKER_SOURCES else OTHER
    _metrics().worker_acquire.labels(label).observe(seconds)


def spans_dropped(n: int, reason: str) -> None:
    """``n`` spans will not be exported: ``backlog`` (the emitter fell too far behind) or
    ``export_process`` (the process exporting them was not running)."""
    _metrics().spans_dropped.labels(reason if reason in DROP_REASONS else OTHER).inc(n)


__all__ = [
    "DECISIONS",
    "DROP_REASONS",
    "SESSION_END_REASONS",
    "WORKER_SOURCES",
    "approval",
    "pii_tokenized",
    "session_ended",
    "session_started",
    "spans_dropped",
    "worker_acquired",
]
