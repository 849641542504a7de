"""The agent runner as a capability: ``codemode task`` and ``execute_task`` on serve.

Its ``llm`` settings are resolved by ``codemode.agent.config`` (seed names, ``.env``);
cheap to import: the CLI group and the server tools load when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..capability import Capability, NoConfig

if TYPE_CHECKING:
    import click

    from ..server.toolset import ServerContext, Toolset


def _command(name: str) -> click.Command:
    from .cli import task

    return task


def _server_tools(toolset: Toolset, ctx: ServerContext) -> None:
    from ..server.agent_tools import register

    register(toolset, ctx)


AGENT = Capability(
    name="agent",
    config=NoConfig,
    commands={"task": "Let the configured model complete a task in code."},
    command=_command,
    server_tools=_server_tools,
)
