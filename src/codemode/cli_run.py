"""``codemode run``: run code from the shell, as an agent would.

What it prints is what a model would be shown: the output within the workspace's
``output_limit``, cut with a marker that states the real size; ``--full`` prints
everything and ``--out FILE`` writes it to a file. ``--live`` (the default on a terminal)
prints the output as the code prints it, all of it, then the value or error. Ctrl-C
interrupts the code (its output so far is printed, exit status 130); a second Ctrl-C
quits at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import termios
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .cli import terminal_text
from .errors import CodemodeError, ConfigError
from .execution import EXECUTOR_NAMES
from .printable import terminal_output

if TYPE_CHECKING:
    from .output import RunView
    from .result import ExecutionResult
    from .session import Session

EXIT_INTERRUPTED = 130
FULL_CAPTURE = 32_000_000
"""Characters the worker keeps per stream with ``--full``/``--out`` (instead of 1,000,000);
escaped as JSON they stay under the worker's 256 MB frame limit."""
CUT_HINT = "--full prints everything, --out FILE writes it to a file"


class Interrupted(Exception):
    """Ctrl-C arrived before the code started (while connecting or starting the worker)."""


@click.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False, allow_dash=True))
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
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--full", is_flag=True, help="Print everything (no output limit).")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, writable=True, path_type=Path),
    default=None,
    help="Write the whole output (or the --json result) to this file.",
)
@click.option(
    "--live/--no-live",
    default=None,
    help="Print the output as the code prints it, all of it (default: on a terminal, "
    "without --json or --out).",
)
def run(
    file: str | None,
    code: str | None,
    executor: str | None,
    timeout: float,
    base: str | None,
    no_tools: bool,
    as_json: bool,
    full: bool,
    out: Path | None,
    live: bool | None,
) -> None:
    """Run Python CODE or FILE in a session; print its output, value and error.

    Exits 1 when the code fails, 2 for bad usage, 130 when interrupted (Ctrl-C).
    """
    source = _source(file, code)
    everything = full or out is not None
    if live and (as_json or out is not None):
        raise click.UsageError("--live prints to the terminal: it does not go with --json or --out")
    if live is None:
        live = sys.stdout.isatty() and not as_json and out is None
    streamed = _Streamed() if live else None
    try:
        result, limit, interrupted = asyncio.run(
            _run(source, executor, timeout, base, no_tools, everything, streamed)
        )
    except Interrupted:
        click.echo("codemode: interrupted before the code ran", err=True)
        sys.exit(EXIT_INTERRUPTED)
    except ConfigError:
        raise  # one path for every command (codemode.cli): exit status 2
    except CodemodeError as exc:
        hint = (
            "\nTo run code without the sandbox (NOT a security boundary), choose it "
            "explicitly: --executor subprocess"
            if executor is None
            else ""
        )
        raise click.ClickException(f"{exc}{hint}") from None
    if as_json:
        _print_json(result, None if everything else limit, out)
    else:
        _print(result, None if full or live else limit, out, streamed)
    if interrupted and result.error is not None:
        sys.exit(EXIT_INTERRUPTED)
    if result.error is not None:
        sys.exit(1)


def _source(file: str | None, code: str | None) -> str:
    if (file is None) == (code is None):
        raise click.UsageError("give exactly one of -c CODE or FILE")
    if code is not None:
        return code
    assert file is not None
    if file == "-":
        return sys.stdin.read()
    path = Path(file)
    if not path.exists():
        looks_like_code = any(c in file for c in "()=;\n '\"") or not path.suffix
        hint = f"\nTo run code given on the command line, use -c: codemode run -c {_quote(file)}"
        raise click.UsageError(
            f"no such file: {file!r}" + (hint if looks_like_code else ""),
        )
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.UsageError(f"cannot read {file}: {exc}") from None


def _quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


