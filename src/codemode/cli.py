"""The ``codemode`` command.

Subcommands live beside the code they drive and are imported only when invoked, so
``codemode run`` never pays for the MCP SDK or the storage backends. Capabilities add
their groups (``skills``, ``artifacts``, ``state``, ``deps``...) through
``codemode.assembly``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


def _run() -> click.Command:
    from .cli_run import run

    return run


def _tools() -> click.Command:
    from .tools.cli import tools

    return tools


def _serve() -> click.Command:
    from .server.cli import serve

    return serve


def _doctor() -> click.Command:
    from .execution.doctor import doctor

    return doctor


def _bench() -> click.Command:
    from .bench.cli import bench

    return bench


def _completion() -> click.Command:
    return completion


# name -> (its loader, one-line help shown by --help without importing the command)
SUBCOMMANDS: dict[str, tuple[Callable[[], click.Command], str]] = {
    "run": (_run, "Run Python code in a session and print what it printed."),
    "tools": (_tools, "List, search, describe and generate stubs for tools."),
    "serve": (_serve, "Serve code mode to MCP clients (stdio or HTTP)."),
    "doctor": (_doctor, "Show which sandbox protections are active."),
    "bench": (_bench, "Run codemode's benchmarks."),
    "completion": (_completion, "Print the shell completion script."),
}
SHELLS = ("bash", "zsh", "fish")


def _help_lines() -> dict[str, str]:
    from . import assembly

    return {name: help_ for name, (_, help_) in SUBCOMMANDS.items()} | assembly.commands()


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_help_lines())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = SUBCOMMANDS.get(cmd_name)
        if target is None:
            from . import assembly

            return assembly.command(cmd_name)
        return target[0]()

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(sorted(_help_lines().items()))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:  # Ctrl-C where a command does not handle it itself
            click.echo("\ncodemode: interrupted", err=True)
            raise click.exceptions.Exit(130) from None


@click.group(cls=LazyGroup)
@click.version_option(package_name="codemode")
def cli() -> None:
    """codemode: agents call MCP tools by writing Python in a fast, sandboxed session."""


@click.command()
@click.argument("shell", type=click.Choice(SHELLS), required=False)
def completion(shell: str | None) -> None:
    """Print the completion script for SHELL (default: from $SHELL).

    \b
    bash:  eval "$(codemode completion bash)"     (add it to ~/.bashrc)
    zsh:   eval "$(codemode completion zsh)"      (add it to ~/.zshrc)
    fish:  codemode completion fish > ~/.config/fish/completions/codemode.fish
    """
    import os

    from click.shell_completion import get_completion_class

    if shell is None:
        shell = os.path.basename(os.environ.get("SHELL", ""))
        if shell not in SHELLS:
            raise click.UsageError(f"name the shell: codemode completion {'|'.join(SHELLS)}")
    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(cli, {}, "codemode", "_CODEMODE_COMPLETE").source())


def main(argv: list[str] | None = None) -> Any:
    return cli.main(args=argv, prog_name="codemode")


if __name__ == "__main__":
    main()
