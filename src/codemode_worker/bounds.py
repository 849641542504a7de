"""One wording for every cut: how much was cut, out of how much there really was.

Shared by the worker (its output capture, value reprs, tracebacks) and the host (replies to
clients, tool errors, stderr tails), so a reader sees the same marker everywhere and the
size it states is always the size of the original, not of an already-cut copy::

    [... 4,980,000 of 5,000,000 characters truncated; <how to get everything> ...]

Standard library only: this module runs inside the sandbox too.
"""

from __future__ import annotations

import re

__all__ = ["keep_ends", "keep_head", "marker", "split_marker"]

_MARKER = re.compile(
    r"\n?\[\.\.\. (?P<cut>[\d,]+) of (?P<total>[\d,]+) (?P<unit>[a-z]+) truncated"
    r"(?:; (?P<hint>[^\n]*?))? \.\.\.\]\n?"
)


def marker(cut: int, total: int, unit: str = "characters", hint: str = "") -> str:
    """``[... CUT of TOTAL UNIT truncated; HINT ...]``."""
    more = f"; {hint}" if hint else ""
    return f"[... {cut:,} of {total:,} {unit} truncated{more} ...]"


def keep_head(text: str, limit: int, *, total: int | None = None, hint: str = "") -> str:
    """The first ``limit`` characters and a marker; ``total`` is the original size when
    ``text`` is itself already a head of something larger."""
    size = len(text) if total is None else max(total, len(text))
    shown = min(len(text), max(0, limit))
    if shown == size:
        return text
    return f"{text[:shown]}\n{marker(size - shown, size, hint=hint)}\n"


def keep_ends(text: str, limit: int, *, total: int | None = None, hint: str = "") -> str:
    """The first and last ``limit // 2`` characters around a marker.

    ``total`` (the original size) may be larger than ``len(text)`` when part of ``text``
    was already lost upstream; the marker states the original size either way.
    """
    size = len(text) if total is None else max(total, len(text))
    if len(text) <= limit:
        if size == len(text):
            return text
        return f"{text}\n{marker(size - len(text), size, hint=hint)}\n"
    limit = max(0, limit)
    head, tail = limit - limit // 2, limit // 2
    note = marker(size - limit, size, hint=hint)
    end = text[len(text) - tail :] if tail else ""
    return f"{text[:head]}\n{note}\n{end}"


def split_marker(text: str) -> tuple[str, int | None, str]:
    """Undo :func:`keep_head` or :func:`keep_ends`: ``(text without its last marker, the
    original size it states, its hint)``, or ``(text, None, "")`` when there is none."""
    found = None
    for found in _MARKER.finditer(text):  # noqa: B007 - the last one is wanted
        pass
    if found is None:
        return text, None, ""
    total = int(found.group("total").replace(",", ""))
    return text[: found.start()] + text[found.end() :], total, found.group("hint") or ""
