"""The memory as a capability: its CLI groups and its ``codemode serve`` tools.

Cheap to import: the groups and tools are imported when they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..capability import Capability, NoConfig

if TYPE_CHECKING:
    import click

    from ..server.toolset import ServerContext, Toolset

COMMANDS = {
    "skills": "Manage saved skills.",
    "artifacts": "Manage saved artifacts.",
    "state": "Read and change the workspace's state.",
    "deps": "Manage packages installed for the sandbox.",
}


def _command(name: str) -> click.Command:
    from . import cli

    groups: dict[str, click.Command] = {
        "skills": cli.skills,
        "artifacts": cli.artifacts,
        "state": cli.state,
        "deps": cli.deps,
    }
    return groups[name]


def _server_tools(toolset: Toolset, ctx: ServerContext) -> None:
    from .server_tools import register

    register(toolset, ctx)


MEMORY = Capability(
    name="memory",
    config=NoConfig,
    commands=COMMANDS,
    command=_command,
    server_tools=_server_tools,
)
