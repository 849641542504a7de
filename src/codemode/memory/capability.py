"""The memory as a capability: its config section, CLI groups and ``codemode serve`` tools.

Cheap to import: the groups and tools are imported when they are used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from ..capability import Capability

if TYPE_CHECKING:
    import click

    from ..server.toolset import ServerContext, Toolset


class MemoryConfig(BaseModel):
    """The ``memory`` section: packages for the agent's code (``deps/``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow_runtime_deps: bool = Field(True, description="Let agents' code add packages.")
    allow_source_builds: bool = Field(
        False, description="Let deps build sdists (runs the package's code on the host)."
    )
    deps: tuple[str, ...] = Field((), description="Packages the workspace always has.")
    install_deps: bool = Field(False, description="Install missing `deps` when a session opens.")


# Before sections these were top-level settings: the old keys and variables still work.
_OLD_NAMES = tuple(MemoryConfig.model_fields)

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
    config=MemoryConfig,
    env_aliases={name: (f"CODEMODE_{name.upper()}",) for name in _OLD_NAMES},
    key_aliases={name: name for name in _OLD_NAMES},
    commands=COMMANDS,
    command=_command,
    server_tools=_server_tools,
)