class _Streamed:
    """``on_output`` for ``--live``: prints each chunk at once and remembers what it printed."""

    def __init__(self) -> None:
        self.text = {"stdout": "", "stderr": ""}

    def __call__(self, stream: str, text: str) -> None:
        name = "stderr" if stream == "stderr" else "stdout"
        self.text[name] += text
        sink = sys.stderr if name == "stderr" else sys.stdout
        sink.write(terminal_output(text))
        sink.flush()

    def rest(self, name: str, whole: str) -> str:
        """What of ``whole`` was not printed live (a cut marker, child processes' output);
        a line left open is closed."""
        shown = self.text[name]
        rest = whole[len(shown) :] if whole.startswith(shown) else whole
        if (shown or rest) and not (shown + rest).endswith("\n"):
            rest += "\n"
        return rest


def _print(
    result: ExecutionResult,
    limit: int | None,
    out: Path | None,
    streamed: _Streamed | None = None,
) -> None:
    """Output to stdout, stderr and the error to stderr: as the model sees them, or all
    (what ``--live`` printed already is not printed again)."""
    from .output import view_run

    shown = view_run(result, limit, hint="" if limit is None else CUT_HINT)
    fields = dict(shown.fields)
    if streamed is not None:
        for name in ("stdout", "stderr"):
            fields[name] = streamed.rest(name, fields[name])
    if out is not None:
        whole = view_run(result, None).fields
        text = whole["stdout"]
        if result.has_value and result.error is None:
            text += _value_line(result, view_run(result, None)) + "\n"
        _write(out, text)
        click.echo(f"codemode: wrote {len(text):,} characters of output to {out}", err=True)
    else:
        if fields["stdout"]:
            stdout = terminal_output(fields["stdout"])
            click.echo(stdout, nl=not stdout.endswith("\n"))
        if result.has_value and result.error is None:
            click.echo(terminal_output(_value_line(result, shown)))
    if fields["stderr"]:
        stderr = terminal_output(fields["stderr"])
        click.echo(stderr, nl=not stderr.endswith("\n"), err=True)
    # The code's stdout and stderr keep their lines, tabs and carriage returns, other
    # controls escaped (the code prints what it handled: a page, a tool's result; --out
    # keeps them exact); the traceback and the warnings are escaped line by line.
    if result.error is not None:
        tb = fields["error"]["traceback"] or str(result.error)
        click.echo(terminal_text(tb.rstrip("\n")), err=True)
    for warning in fields["warnings"]:
        click.echo(f"codemode: warning: {terminal_text(warning)}", err=True)
    cut = [name for name in shown.truncated if name != "warnings"]
    if cut and (out is None or cut != ["stdout"]):
        sizes = ", ".join(f"{name}: {shown.sizes[name]:,}" for name in cut)
        if limit is not None:
            message = f"output truncated to {limit:,} characters ({sizes} in all); {CUT_HINT}"
        else:
            message = f"the worker kept only part of the output ({sizes} characters in all)"
        click.echo(f"codemode: {message}", err=True)


def _value_line(result: ExecutionResult, shown: RunView) -> str:
    """The value as Python would echo it (its repr), or as cut for the limit."""
    if result.value_is_repr or "value" in shown.truncated:
        return shown.parts["value"].rstrip("\n")
    return repr(result.value)


def _print_json(result: ExecutionResult, limit: int | None, out: Path | None) -> None:
    from .output import run_fields, view_run

    shown = view_run(result, limit, hint="" if limit is None else CUT_HINT)
    text = json.dumps(run_fields(result, shown), ensure_ascii=False, indent=2)
    if out is None:
        # json.dumps leaves C1 controls and bidi overrides raw: spelt \uXXXX, the JSON
        # has the same value and cannot drive the terminal
        click.echo(terminal_text(text))
    else:
        _write(out, text + "\n")
        click.echo(f"codemode: wrote the result as JSON to {out}", err=True)


