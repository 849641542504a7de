"""Command-line tools: an argv built from a template, run without a shell.

Where it runs:

- by default inside the workspace's sandbox (``SandboxExecutor.command_line``): the same
  bubblewrap/setpriv/seccomp/cgroup launch as agents' code, no network, the workspace's
  ``files/`` at ``/workspace`` (the cwd), only the host's ``/usr``, ``/bin``, ``/lib``
  programs. When the sandbox cannot start, the call is refused (never run unsandboxed);
- on the host only when the definition says ``host: true``: codemode logs a warning when
  it loads such a tool, and its description starts with ``[runs on the host]``. The cwd
  is the workspace's ``files/``; the environment holds ``PATH`` and the tool's ``env``.

Arguments: each argv item is one template; ``{p}`` alone may expand a list parameter to
several items; a nested list is an optional group (left out when a parameter it names is
missing, null or false; a ``true`` boolean renders as nothing). A value that would become
a whole argv item starting with ``-`` is refused unless the parameter allows it, so a
value cannot turn into an option of the program.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from ...errors import ToolArgumentError, ToolError, ToolTimeout
from ..spec import TextContent, ToolCallResult
from .model import ToolDef, expand_env
from .template import placeholders, render, scalar_text, whole

log = logging.getLogger("codemode.tools.declared")

MAX_OUTPUT = 1_000_000
STDERR_TAIL = 2_000
HOST_PATH = "/usr/local/bin:/usr/bin:/bin"


def build_argv(tool: ToolDef, args: Mapping[str, Any]) -> list[str]:
    """The argv for ``args`` (validated against the input schema, defaults applied)."""
    assert tool.command is not None
    out: list[str] = []
    for item in tool.command:
        if isinstance(item, str):
            out += _render_item(tool, item, args, optional=False)
            continue
        names = [n for t in item for n in placeholders(t)]
        if any(args.get(n) in (None, False) for n in names):
            continue
        for t in item:
            out += [part for part in _render_item(tool, t, args, optional=True) if part != ""]
    for part in out:
        if "\x00" in part:
            raise ToolArgumentError("arguments cannot contain NUL characters", tool=tool.name)
    return out


def _render_item(tool: ToolDef, item: str, args: Mapping[str, Any], *, optional: bool) -> list[str]:
    name = whole(item)
    for n in placeholders(item):
        if args.get(n) is None:
            raise ToolArgumentError(f"parameter {n!r} is required by the command", tool=tool.name)
    if name is None:
        return [render(item, args, lambda v: _text(v, tool))]
    value = args[name]
    values = value if isinstance(value, list) else [value]
    rendered = []
    for v in values:
        if isinstance(v, bool) and optional:
            rendered.append("" if v else "false")
            continue
        text = _text(v, tool)
        param = tool.parameters[name]
        if text.startswith("-") and not param.allow_leading_dash:
            raise ToolArgumentError(
                f"{name}={text!r}: a value starting with '-' could be read as an option of "
                f"{tool.command[0] if tool.command else 'the program'}; refused",
                tool=tool.name,
            )
        rendered.append(text)
    return rendered


def _text(value: Any, tool: ToolDef) -> str:
    return scalar_text(value, where=tool.name)


def parse_output(tool: ToolDef, stdout: str) -> ToolCallResult:
    if tool.output == "json":
        try:
            return ToolCallResult(structured=json.loads(stdout))
        except ValueError as exc:
            raise ToolError(f"the command's output is not JSON: {exc}", tool=tool.name) from None
    if tool.output == "lines":
        return ToolCallResult(structured=stdout.splitlines())
    return ToolCallResult(structured=stdout)  # text stays text, even "42" or "true"


class CommandRunner:
    """Runs one file's command-line tools, sandboxed unless a tool is marked ``host``."""

    def __init__(self, files_dir: Path, sandbox: Any, env: Mapping[str, str]) -> None:
        self.files_dir = files_dir
        self._sandbox = sandbox  # a callable returning the SandboxExecutor (built lazily)
        self._env = env

    async def run(
        self, tool: ToolDef, args: Mapping[str, Any], timeout: float | None
    ) -> ToolCallResult:
        argv = build_argv(tool, args)
        stdin = render(tool.stdin, args, lambda v: _text(v, tool)) if tool.stdin else None
        env = {k: expand_env(v, self._env, where=tool.name) for k, v in tool.env.items()}
        limit = min(timeout or tool.timeout, tool.timeout)
        cleanup = None
        if tool.host:
            self.files_dir.mkdir(parents=True, exist_ok=True)
            command, cwd = argv, str(self.files_dir)
            env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", **env}
        else:
            command, cleanup = self._sandbox().command_line(argv, env)
            cwd, env = "/", {"PATH": "/usr/bin:/bin"}
        try:
            code, out, err = await _run(command, stdin, cwd, env, limit, tool.name)
        finally:
            if cleanup is not None:
                cleanup()
        if code not in tool.ok_exit_codes:
            tail = err[-STDERR_TAIL:].strip() or out[-STDERR_TAIL:].strip()
            if code == 127 and not tool.host and "No such file" in tail + "execvp":
                tail += " (inside the sandbox only /usr, /bin and /lib programs exist)"
            return ToolCallResult(
                content=[TextContent(f"exit status {code}: {tail}")], is_error=True
            )
        return parse_output(tool, out)


async def _run(
    argv: list[str],
    stdin: str | None,
    cwd: str,
    env: Mapping[str, str],
    timeout: float,
    name: str,
) -> tuple[int, str, str]:
    try:
        proc = await anyio.open_process(
            argv,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"cannot start {argv[0]!r}: {exc.strerror or exc}", tool=name) from None
    out, err = bytearray(), bytearray()

    async def pump(stream: anyio.abc.ByteReceiveStream | None, buf: bytearray) -> None:
        if stream is None:
            return
        async for chunk in stream:
            if len(buf) < MAX_OUTPUT:
                buf += chunk[: MAX_OUTPUT - len(buf)]

    async def feed() -> None:
        if proc.stdin is not None and stdin is not None:
            await proc.stdin.send(stdin.encode())
            await proc.stdin.aclose()

    try:
        with anyio.fail_after(timeout):
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump, proc.stdout, out)
                tg.start_soon(pump, proc.stderr, err)
                tg.start_soon(feed)
            code = await proc.wait()
    except TimeoutError:
        _kill(proc)
        with anyio.CancelScope(shield=True):
            await proc.wait()
        raise ToolTimeout(
            f"timed out after {timeout} s (the process was killed)", tool=name
        ) from None
    except BaseException:
        _kill(proc)
        raise
    finally:
        await proc.aclose()
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _kill(proc: anyio.abc.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


__all__ = ["CommandRunner", "build_argv", "parse_output"]
