"""How the token benchmark shows its results: the printed table and the PNG."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from codemode.bench.tokens import TOKENIZER_NOTE, BenchError, ScenarioResult


def by_scenario(results: list[ScenarioResult]) -> dict[str, dict[str, ScenarioResult]]:
    """``{scenario: {profile: result}}`` in the order the results came."""
    out: dict[str, dict[str, ScenarioResult]] = {}
    for r in results:
        out.setdefault(r.name, {})[r.serve_tools] = r
    return out


def iter_lines(results: list[ScenarioResult]) -> Iterator[str]:
    """The table the benchmark prints (one column per serve profile), then the details."""
    groups = by_scenario(results)
    profiles = list(dict.fromkeys(r.serve_tools for r in results))
    head = f"{'scenario':<22} {'direct':>9}" + "".join(f" {'code mode ' + p:>24}" for p in profiles)
    head += f" {'round trips d/c':>16}"
    yield TOKENIZER_NOTE
    yield "code mode columns: tokens (reduction) under `codemode serve --tools PROFILE`"
    yield head
    yield "-" * len(head)
    for name, by_profile in groups.items():
        first = next(iter(by_profile.values()))
        line = f"{name:<22} {first.tokens_direct:>9,}"
        for p in profiles:
            r = by_profile.get(p)
            cell = f"{r.tokens_codemode:,} ({r.reduction_pct:.2f}%)" if r else "-"
            line += f" {cell:>24}"
        trips = "/".join(
            [str(first.round_trips_direct)]
            + [str(r.round_trips_codemode) for r in by_profile.values()]
        )
        yield line + f" {trips:>16}"
    yield ""
    for r in results:
        yield f"{r.name} [{r.serve_tools}]: {r.title}"
        for mode, parts, billed, wall in (
            ("direct", r.breakdown_direct, r.input_tokens_billed_direct, r.wall_ms_direct),
            ("code mode", r.breakdown_codemode, r.input_tokens_billed_codemode, r.wall_ms_codemode),
        ):
            shown = ", ".join(f"{k} {v:,}" for k, v in parts.items())
            yield (
                f"  {mode:<9} {shown}; input billed over all turns {billed:,}; wall {wall:.0f} ms"
            )
        for key, value in r.extra.items():
            yield f"  {key}: {value}"


def write_plot(results: list[ScenarioResult], path: Path) -> None:
    """The results as a PNG: log-scale bars (direct, then code mode under each profile)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise BenchError("plotting needs matplotlib: pip install 'codemode[plot]'") from exc
    groups = by_scenario(results)
    profiles = list(dict.fromkeys(r.serve_tools for r in results))
    series = ["direct", *profiles]
    colors = ["#c0504d", "#4f81bd", "#9bbb59", "#8064a2", "#f79646"]
    fig, ax = plt.subplots(figsize=(12, 6))
    width = 0.8 / len(series)
    for i, label in enumerate(series):
        xs: list[int] = []
        ys: list[int] = []
        for x, by_profile in enumerate(groups.values()):
            first = next(iter(by_profile.values()))
            r = by_profile.get(label)
            if label == "direct" or r is not None:
                xs.append(x)
                ys.append(first.tokens_direct if r is None else r.tokens_codemode)
        name = "direct tool calling" if label == "direct" else f"code mode, serve --tools {label}"
        pos = [x - 0.4 + width * (i + 0.5) for x in xs]
        ax.bar(pos, ys, width, label=name, color=colors[i % len(colors)])
        if label != "direct":
            for p, x in zip(pos, xs, strict=True):
                r = list(groups.values())[x][label]
                ax.annotate(
                    f"-{r.reduction_pct:.1f}%",
                    (p, r.tokens_codemode),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    rotation=90,
                    xytext=(0, 3),
                    textcoords="offset points",
                )
    ax.set_yscale("log")
    high = max(r.tokens_direct for r in results)
    ax.set_ylim(bottom=300, top=high * 4)
    ax.set_xticks(range(len(groups)), list(groups), fontsize=9)
    ax.set_ylabel("tokens in the model's context (log scale)")
    ax.set_title(f"codemode token benchmark: {TOKENIZER_NOTE}", fontsize=9)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
