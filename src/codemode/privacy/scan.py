"""The scanner: every detector over a text, overlaps resolved, existing tokens left alone.

``Scanner.spans(text)`` is the one place detection happens; tokenizing, redacting, the
stream scanner and the quality benchmark all go through it. Overlaps are resolved by
priority (a secret beats everything; configured recognizers and deny-lists beat the
built-in types; checked numbers beat loose shapes; NER comes last), then by length.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .detectors import Detector
from .tokens import TOKEN_RE

__all__ = ["PRIORITY", "Scanner", "Span"]

PRIORITY = (
    "SECRET",
    "IBAN",
    "CREDIT_CARD",
    "US_SSN",
    "EMAIL",
    "IP_ADDRESS",
    "PHONE",
)
"""Built-in types, strongest first; custom types rank just after SECRET, NER types last."""


@dataclass(frozen=True, slots=True)
class Span:
    start: int
    end: int
    entity: str


class Scanner:
    """Runs detectors over text; ``allow`` values (case-insensitive) are never reported."""

    def __init__(
        self,
        detectors: Sequence[Detector],
        *,
        allow: Iterable[str] = (),
        custom: Iterable[str] = (),
        ner: Iterable[str] = (),
    ) -> None:
        self.detectors = list(detectors)
        self.allow = frozenset(a.strip().casefold() for a in allow if a.strip())
        custom_rank = {e: 1 for e in custom}
        base = {e: i + 2 for i, e in enumerate(PRIORITY[1:])}
        self._rank = {"SECRET": 0, **custom_rank, **base}
        self._last = len(PRIORITY) + 2
        self._ner = frozenset(ner)
        self.entities = tuple(dict.fromkeys(e for d in self.detectors for e in d.entities))

    def rank(self, entity: str) -> int:
        if entity in self._ner:
            return self._last + 1
        return self._rank.get(entity, 1)

    def spans(self, text: str) -> list[Span]:
        """Non-overlapping detections in ``text``, in order."""
        if not text:
            return []
        found: list[tuple[int, int, int, str]] = []
        for det in self.detectors:
            for start, end, entity in det.find(text):
                if end > start:
                    found.append((self.rank(entity), start - end, start, entity))
        if not found:
            return []
        # Existing tokens are taken first: nothing is detected inside one.
        taken: list[tuple[int, int]] = [m.span() for m in TOKEN_RE.finditer(text)]
        taken.sort()
        starts = [s for s, _ in taken]
        out: list[Span] = []
        found.sort()
        for _rank, neg_len, start, entity in found:
            end = start - neg_len
            i = bisect.bisect_left(starts, end)
            if i > 0 and taken[i - 1][1] > start:
                continue  # overlaps something already taken
            if self.allow and text[start:end].strip().casefold() in self.allow:
                continue
            taken.insert(i, (start, end))
            starts.insert(i, start)
            out.append(Span(start, end, entity))
        out.sort(key=lambda s: s.start)
        return out
