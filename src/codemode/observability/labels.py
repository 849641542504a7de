"""Label values with a bounded number of distinct values.

Prometheus keeps one series per distinct label set, forever: a label fed from agents'
code (an exception class it defined) or a growing catalog (server and tool names) could
grow a scrape without end. Values are therefore either from a fixed vocabulary or kept
up to a cap, after which they count as ``_other``.
"""

from __future__ import annotations

import builtins
import threading

from .. import errors

OTHER = "_other"

_BUILTIN_ERRORS = frozenset(
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)
_CODEMODE_ERRORS = frozenset(errors.__all__)
KNOWN_ERROR_TYPES = _BUILTIN_ERRORS | _CODEMODE_ERRORS | {"Timeout"}
"""Error types of runs named as themselves: Python's and codemode's; the rest are _other."""


def error_type(name: str) -> str:
    """``name`` if Python or codemode defines it, else ``_other``."""
    return name if name in KNOWN_ERROR_TYPES else OTHER


class Capped:
    """Remembers up to ``cap`` distinct values; later new ones become ``_other``."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._seen: set[object] = set()
        self._lock = threading.Lock()

    def admit(self, value: object) -> bool:
        """True when ``value`` may be a label (seen before, or room is left)."""
        if value in self._seen:
            return True
        with self._lock:
            if len(self._seen) >= self.cap:
                return value in self._seen
            self._seen.add(value)
            return True


__all__ = ["KNOWN_ERROR_TYPES", "OTHER", "Capped", "error_type"]
