"""Where codemode is put together: the built-in capabilities, and the chains built from them.

To add a capability: write its package with a ``capability.py`` (see
``codemode.capability``) and add one line to ``BUILTIN``. Everything else (its config
section, its tool layers and run hooks at their stages, its CLI groups, its server tools)
is wired here:

- ``configure_registry``: a workspace's tool registry gets every capability's tool layers
  and discovery filters (``Workspace.registry`` calls it once per registry: one registry may
  serve many sessions, so tool layers tell sessions apart by ``ToolCall.context``);
- ``configure_memory``: a workspace's memory tells every capability's watchers its writes;
- ``configure_session``: a session opened on a workspace gets every run hook;
- ``commands`` / ``command``: the ``codemode`` CLI's capability groups;
- ``add_server_tools``: the tools capabilities add to ``codemode serve``;
- ``configure_toolset``: the layers over every ``codemode serve`` reply.
- ``http_endpoints``: the routes they add to ``codemode serve --transport http``.

Plugins (``codemode.plugins``: Python entry points) extend ``installed()``; nothing else
changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from .agent.capability import AGENT
from .approval.capability import APPROVAL
from .audit.capability import AUDIT
from .budget.capability import BUDGET
from .capability import Capability, HttpEndpoint
from .checkpoint.capability import CHECKPOINT
from .checks.capability import CODE_CHECKS
from .cluster.capability import RAY
from .memory.capability import MEMORY
from .observability.capability import OBSERVABILITY
from .plugins.capability import PLUGINS
from .policy.capability import POLICY
from .privacy.capability import PRIVACY
from .seeds.capability import SEEDS
from .web.capability import WEB
from .workflows.capability import WORKFLOWS

if TYPE_CHECKING:
    import click

    from .memory import Memory
    from .server.toolset import ServerContext, Toolset
    from .session import Session
    from .tools.registry import ToolRegistry

Capabilities = Sequence[Capability[Any]]
Sections = Mapping[str, BaseModel]

BUILTIN: tuple[Capability[Any], ...] = (
    OBSERVABILITY,  # codemode_* metrics (codemode.observability): first, so outermost
    WEB,  # the console at /ui and its run log (codemode.web)
    MEMORY,  # skills, artifacts, state, deps (codemode.memory)
    AGENT,  # codemode task, execute_task (codemode.agent)
    AUDIT,  # every run, tool call and memory write, HMAC-chained (codemode.audit)
    POLICY,  # allow/deny/ask by tool name and trusted annotations (codemode.policy)
    APPROVAL,  # a person's yes before "ask" calls (codemode.approval)
    BUDGET,  # limits per run and per session (codemode.budget)
    CODE_CHECKS,  # an AST pass over each cell before it runs (codemode.checks)
    PRIVACY,  # tokenization of personal data, the credentials net (codemode.privacy)
    PLUGINS,  # codemode plugins (codemode.plugins)
    SEEDS,  # the seed systems' server tool names (codemode.seeds)
    WORKFLOWS,  # codemode workflow, run_workflow (codemode.workflows)
    RAY,  # the ray executor's settings (codemode.cluster)
    CHECKPOINT,  # sessions' variables saved after each run (codemode.checkpoint)
)


def installed() -> tuple[Capability[Any], ...]:
    """The capabilities of this process, in the order their layers are added: the
    built-in ones, then those of plugins that loaded (``codemode.plugins``)."""
    from .plugins import capabilities

    return (*BUILTIN, *capabilities())


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
    """Add every capability's tool layers to ``registry`` at their stages, and its filter of
    the tools discovery hides."""
    for cap in capabilities:
        config = section(cap, sections)
        for stage, layer in cap.layers_for(config):
            registry.use(layer, stage)
        hidden = cap.hidden_for(config)
        if hidden is not None:
            registry.hide(hidden)


def private_paths(capabilities: Capabilities, sections: Sections, workspace: Path) -> list[str]:
    """Every capability's keys and logs kept outside ``workspace`` (servers' jails hide them)."""
    return [
        str(p) for cap in capabilities for p in cap.private_for(section(cap, sections), workspace)
    ]


def make_private(capabilities: Capabilities, sections: Sections, workspace: Path) -> None:
    """Let every capability create the private paths it would make at first use, so that
    they exist, as codemode's, when a server's jail hides them (``OSError`` or
    ``ConfigError`` if one cannot)."""
    for cap in capabilities:
        cap.make_private_for(section(cap, sections), workspace)


def configure_memory(memory: Memory, capabilities: Capabilities, sections: Sections) -> None:
    """Let every capability watch the writes of ``memory``."""
    for cap in capabilities:
        for watcher in cap.watchers_for(section(cap, sections)):
            memory.watch(watcher)


def configure_session(session: Session, capabilities: Capabilities, sections: Sections) -> None:
    """Add every capability's run hooks to ``session`` at their stages, its layers
    around the calls the session's worker makes, and its ``session_setup``."""
    for cap in capabilities:
        config = section(cap, sections)
        for stage, hook in cap.hooks_for(config):
            session.use(hook, stage)
        for layer in cap.host_layers_for(config):
            session.host.use(layer)
        if cap.session_setup is not None:
            cap.session_setup(config, session)


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


def configure_toolset(toolset: Toolset, capabilities: Capabilities, sections: Sections) -> None:
    """Add every capability's reply layers to ``toolset`` (all tools, even ``--tools core``)."""
    for cap in capabilities:
        for layer in cap.replies_for(section(cap, sections)):
            toolset.use(layer)


def http_endpoints(
    ctx: ServerContext, capabilities: Capabilities, sections: Sections
) -> list[HttpEndpoint]:
    """Every capability's HTTP routes (paths must be unique)."""
    out: list[HttpEndpoint] = []
    for cap in capabilities:
        if cap.http_endpoints is not None:
            out.extend(cap.http_endpoints(section(cap, sections), ctx))
    paths = [e.path for e in out]
    for p in paths:
        if paths.count(p) > 1:
            raise ValueError(f"HTTP path {p} is declared twice")
    return out


__all__ = [
    "BUILTIN",
    "add_server_tools",
    "check",
    "command",
    "commands",
    "configure_memory",
    "configure_registry",
    "configure_session",
    "configure_toolset",
    "http_endpoints",
    "installed",
    "section",
]
