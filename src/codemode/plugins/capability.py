"""The plugin system as a capability: its ``codemode plugins`` CLI group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..capability import Capability, NoConfig

if TYPE_CHECKING:
    import click


def _command(name: str) -> click.Command:
    from .cli import plugins_group

    return plugins_group


PLUGINS = Capability(
    name="plugins",
    config=NoConfig,
    commands={"plugins": "List installed plugins, what they add and what failed."},
    command=_command,
)
