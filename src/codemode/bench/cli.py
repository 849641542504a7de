"""``codemode bench``: run codemode's benchmarks from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])


def json_option(what: str) -> Callable[[F], F]:
    """``--json PATH``: also write ``what`` as JSON."""
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help=f"Also write {what} as JSON.",
    )


@click.group()
def bench() -> None:
    """Run codemode's reproducible benchmarks."""


@bench.command()
@json_option("the results (a list, one object per scenario and serve profile)")
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also draw the table as a PNG (needs matplotlib: pip install codemode[plot]).",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="Run only this scenario (repeatable): meeting-notes-to-crm, large-table-filter, "
    "multi-step-loop, wide-catalog, privacy, privacy-careless, article-scale.",
)
@click.option(
    "--transcripts",
    "transcripts",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write both transcripts of each scenario as text files into this folder.",
)
@click.option(
    "--executor",
    default="sandbox",
    show_default=True,
    help="Executor codemode serve runs the code with.",
)
@click.option(
    "--serve-tools",
    "profiles",
    type=click.Choice(["all", "core", "minimal"]),
    multiple=True,
    help="Which serve --tools profile(s) to measure code mode under (repeatable; default: "
    "all three). all: every tool; core: run_code and discovery; minimal: run_code and "
    "search_tools.",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Small sizes (2,000 words, 500 rows, 10 catalog servers, 100 replayed tools) for a "
    "smoke run.",
)
def tokens(
    json_path: Path | None,
    plot_path: Path | None,
    scenarios: tuple[str, ...],
    transcripts: Path | None,
    executor: str,
    profiles: tuple[str, ...],
    quick: bool,
) -> None:
    """Tokens and round trips: code mode against direct tool calling, on real MCP servers."""
    import anyio

    from codemode.bench import runner
    from codemode.bench import scenarios as sc
    from codemode.bench.catalogs import QUICK, Sizes
    from codemode.bench.report import iter_lines, write_plot
    from codemode.bench.tokens import PROFILES, BenchError, check_tokenizer
    from codemode.errors import CodemodeError

    if plot_path is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise click.ClickException(
                "--plot needs matplotlib: pip install 'codemode[plot]' (or pip install matplotlib)"
            ) from None
    names = list(scenarios) or None
    unknown = set(names or []) - set(sc.NAMES)
    if unknown:
        raise click.BadParameter(
            f"unknown {sorted(unknown)}; choose from {sc.NAMES}", param_hint="--scenario"
        )

    try:
        check_tokenizer()
    except BenchError as exc:
        raise click.ClickException(str(exc)) from None

    def progress(msg: str) -> None:
        click.echo(msg, err=True)

    try:
        results = anyio.run(
            lambda: runner.run_benchmark(
                names,
                QUICK if quick else Sizes(),
                executor=executor,
                profiles=tuple(dict.fromkeys(profiles)) or PROFILES,
                transcripts=transcripts,
                progress=progress,
            )
        )
    except (BenchError, CodemodeError) as exc:
        raise click.ClickException(str(exc)) from exc
    for line in iter_lines(results):
        click.echo(line)
    if json_path is not None:
        json_path.write_text(json.dumps([r.to_json() for r in results], indent=2) + "\n")
        click.echo(f"wrote {json_path}")
    if plot_path is not None:
        write_plot(results, plot_path)
        click.echo(f"wrote {plot_path}")


@bench.command()
@click.option(
    "--ranker",
    "rankers",
    type=click.Choice(["bm25", "embeddings", "hybrid"]),
    multiple=True,
    help="Ranker(s) to score (repeatable; default bm25, codemode's search_tools). "
    "embeddings and hybrid need the optional extra: pip install 'codemode[embeddings]'.",
)
@json_option("the scores")
@click.option("--misses", type=int, default=0, help="Print this many missed dev queries.")
def discovery(rankers: tuple[str, ...], json_path: Path | None, misses: int) -> None:
    """Discovery quality: recall@1/@5 and MRR of search_tools on real servers' tools."""
    import anyio

    from codemode.bench import discovery as dq
    from codemode.errors import CodemodeError

    names = list(dict.fromkeys(rankers)) or ["bm25"]
    try:
        scores = anyio.run(lambda: dq.run(names))
        summary = dq.catalog_summary()
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(summary)
    head = (
        f"{'ranker':<11} {'split':<8} {'queries':>7} {'recall@1':>9} {'recall@5':>9} "
        f"{'MRR':>7} {'p50 ms':>8}"
    )
    click.echo(head)
    click.echo("-" * len(head))
    out: dict[str, dict[str, dict[str, object]]] = {}
    for ranker, by_split in scores.items():
        for split in ("dev", "heldout", "all"):
            row = by_split[split].row() | {"p50_ms": round(by_split[split].p50_ms(), 3)}
            out.setdefault(ranker, {})[split] = row
            click.echo(
                f"{ranker:<11} {split:<8} {row['queries']:>7} {row['recall@1']:>9.3f} "
                f"{row['recall@5']:>9.3f} {row['mrr']:>7.3f} {row['p50_ms']:>8.2f}"
            )
        for qid, query, top in by_split["dev"].misses[:misses]:
            click.echo(f"  miss {qid} {query!r}: {', '.join(top)}")
    for ranker, by_split in scores.items():
        got = by_split["all"].row()["recall@5"]
        verdict = "met" if got >= dq.TARGET_RECALL5 else "NOT met"
        click.echo(
            f"target recall@5 >= {dq.TARGET_RECALL5:.2f} (all queries), {ranker}: "
            f"{verdict} ({got:.3f})"
        )
    if json_path is not None:
        json_path.write_text(json.dumps(out, indent=2) + "\n")
        click.echo(f"wrote {json_path}")
