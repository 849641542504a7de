"""Score a scanner on a labelled corpus: recall and precision per entity type.

The corpus is JSON lines, one snippet each: ``{"text": ..., "entities": [{"type", "start",
"end"}], "negatives": [{"kind", "start", "end"}]}`` (``tests/privacy/corpus`` holds the
frozen one; ``codemode privacy eval FILE`` scores any file of this shape, so a user can
check custom recognizers on their own data).

A detection is a true positive when it overlaps a labelled value of the same type; one
that overlaps nothing labelled is a false positive, and is charged to the hard-negative
kind it overlaps (``order_id``, ``iso_timestamp``...) when there is one.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .scan import Scanner

__all__ = ["Score", "load_corpus", "score"]


@dataclass
class Score:
    """Counts per entity type, and false positives per hard-negative kind."""

    tp: Counter[str] = field(default_factory=Counter)
    fn: Counter[str] = field(default_factory=Counter)
    fp: Counter[str] = field(default_factory=Counter)
    exact: Counter[str] = field(default_factory=Counter)
    fp_kinds: Counter[str] = field(default_factory=Counter)
    negatives: Counter[str] = field(default_factory=Counter)
    misses: list[tuple[str, str]] = field(default_factory=list)
    false_hits: list[tuple[str, str]] = field(default_factory=list)

    def recall(self, entity: str) -> float:
        total = self.tp[entity] + self.fn[entity]
        return self.tp[entity] / total if total else 1.0

    def precision(self, entity: str) -> float:
        total = self.tp[entity] + self.fp[entity]
        return self.tp[entity] / total if total else 1.0

    def fp_rate(self) -> float:
        """False positives per hard negative placed in the corpus."""
        total = sum(self.negatives.values())
        return sum(self.fp_kinds.values()) / total if total else 0.0

    def entities(self) -> list[str]:
        return sorted(set(self.tp) | set(self.fn) | set(self.fp))

    def table(self) -> str:
        lines = [
            f"{'entity':<12} {'labelled':>8} {'found':>6} {'recall':>8} {'precision':>9} "
            f"{'false+':>6} {'exact span':>10}"
        ]
        for e in self.entities():
            labelled = self.tp[e] + self.fn[e]
            exact = self.exact[e] / self.tp[e] if self.tp[e] else 0.0
            lines.append(
                f"{e:<12} {labelled:>8} {self.tp[e]:>6} {self.recall(e):>8.2%} "
                f"{self.precision(e):>9.2%} {self.fp[e]:>6} {exact:>10.1%}"
            )
        lines.append("")
        lines.append(
            f"hard negatives: {sum(self.negatives.values())} placed, "
            f"{sum(self.fp_kinds.values())} reported ({self.fp_rate():.2%})"
        )
        for kind, n in self.fp_kinds.most_common():
            lines.append(f"  {kind:<16} {n:>4} of {self.negatives[kind]}")
        return "\n".join(lines)


def load_corpus(path: Path) -> Iterator[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def _overlaps(a0: int, a1: int, b0: int, b1: int) -> bool:
    return a0 < b1 and b0 < a1


def score(scanner: Scanner, rows: Iterable[dict[str, Any]], *, types: Iterable[str] = ()) -> Score:
    """Score ``scanner`` on ``rows``; ``types`` limits the scored entity types."""
    only = set(types)
    s = Score()
    for row in rows:
        text: str = row["text"]
        gold = [g for g in row.get("entities", ()) if not only or g["type"] in only]
        negs = row.get("negatives", ())
        for n in negs:
            s.negatives[n["kind"]] += 1
        found = [sp for sp in scanner.spans(text) if not only or sp.entity in only]
        matched: set[int] = set()
        for sp in found:
            hit = next(
                (
                    i
                    for i, g in enumerate(gold)
                    if i not in matched
                    and g["type"] == sp.entity
                    and _overlaps(sp.start, sp.end, g["start"], g["end"])
                ),
                None,
            )
            if hit is not None:
                matched.add(hit)
                s.tp[sp.entity] += 1
                g = gold[hit]
                if sp.start <= g["start"] and sp.end >= g["end"]:
                    s.exact[sp.entity] += 1
                continue
            s.fp[sp.entity] += 1
            kind = next(
                (n["kind"] for n in negs if _overlaps(sp.start, sp.end, n["start"], n["end"])),
                "other",
            )
            s.fp_kinds[kind] += 1
            s.false_hits.append((sp.entity, text[sp.start : sp.end]))
        for i, g in enumerate(gold):
            if i not in matched:
                s.fn[g["type"]] += 1
                s.misses.append((g["type"], text[g["start"] : g["end"]]))
    return s
