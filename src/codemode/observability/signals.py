"""What other capabilities report to the metrics, in one line each at the place it happens.

Privacy calls ``pii_tokenized(entity, n)`` when it replaces personal data with tokens;
the approval layer calls ``approval(decision)`` when a person (or a remembered answer)
decides. Both count into ``default_metrics()`` and cost a dict lookup; label values are
capped or taken from a fixed vocabulary, so callers may pass what they have.
"""

from __future__ import annotations

from .labels import OTHER
from .metrics import default_metrics

DECISIONS = ("granted", "refused", "timeout", "remembered")


def pii_tokenized(entity: str, n: int = 1) -> None:
    """``n`` values of type ``entity`` (EMAIL, PHONE, IBAN...) were tokenized."""
    m = default_metrics()
    label = entity if isinstance(entity, str) and m.entities.admit(entity) else OTHER
    m.pii_tokenized.labels(label).inc(n)


def approval(decision: str) -> None:
    """A call that needed approval was decided: granted, refused, timeout, remembered."""
    default_metrics().approvals.labels(decision if decision in DECISIONS else OTHER).inc()


__all__ = ["DECISIONS", "approval", "pii_tokenized"]
