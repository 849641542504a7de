"""The ``codemode`` command.

Subcommands live beside the code they drive and are imported only when invoked, so
``codemode run`` never pays for the MCP SDK or the storage backends. Capabilities add
their groups (``skills``, ``artifacts``, ``state``, ``deps``...) through
``codemode.assembly``.

Errors and warnings take one path for every command (``LazyGroup.invoke``): a
``ConfigError`` is one ``Error: <file>:<line>:<column>: <field>: ...`` message and exit
status 2, any other ``CodemodeError`` the same with status 1, never a traceback; what
codemode logs as a warning (unknown config keys, unreachable servers) is one
``warning: ...`` line on stderr. ``codemode --strict`` makes unknown config keys errors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from .errors import CodemodeError, ConfigError


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
        with _strict(bool(ctx.params.get("strict"))), _warnings_on_stderr():
            try:
                return super().invoke(ctx)
            except ConfigError as exc:
                raise ConfigProblem(str(exc)) from None
            except CodemodeError as exc:
                raise click.ClickException(terminal_text(str(exc))) from None
            except KeyboardInterrupt:  # Ctrl-C where a command does not handle it itself
                click.echo("\ncodemode: interrupted", err=True)
                raise click.exceptions.Exit(130) from None


def terminal_text(text: str) -> str:
    """``text`` for a terminal, line by line through :func:`codemode.printable.printable`.

    Errors and warnings quote upstream servers (their stderr, their error messages, their
    tool names): an escape sequence in them could clear the screen, rewrite the lines
    above, set the window title or, through OSC 52, the operator's clipboard."""
    from .printable import printable

    return "\n".join(printable(line) for line in text.split("\n"))


class ConfigProblem(click.ClickException):
    """A configuration mistake: the message names file, place, field and what is allowed."""

    exit_code = 2


@contextlib.contextmanager
def _strict(strict: bool) -> Iterator[None]:
    """``--strict`` is ``CODEMODE_STRICT=1`` for this command (and the processes it starts)."""
    from .config.schema import STRICT_ENV

    saved = os.environ.get(STRICT_ENV)
    if strict:
        os.environ[STRICT_ENV] = "1"
    try:
        yield
    finally:
        if strict and saved is None:
            del os.environ[STRICT_ENV]
        elif strict and saved is not None:
            os.environ[STRICT_ENV] = saved


class _Warnings(logging.Handler):
    """codemode's warnings as ``warning: ...`` on stderr, each once, until the command
    sets up logging of its own (``serve`` does): then its handlers show them."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.before = set(logging.getLogger().handlers)
        self.seen: set[str] = set()

    def emit(self, record: logging.LogRecord) -> None:
        if any(h not in self.before for h in logging.getLogger().handlers):
            return
        message = record.getMessage()
        if message not in self.seen:
            self.seen.add(message)
            clear = "\r\033[K" if sys.stderr.isatty() else ""  # over a progress line, if any
            click.echo(f"{clear}warning: {terminal_text(message)}", err=True)


@contextlib.contextmanager
def _warnings_on_stderr() -> Iterator[None]:
    logger = logging.getLogger("codemode")
    handler = _Warnings()
    level = logger.level
    logger.addHandler(handler)
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@click.group(cls=LazyGroup)
@click.version_option(package_name="codemode")
@click.option(
    "--strict",
    is_flag=True,
    help="Unknown keys in the configuration are errors, not warnings (also CODEMODE_STRICT=1).",
)
def cli(strict: bool) -> None:
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
    _fill_standard_fds()
    return cli.main(args=argv, prog_name="codemode")


CLOSED_AT_START: set[str] = set()
"""The standard streams this process was started without ("stdin", "stdout", "stderr")."""


def _fill_standard_fds() -> None:
    """Point a closed stdin, stdout or stderr at /dev/null.

    Started with one closed (``codemode run ... >&-``), Python leaves ``sys.stdout`` None
    (every print or echo then fails with a traceback), and the next file codemode opens (a
    log, the audit log, a store's temp file) takes that number, so whatever is written to
    "stdout" lands in it. Output to a closed stream is discarded instead, as the shell's
    ``>&-`` asks; ``serve`` over stdio refuses to start without stdin and stdout.
    """
    for fd, name in enumerate(("stdin", "stdout", "stderr")):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:  # the lowest free number: fd itself, unless a lower one is free
                os.dup2(null, fd)
                os.close(null)
            CLOSED_AT_START.add(name)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115


if __name__ == "__main__":
    main()
