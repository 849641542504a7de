"""How the token benchmark shows its results: the printed table and the PNG."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from codemode.bench.tokens import TOKENIZER_NOTE, BenchError, ScenarioResult


def iter_lines(results: list[ScenarioResult]) -> Iterator[str]:
    """The table the benchmark prints, then what each scenario adds."""
    head = (
        f"{'scenario':<22} {'tokens direct':>13} {'code mode':>10} {'reduction':>9} "
        f"{'round trips d/c':>15} {'wall ms d/c':>17}"
    )
    yield TOKENIZER_NOTE
    yield head
    yield "-" * len(head)
    for r in results:
        trips = f"{r.round_trips_direct}/{r.round_trips_codemode}"
        wall = f"{r.wall_ms_direct:.0f}/{r.wall_ms_codemode:.0f}"
        yield (
            f"{r.name:<22} {r.tokens_direct:>13,} {r.tokens_codemode:>10,} "
            f"{r.reduction_pct:>8.2f}% {trips:>15} {wall:>17}"
        )
    yield ""
    for r in results:
        yield f"{r.name}: {r.title}"
        for mode, parts, billed in (
            ("direct", r.breakdown_direct, r.input_tokens_billed_direct),
            ("code mode", r.breakdown_codemode, r.input_tokens_billed_codemode),
        ):
            shown = ", ".join(f"{k} {v:,}" for k, v in parts.items())
            yield f"  {mode:<9} {shown}; input billed over all turns {billed:,}"
        for key, value in r.extra.items():
            yield f"  {key}: {value}"


def write_plot(results: list[ScenarioResult], path: Path) -> None:
    """The results table as a PNG: log-scale bars (direct vs code mode) over the table."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise BenchError("plotting needs matplotlib: pip install 'codemode[plot]'") from exc
    names = [r.name for r in results]
    fig, (bars, table) = plt.subplots(
        2, 1, figsize=(11, 7.5), gridspec_kw={"height_ratios": [3, 1.6]}
    )
    xs = range(len(results))
    width = 0.38
    bars.bar(
        [x - width / 2 for x in xs],
        [r.tokens_direct for r in results],
        width,
        label="direct tool calling",
        color="#c0504d",
    )
    bars.bar(
        [x + width / 2 for x in xs],
        [r.tokens_codemode for r in results],
        width,
        label="code mode (codemode serve)",
        color="#4f81bd",
    )
    for x, r in zip(xs, results, strict=True):
        bars.annotate(
            f"-{r.reduction_pct:.1f}%",
            (x, max(r.tokens_direct, r.tokens_codemode)),
            ha="center",
            va="bottom",
            fontsize=9,
            xytext=(0, 3),
            textcoords="offset points",
        )
    bars.set_yscale("log")
    low = min(min(r.tokens_direct, r.tokens_codemode) for r in results)
    high = max(max(r.tokens_direct, r.tokens_codemode) for r in results)
    bars.set_ylim(bottom=max(1, low / 3), top=high * 3)
    bars.set_xticks(list(xs), names)
    bars.set_ylabel("tokens in the model's context")
    bars.set_title(f"codemode token benchmark: {TOKENIZER_NOTE}", fontsize=9)
    bars.legend()
    table.axis("off")
    cells = [
        [
            r.name,
            f"{r.tokens_direct:,}",
            f"{r.tokens_codemode:,}",
            f"{r.reduction_pct:.2f}%",
            f"{r.round_trips_direct} / {r.round_trips_codemode}",
            f"{r.wall_ms_direct:.0f} / {r.wall_ms_codemode:.0f}",
        ]
        for r in results
    ]
    cols = [
        "scenario",
        "tokens direct",
        "tokens code mode",
        "reduction",
        "round trips d / c",
        "wall ms d / c",
    ]
    tbl = table.table(cellText=cells, colLabels=cols, loc="center", cellLoc="center")
    tbl.auto_set_font_size(False)
    tbl.set_fontsize(9)
    tbl.scale(1, 1.4)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
