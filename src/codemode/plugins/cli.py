"""``codemode plugins``: what plugins are installed, loaded, failed, and what they add."""

from __future__ import annotations

import json

import click


@click.group("plugins")
def plugins_group() -> None:
    """Plugins installed through the codemode.plugins entry point group."""


@plugins_group.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_plugins(as_json: bool) -> None:
    """Show each plugin: where it comes from, whether it loaded, and what it adds."""
    from . import DISABLE_ENV, plugins

    found = plugins()
    if as_json:
        click.echo(json.dumps([p.to_dict() for p in found], indent=1))
        return
    if not found:
        click.echo("No plugins installed (entry point group codemode.plugins).")
        return
    for p in found:
        dist = f"{p.distribution} {p.version}".strip() or "unknown distribution"
        click.echo(f"{p.name}  [{p.status}]  {p.value}  ({dist})")
        if p.location:
            click.echo(f"    from {p.location}")
        if p.error:
            click.echo(f"    error: {p.error}")
            click.echo(f"    (set {DISABLE_ENV}={p.name} to skip it)")
        for item in p.provides:
            click.echo(f"    + {item}")
