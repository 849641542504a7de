"""``codemode checkpoints list|delete``: what sessions left in the workspace's storage.

Only metadata is read (names, sizes, what could not be saved): the checkpoints' bytes are
never opened here, let alone unpickled.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..errors import CodemodeError

T = TypeVar("T")

BASE = click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace directory (default: $CODEMODE_BASE or ~/.codemode).",
)


@click.group("checkpoints")
def checkpoints() -> None:
    """Sessions' saved variables (docs/checkpoints.md)."""


def _with_storage(base: Path | None, use: Callable[[Any], Awaitable[T]]) -> T:
    from ..memory import Memory
    from ..workspace import Workspace

    async def go() -> T:
        memory = Memory.for_workspace(Workspace.open(base))
        try:
            return await use(memory.storage)
        finally:
            await memory.aclose()

    try:
        return asyncio.run(go())
    except CodemodeError as exc:
        raise click.ClickException(str(exc)) from None


@checkpoints.command("list")
@BASE
@click.option("--json", "as_json", is_flag=True)
def list_cmd(base: Path | None, as_json: bool) -> None:
    """Every stored checkpoint: its name (tenant@hash), size, age, names not saved."""
    from .store import KIND

    async def rows(storage: Any) -> list[dict[str, Any]]:
        listing = await storage.list(KIND)
        return [
            {
                "name": r.name,
                "size": r.size,
                "created": r.meta.get("created"),
                "names": r.meta.get("count", len(r.meta.get("names", ()))),
                "skipped": sorted(r.meta.get("skipped", {})),
            }
            for r in listing
        ]

    found = _with_storage(base, rows)
    if as_json:
        click.echo(json.dumps(found, indent=1))
        return
    if not found:
        click.echo("No checkpoints.")
    now = time.time()
    for r in found:
        age = f"{(now - r['created']) / 3600:.1f} h ago" if r["created"] else "age unknown"
        skipped = f"; not saved: {', '.join(r['skipped'])}" if r["skipped"] else ""
        click.echo(f"{r['name']}  {r['size']:,} bytes  {r['names']} names  {age}{skipped}")


@checkpoints.command("delete")
@BASE
@click.argument("name")
def delete_cmd(base: Path | None, name: str) -> None:
    """Delete the checkpoint NAME (as `list` shows it)."""
    from .store import KIND

    async def delete(storage: Any) -> bool:
        return bool(await storage.delete(KIND, name))

    if not _with_storage(base, delete):
        raise click.ClickException(f"no checkpoint named {name!r}")
    click.echo(f"Deleted {name}.")