def _write(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all (temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None


async def _run(
    source: str,
    executor: str | None,
    timeout: float,
    base: str | None,
    no_tools: bool,
    everything: bool,
    streamed: _Streamed | None = None,
) -> tuple[ExecutionResult, int, bool]:
    from .config import load_settings
    from .execution import executor_by_name
    from .session import Session

    options: dict[str, Any] = {"max_output": FULL_CAPTURE} if everything else {}
    if no_tools:
        settings = load_settings()
        limit = settings.output_limit
        # the same default as with tools (the sandbox), never a plain subprocess on its own
        bare = executor_by_name(executor or settings.executor, **options)
        session = Session(bare)
    else:
        from .approval.terminal import terminal_approver
        from .workspace import Workspace

        ws = Workspace.open(base)
        limit = ws.settings.output_limit
        name = executor or ws.settings.executor
        chosen = executor_by_name(name, workspace=ws, **options) if executor or options else None
        # Calls the policy marks "ask" go to the person at this terminal (refused without one).
        # Opened once: warned once.
        session = Session.for_workspace(ws, executor=chosen, approve=terminal_approver())
    with _CtrlC(session, live=streamed is not None) as ctrl_c:
        try:
            async with session:
                result = await session.run(source, timeout=timeout, on_output=streamed)
                return result, limit, ctrl_c.presses > 0
        except asyncio.CancelledError:
            if ctrl_c.presses:
                raise Interrupted from None
            raise


class _CtrlC:
    """First Ctrl-C interrupts the run (or cancels the start-up); the second quits at once.
    With ``live`` output, the terminal keeps what was printed when ^C is typed."""

    def __init__(self, session: Session, *, live: bool = False) -> None:
        self.session = session
        self.live = live
        self.presses = 0
        self.loop = asyncio.get_running_loop()
        self.task = asyncio.current_task()
        self.terminals: list[int] = []

    def __enter__(self) -> _CtrlC:
        self.loop.add_signal_handler(signal.SIGINT, self._pressed)
        if self.live:  # output reaches the terminal while the code runs
            self.terminals = _keep_output_on_ctrl_c()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.remove_signal_handler(signal.SIGINT)
        _restore(self.terminals)

    def _pressed(self) -> None:
        self.presses += 1
        if self.presses > 1:
            click.echo("codemode: stopped", err=True)
            self.session.interrupt(force=True)
            sys.stdout.flush()
            _restore(self.terminals)
            os._exit(EXIT_INTERRUPTED)
        click.echo("codemode: interrupting the run (press Ctrl-C again to quit at once)", err=True)
        if not self.session.interrupt(kill_stuck=False) and self.task is not None:
            self.task.cancel()


def _keep_output_on_ctrl_c() -> list[int]:
    """Set NOFLSH on the terminal of stdout and stderr while the code's output is printed
    live.

    A ^C typed at a terminal makes its driver discard what was written to it that the
    terminal has not taken in yet (what the kernel has not passed on, under load; all past
    4 KB when the terminal is behind): output so far, printed just before, would be lost.
    Only the foreground job may change the terminal (a background one would be stopped by
    SIGTTOU). Returns the descriptors changed, for ``_restore``.
    """
    changed: list[int] = []
    devices: set[int] = set()
    for fd in (1, 2):
        try:
            if not os.isatty(fd) or os.tcgetpgrp(fd) != os.getpgrp():
                continue
            device = os.fstat(fd).st_rdev
            if device in devices:
                continue
            devices.add(device)
            attrs = termios.tcgetattr(fd)
            if attrs[3] & termios.NOFLSH:
                continue  # already set: nothing to undo
            attrs[3] |= termios.NOFLSH
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
            changed.append(fd)
        except (OSError, termios.error):
            continue  # not our terminal, or gone: nothing to keep
    return changed


def _restore(changed: list[int]) -> None:
    """Clear the NOFLSH that ``_keep_output_on_ctrl_c`` set (only that flag: the rest of
    the terminal's settings may have changed meanwhile)."""
    for fd in changed:
        with contextlib.suppress(OSError, termios.error):
            attrs = termios.tcgetattr(fd)
            attrs[3] &= ~termios.NOFLSH
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
    changed.clear()
