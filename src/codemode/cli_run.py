"""``codemode run``: run code from the shell, as an agent would."""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, TextIO

import click

from .execution import EXECUTOR_NAMES

if TYPE_CHECKING:
    from .result import ExecutionResult


@click.command()
@click.argument("file", required=False, type=click.File("r"))
@click.option("-c", "--code", help="Code to run (instead of FILE; '-' as FILE reads stdin).")
@click.option(
    "--executor",
    type=click.Choice(EXECUTOR_NAMES),
    default=None,
    help="Where the code runs (default: the workspace's setting, the sandbox; a sandbox "
    "that cannot start refuses instead of running code unsandboxed).",
)
@click.option(
    "--timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds before the run is stopped.",
)
@click.option(
    "--base",
    type=click.Path(file_okay=False),
    default=None,
    help="Workspace directory (default ~/.codemode).",
)
@click.option("--no-tools", is_flag=True, help="Do not connect the workspace's MCP servers.")
def run(
    file: TextIO | None,
    code: str | None,
    executor: str | None,
    timeout: float,
    base: str | None,
    no_tools: bool,
) -> None:
    """Run Python CODE or FILE in a session; print its output, value and error.

    Exits 1 when the code fails, 2 for bad usage.
    """
    if (file is None) == (code is None):
        raise click.UsageError("give exactly one of -c CODE or FILE")
    source = code if code is not None else file.read() if file else ""
    from .errors import CodemodeError

    try:
        result = asyncio.run(_run(source, executor, timeout, base, no_tools))
    except CodemodeError as exc:
        hint = (
            "\nTo run code without the sandbox (NOT a security boundary), choose it "
            "explicitly: --executor subprocess"
            if executor is None
            else ""
        )
        raise click.ClickException(f"{exc}{hint}") from None
    if result.stdout:
        click.echo(result.stdout, nl=not result.stdout.endswith("\n"))
    if result.stderr:
        click.echo(result.stderr, nl=not result.stderr.endswith("\n"), err=True)
    if result.error is not None:
        click.echo((result.error.traceback or str(result.error)).rstrip("\n"), err=True)
        sys.exit(1)
    if result.has_value:
        click.echo(result.value if result.value_is_repr else repr(result.value))


async def _run(
    source: str, executor: str | None, timeout: float, base: str | None, no_tools: bool
) -> ExecutionResult:
    from .execution import default_executor, executor_by_name
    from .session import Session

    if no_tools:
        # the same default as with tools: the sandbox, never a plain subprocess on its own
        bare = executor_by_name(executor) if executor else default_executor()
        async with Session(bare) as s:
            return await s.run(source, timeout=timeout)
    from .workspace import Workspace

    ws = Workspace.open(base)
    chosen = executor_by_name(executor, workspace=ws) if executor else None
    async with Session.from_base(ws.path, executor=chosen) as s:
        return await s.run(source, timeout=timeout)
