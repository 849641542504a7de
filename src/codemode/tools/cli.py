"""``codemode tools``: inspect a workspace's tools from the shell.

Every command opens the workspace (``--base``, else ``$CODEMODE_BASE``, else
``~/.codemode``), connects the servers it needs, prints, and closes them. ``--json``
prints machine-readable output; errors and warnings go to stderr (``codemode.cli``: exit
status 2 for a configuration mistake, 1 for anything else).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from codemode.cli import terminal_text

if TYPE_CHECKING:
    from codemode.tools.registry import ToolRegistry

T = TypeVar("T")
CLEAR_LINE = "\r\033[K"

_base_option = click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default $CODEMODE_BASE or ~/.codemode).",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_detail_option = click.option(
    "--detail",
    type=click.Choice(["name", "description", "full"]),
    default="description",
    show_default=True,
    help="How much to show per tool.",
)


def _run(base: Path | None, action: Callable[[ToolRegistry], Awaitable[T]]) -> T:
    """Open the workspace, run ``action`` on its registry, close every connection."""
    from codemode.workspace import Workspace

    async def main() -> T:
        registry = Workspace.open(base).registry()
        progress = _Progress() if sys.stderr.isatty() else None
        try:
            if progress is not None:
                registry.progress = progress.event
                async with progress:
                    return await action(registry)
            return await action(registry)
        finally:
            registry.progress = None
            await registry.aclose()

    return asyncio.run(main())  # errors and warnings: one path for every command (codemode.cli)


class _Progress:
    """One status line on a terminal while servers connect: each server's state and how
    long it has been waiting, redrawn in place, erased when done."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.started: dict[str, float] = {}
        self.done: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._shown = False

    def event(self, server: str, what: str) -> None:
        now = time.monotonic()
        if what == "connecting":
            self.started[server] = now
            self.done.pop(server, None)
        else:
            took = now - self.started.get(server, now)
            self.done[server] = f"{server} {'ok' if what == 'ok' else 'failed'} ({took:.1f} s)"

    def line(self) -> str:
        now = time.monotonic()
        parts = [
            self.done.get(name) or f"{name} waiting {now - since:.0f} s"
            for name, since in self.started.items()
        ]
        return "connecting: " + ", ".join(parts)

    async def _draw(self) -> None:
        last = ""
        while True:
            await asyncio.sleep(self.interval)
            if self.started and len(self.done) < len(self.started):
                line = self.line()[:200]
                if line != last:
                    click.echo(CLEAR_LINE + line, nl=False, err=True)
                    self._shown, last = True, line

    async def __aenter__(self) -> _Progress:
        self._task = asyncio.get_running_loop().create_task(self._draw())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task])  # never swallows the caller's own cancellation
        if self._shown:
            click.echo(CLEAR_LINE, nl=False, err=True)


def _dump(data: Any) -> None:
    # printable() writes what it escapes as \uXXXX: JSON strings keep the same value.
    _say(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def _say(text: str) -> None:
    """Text holding a server's words (names, descriptions, schemas), shown to a person.

    They come from upstream servers: control characters, C1 controls and bidi overrides
    could erase or rewrite the lines around them on the operator's terminal. Only ``\n``
    (codemode's own line breaks) stays a line break."""
    click.echo(terminal_text(text))


def _echo_tools(rows: list[dict[str, Any]]) -> None:
    if not rows:
        click.echo("no tools", err=True)
        return
    for row in rows:
        original = f"  [{row['original']}]" if "original" in row else ""
        _say(f"{row.get('signature') or row['name']}{original}")
        description = (row.get("description") or "").strip()
        if description:
            for line in description.splitlines():
                _say(f"    {line}" if line else "")
        for key in ("input_schema", "output_schema"):
            if key in row and row[key] is not None:
                _say(f"    {key}: {json.dumps(row[key], ensure_ascii=False)}")


@click.group()
def tools() -> None:
    """List, search, describe and generate typed stubs for the workspace's tools."""


@tools.command("list")
@click.option("--server", "-s", default=None, help="Only this server's tools.")
@_detail_option
@_base_option
@_json_option
def list_(server: str | None, detail: str, base: Path | None, as_json: bool) -> None:
    """List tools (all servers, or one)."""
    rows = _run(base, lambda reg: reg.list(server, detail))
    _dump(rows) if as_json else _echo_tools(rows)


@tools.command()
@click.argument("query")
@_detail_option
@click.option("--limit", "-n", type=click.IntRange(min=1), default=10, show_default=True)
@_base_option
@_json_option
def search(query: str, detail: str, limit: int, base: Path | None, as_json: bool) -> None:
    """Find tools for QUERY (ranked over names, descriptions and parameter names)."""
    rows = _run(base, lambda reg: reg.search(query, detail, limit))
    _dump(rows) if as_json else _echo_tools(rows)


@tools.command()
@click.argument("name")
@_base_option
@_json_option
def describe(name: str, base: Path | None, as_json: bool) -> None:
    """Everything about one tool, named ``server.tool``."""
    info = _run(base, lambda reg: reg.describe(name))
    if as_json:
        _dump(info)
        return
    _say(str(info.get("signature") or info["name"]))
    original = info.get("original")
    if isinstance(original, dict):
        _say(f"  original name: {original.get('server')}.{original.get('tool')}")
    if info.get("description"):
        click.echo("")
        for line in str(info["description"]).strip().splitlines():
            _say(line)
    params = info.get("parameters") or []
    if params:
        click.echo("\nparameters:")
        for p in params:
            flag = "required" if p.get("required") else f"default {p.get('default')!r}"
            alias = (
                f" (sent as {p['original']!r})"
                if p.get("original") not in (None, p["name"])
                else ""
            )
            _say(f"  {p['name']}: {p.get('type')}  [{flag}]{alias}")
    for key in ("input_schema", "output_schema"):
        if info.get(key) is not None:
            click.echo(f"\n{key}:")
            _say(json.dumps(info[key], indent=2, ensure_ascii=False))


@tools.command()
@_base_option
@_json_option
def servers(base: Path | None, as_json: bool) -> None:
    """Each configured server, its tool count and status (connects to list them)."""
    rows = _run(base, lambda reg: reg.servers())
    if as_json:
        _dump(rows)
    elif not rows:
        click.echo("no servers configured (edit mcp.json in the workspace)", err=True)
    for row in [] if as_json else rows:
        original = f" [{row['original']}]" if "original" in row else ""
        count = "?" if row.get("tools") is None else row["tools"]
        status = "failed" if row.get("problem") else row.get("status", "")
        _say(f"{row['name']}{original}: {count} tools, {status}")
    if rows and all(row.get("tools") is None for row in rows):
        raise click.ClickException("no server could be listed")


@tools.command()
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory to write servers/<server>/<tool>.py into.",
)
@_base_option
@_json_option
def generate(out: Path, base: Path | None, as_json: bool) -> None:
    """Write typed Python stubs for every tool (``servers/<server>/<tool>.py``)."""
    from codemode.tools.stubs import generate_tree

    files = _run(base, lambda reg: generate_tree(reg, out))
    if as_json:
        _dump([str(f) for f in files])
    else:
        click.echo(f"wrote {len(files)} files under {out / 'servers'}")


__all__ = ["tools"]

if __name__ == "__main__":  # pragma: no cover
    tools(sys.argv[1:])
