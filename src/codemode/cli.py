"""The ``codemode`` command.

Subcommands live beside the code they drive and are imported only when invoked, so
``codemode run`` never pays for the MCP SDK or the storage backends. Capabilities add
their groups (``skills``, ``artifacts``, ``state``, ``deps``...) through
``codemode.assembly``.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

# name -> ("module:attribute", one-line help shown by --help without importing the module)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "run": ("codemode.cli_run:run", "Run Python code in a session and print what it printed."),
    "tools": ("codemode.tools.cli:tools", "List, search, describe and generate stubs for tools."),
    "serve": ("codemode.server.cli:serve", "Serve code mode to MCP clients (stdio or HTTP)."),
    "doctor": ("codemode.execution.doctor:doctor", "Show which sandbox protections are active."),
    "bench": ("codemode.bench.cli:bench", "Run codemode's benchmarks."),
}


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
        module, _, attr = target[0].partition(":")
        command = getattr(importlib.import_module(module), attr)
        assert isinstance(command, click.Command)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl(sorted(_help_lines().items()))


@click.group(cls=LazyGroup)
@click.version_option(package_name="codemode")
def cli() -> None:
    """codemode: agents call MCP tools by writing Python in a fast, sandboxed session."""


def main(argv: list[str] | None = None) -> Any:
    return cli.main(args=argv, prog_name="codemode")


if __name__ == "__main__":
    main()
