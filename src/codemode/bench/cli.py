"""``codemode bench``: run codemode's benchmarks from the command line."""

from __future__ import annotations

import json
from pathlib import Path

import click


@click.group()
def bench() -> None:
    """Run codemode's reproducible benchmarks."""


@bench.command()
@click.option(
    "--json",
    "json_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the results as JSON (a list, one object per scenario).",
)
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
    "multi-step-loop, wide-catalog, privacy.",
)
@click.option(
    "--transcripts",
    "transcripts",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write both transcripts of each scenario as text files into this folder.",
)
@click.option(
    "--executor",
    default="subprocess",
    show_default=True,
    help="Executor codemode serve runs the code with.",
)
@click.option(
    "--serve-tools",
    type=click.Choice(["all", "core"]),
    default="all",
    show_default=True,
    help="Which tools codemode serve lists (serve --tools): all, or only the core six.",
)
@click.option(
    "--quick",
    is_flag=True,
    help="Small sizes (2,000 words, 500 rows, 10 catalog servers) for a smoke run.",
)
def tokens(
    json_path: Path | None,
    plot_path: Path | None,
    scenarios: tuple[str, ...],
    transcripts: Path | None,
    executor: str,
    serve_tools: str,
    quick: bool,
) -> None:
    """Tokens and round trips: code mode against direct tool calling, on real MCP servers."""
    import anyio

    from codemode.bench import scenarios as sc
    from codemode.bench.report import iter_lines, write_plot
    from codemode.bench.tokens import QUICK, BenchError, Sizes, check_tokenizer
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
            lambda: sc.run_benchmark(
                names,
                QUICK if quick else Sizes(),
                executor=executor,
                tools=serve_tools,
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
