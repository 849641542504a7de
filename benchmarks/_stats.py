"""Small helpers shared by the benchmark scripts: percentiles and table printing."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def pct(values: Sequence[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def table(title: str, headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[str(h) for h in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "+".join("-" * (w + 2) for w in widths)
    out = [f"\n{title}", line]
    for i, r in enumerate(cells):
        out.append("|".join(f" {c:<{w}} " for c, w in zip(r, widths, strict=True)))
        if i == 0:
            out.append(line)
    out.append(line)
    return "\n".join(out)


def _fmt(c: object) -> str:
    if isinstance(c, float):
        return f"{c:.3f}" if abs(c) < 100 else f"{c:.1f}"
    return str(c)
