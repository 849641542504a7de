"""The agent runner as a capability: ``codemode task`` and ``execute_task`` on serve.

Its config section is ``llm`` (``LLMConfig``, with the seeds' variable names as aliases);
``codemode.agent.config`` adds the workspace's ``.env`` when an agent resolves it. Cheap
to import: the CLI group and the server tools load when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..capability import Capability
from .config import ENV_ALIASES, SECTION, LLMConfig

if TYPE_CHECKING:
    import click

    from ..server.toolset import ServerContext, Toolset


def _command(name: str) -> click.Command:
    from .cli import task

    return task


def _server_tools(toolset: Toolset, ctx: ServerContext) -> None:
    from ..server.agent_tools import register

    register(toolset, ctx)


def _env_aliases() -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for name, field in ENV_ALIASES.items():
        out[field] = (*out.get(field, ()), name)
    return out


AGENT = Capability(
    name=SECTION,  # the "llm" section of the config file
    config=LLMConfig,
    env_aliases=_env_aliases(),
    commands={"task": "Let the configured model complete a task in code."},
    command=_command,
    server_tools=_server_tools,
)
