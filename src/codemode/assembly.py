"""Where codemode is put together: the built-in capabilities, and the chains built from them.

To add a capability: write its package with a ``capability.py`` (see
``codemode.capability``) and add one line to ``BUILTIN``. Everything else (its config
section, its tool layers and run hooks at their stages, its CLI groups, its server tools)
is wired here:

- ``configure_registry``: a workspace's tool registry gets every capability's tool layers
  (``Workspace.registry`` calls it once per registry: one registry may serve many sessions,
  so tool layers tell sessions apart by ``ToolCall.context``);
- ``configure_session``: a session opened on a workspace gets every run hook;
- ``commands`` / ``command``: the ``codemode`` CLI's capability groups;
- ``add_server_tools``: the tools capabilities add to ``codemode serve``.

A plugin system (Python entry points) would extend ``installed()``; nothing else changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .agent.capability import AGENT
from .capability import Capability
from .memory.capability import MEMORY

if TYPE_CHECKING:
    import click

    from .server.toolset import ServerContext, Toolset
    from .session import Session
    from .tools.registry import ToolRegistry

Capabilities = Sequence[Capability[Any]]
Sections = Mapping[str, BaseModel]

BUILTIN: tuple[Capability[Any], ...] = (
    MEMORY,  # skills, artifacts, state, deps (codemode.memory)
    AGENT,  # codemode task, execute_task (codemode.agent)
)


def installed() -> tuple[Capability[Any], ...]:
    """The capabilities of this process, in the order their layers are added."""
    return BUILTIN


def check(capabilities: Capabilities) -> None:
    """Names (and CLI groups) must be unique: they key config sections and commands."""
    seen: dict[str, str] = {}
    for cap in capabilities:
        for key in (f"capability {cap.name}", *(f"command {c}" for c in cap.commands)):
            if key in seen:
                raise ValueError(f"{key} is declared twice (by {seen[key]} and {cap.name})")
            seen[key] = cap.name


def section(capability: Capability[Any], sections: Sections) -> BaseModel:
    """The capability's config section (its defaults when the config has none)."""
    got = sections.get(capability.name)
    return got if got is not None else capability.config()


def configure_registry(
    registry: ToolRegistry, capabilities: Capabilities, sections: Sections
) -> None:
    """Add every capability's tool layers to ``registry`` at their stages."""
    for cap in capabilities:
        for stage, layer in cap.layers_for(section(cap, sections)):
            registry.use(layer, stage)


def configure_session(session: Session, capabilities: Capabilities, sections: Sections) -> None:
    """Add every capability's run hooks to ``session`` at their stages."""
    for cap in capabilities:
        for stage, hook in cap.hooks_for(section(cap, sections)):
            session.use(hook, stage)


def commands(capabilities: Capabilities | None = None) -> dict[str, str]:
    """CLI group name -> help line, for every capability (without importing the groups)."""
    return {
        name: help_
        for cap in (installed() if capabilities is None else capabilities)
        for name, help_ in cap.commands.items()
    }


def command(name: str, capabilities: Capabilities | None = None) -> click.Command | None:
    """The capability CLI group named ``name`` (imported now), or None."""
    for cap in installed() if capabilities is None else capabilities:
        if name in cap.commands and cap.command is not None:
            return cap.command(name)
    return None


def add_server_tools(toolset: Toolset, ctx: ServerContext, capabilities: Capabilities) -> None:
    """Let every capability add its tools to ``codemode serve``."""
    for cap in capabilities:
        if cap.server_tools is not None:
            cap.server_tools(toolset, ctx)


__all__ = [
    "BUILTIN",
    "add_server_tools",
    "check",
    "command",
    "commands",
    "configure_registry",
    "configure_session",
    "installed",
    "section",
]
