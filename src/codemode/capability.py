"""What a feature package declares to plug into codemode: one ``Capability`` object.

A capability (memory today; privacy, policy, audit... next) is a package with a small
``capability.py`` that builds one of these and nothing heavy at import time. Its parts
are all optional:

- ``config``: the pydantic model of its config section, read from the workspace's config
  file under the key ``name`` and from ``CODEMODE_<NAME>_<FIELD>`` (plus ``env_aliases``
  and ``key_aliases``: see ``codemode.config.schema``);
- ``tool_layers(config)``: ``(stage, middleware)`` pairs for the tool-call chain;
- ``run_hooks(config)``: ``(stage, hook)`` pairs for the run chain;
- ``commands`` / ``command(name)``: its ``codemode <name>`` CLI groups (help line, loader);
- ``server_tools(toolset, ctx)``: its tools on ``codemode serve``.

``codemode.assembly`` holds the list of built-in capabilities and is the one place that
turns them into chains, commands and server tools. The stages are ``codemode.chain``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from .chain import RunHook
from .config.schema import Section

if TYPE_CHECKING:
    import click

    from .tools.registry import Middleware


class NoConfig(BaseModel):
    """The config section of a capability that has no settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)


C = TypeVar("C", bound=BaseModel)

ToolLayers = Callable[[C], Iterable[tuple[str, "Middleware"]]]
RunHooks = Callable[[C], Iterable[tuple[str, RunHook]]]


@dataclass(frozen=True, slots=True)
class Capability(Generic[C]):
    """One feature's contribution to chains, config, CLI and server (see module doc)."""

    name: str
    config: type[C]
    env_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """field -> more environment variable names for it (``CODEMODE_<NAME>_<FIELD>`` first)."""
    key_aliases: Mapping[str, str] = field(default_factory=dict)
    """top-level config key -> field of this section (names kept from older layouts)."""
    tool_layers: ToolLayers[C] | None = None
    run_hooks: RunHooks[C] | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    """CLI group name -> one-line help (shown without importing the group)."""
    command: Callable[[str], click.Command] | None = None
    """Imports and returns the CLI group named ``name`` (one of ``commands``)."""
    server_tools: Callable[[Any, Any], None] | None = None
    """``(toolset, ctx)``: a ``codemode.server.toolset.Toolset`` and its ``ServerContext``
    (typed loosely here so that declaring a capability never reaches the server layer)."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.islower():
            raise ValueError(f"capability name {self.name!r} must be a lowercase identifier")
        if self.commands and self.command is None:
            raise ValueError(f"capability {self.name!r} lists commands but cannot load them")

    @property
    def section(self) -> Section:
        """Its part of the config schema."""
        return Section(self.name, self.config, self.env_aliases, self.key_aliases)

    def layers_for(self, config: Any) -> list[tuple[str, Middleware]]:
        return list(self.tool_layers(config)) if self.tool_layers is not None else []

    def hooks_for(self, config: Any) -> list[tuple[str, RunHook]]:
        return list(self.run_hooks(config)) if self.run_hooks is not None else []


__all__ = ["Capability", "NoConfig"]
