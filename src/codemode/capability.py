"""What a feature package declares to plug into codemode: one ``Capability`` object.

A capability (memory today; privacy, policy, audit... next) is a package with a small
``capability.py`` that builds one of these and nothing heavy at import time. Its parts
are all optional:

- ``config``: the pydantic model of its config section, read from the workspace's config
  file under the key ``name`` and from ``CODEMODE_<NAME>_<FIELD>`` (plus ``env_aliases``
  and ``key_aliases``: see ``codemode.config.schema``);
- ``tool_layers(config)``: ``(stage, middleware)`` pairs for the tool-call chain;
- ``run_hooks(config)``: ``(stage, hook)`` pairs for the run chain;
- ``hidden_tools(config)``: a ``hidden(spec) -> bool`` that hides tools from discovery;
- ``memory_watchers(config)``: functions told about every memory write;
- ``commands`` / ``command(name)``: its ``codemode <name>`` CLI groups (help line, loader);
- ``server_tools(toolset, ctx)``: its tools on ``codemode serve``;
- ``reply_layers(config)``: layers over every ``codemode serve`` tool's reply (its own
  tools, the core ones and other capabilities' alike), ``layer(call, tool, reply)``.
- ``http_endpoints(config, ctx)``: its ``HttpEndpoint``s on ``serve --transport http``.
- ``host_layers(config)``: layers around every worker -> host call of a session
  (``codemode.hostapi.HostLayer``: e.g. metrics and spans of memory operations).
- ``session_setup(config, session)``: equips a session with what is not a layer (e.g. its
  checkpoint slot, ``codemode.checkpoint``).
- ``private_paths(config, workspace)``: its keys and logs configured outside the workspace,
  which upstream servers' jails show empty (``codemode.isolation.servers``).
- ``make_private(config, workspace)``: creates those of them it would otherwise create at
  first use (a log's directory, a head file, a key), before any upstream server starts:
  a path that does not exist yet cannot be shown empty, and a server that made it first
  would own it.

``codemode.assembly`` holds the list of built-in capabilities and is the one place that
turns them into chains, commands and server tools. The stages are ``codemode.chain``'s.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from .chain import RunHook
from .config.schema import Section

if TYPE_CHECKING:
    import click

    from .hostapi import HostLayer
    from .memory.events import MemoryWatcher
    from .tools.registry import Middleware, ToolFilter


class NoConfig(BaseModel):
    """The config section of a capability that has no settings."""

    model_config = ConfigDict(extra="forbid", frozen=True)


C = TypeVar("C", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class HttpEndpoint:
    """A ``GET`` route a capability adds to ``codemode serve --transport http``.

    ``own_auth``: the handler decides who may read it (e.g. /metrics with a token of its
    own); otherwise the server's bearer token guards it like ``/mcp``.
    """

    path: str
    handler: Callable[[Any], Awaitable[Any]]
    """``async handler(request) -> response`` (Starlette's)."""
    own_auth: bool = False


SHARED_PROCESS = "codemode.web.shared_process"
"""``ServerContext.extras`` key set when one process serves several tenants: what is
process-wide (metrics) then belongs to all of them and is shown to none."""


ToolLayers = Callable[[C], Iterable[tuple[str, "Middleware"]]]
RunHooks = Callable[[C], Iterable[tuple[str, RunHook]]]
HiddenTools = Callable[[C], "ToolFilter | None"]
MemoryWatchers = Callable[[C], Iterable["MemoryWatcher"]]
ReplyLayers = Callable[[C], Iterable[Any]]
HttpEndpoints = Callable[[C, Any], Iterable[HttpEndpoint]]
HostLayers = Callable[[C], Iterable["HostLayer"]]
PrivatePaths = Callable[[C, Path], Iterable[Path]]


@dataclass(frozen=True, slots=True)
class Capability(Generic[C]):
    """One feature's contribution to chains, config, CLI and server (see module doc)."""

    name: str
    config: type[C]
    env_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """field -> more environment variable names for it (``CODEMODE_<NAME>_<FIELD>`` first)."""
    key_aliases: Mapping[str, str] = field(default_factory=dict)
    """top-level config key -> field of this section (names kept from older layouts)."""
    strict_keys: bool = False
    """Unknown keys in its section are errors (a guard whose setting is misspelt must not
    silently stay off), not warnings."""
    tool_layers: ToolLayers[C] | None = None
    run_hooks: RunHooks[C] | None = None
    hidden_tools: HiddenTools[C] | None = None
    memory_watchers: MemoryWatchers[C] | None = None
    commands: Mapping[str, str] = field(default_factory=dict)
    """CLI group name -> one-line help (shown without importing the group)."""
    command: Callable[[str], click.Command] | None = None
    """Imports and returns the CLI group named ``name`` (one of ``commands``)."""
    server_tools: Callable[[Any, Any], None] | None = None
    """``(toolset, ctx)``: a ``codemode.server.toolset.Toolset`` and its ``ServerContext``
    (typed loosely here so that declaring a capability never reaches the server layer)."""
    reply_layers: ReplyLayers[C] | None = None
    """Layers over every ``codemode serve`` reply: each a ``codemode.server.toolset.ReplyLayer``
    (typed loosely for the same reason)."""
    http_endpoints: HttpEndpoints[C] | None = None
    """``(config, ctx)`` -> its ``HttpEndpoint``s; ``ctx`` is the ``ServerContext``."""
    host_layers: HostLayers[C] | None = None
    session_setup: Callable[[C, Any], None] | None = None
    """``(config, session)``: typed loosely so that declaring one never imports Session."""
    private_paths: PrivatePaths[C] | None = None
    """``(config, workspace)``: files and directories of its own no upstream server may see."""
    make_private: Callable[[C, Path], None] | None = None
    """``(config, workspace)``: makes its missing private paths (directories 0700, files
    0600); raises ``OSError`` or ``ConfigError`` when it cannot (the server then does not
    start). Never called by ``codemode doctor``."""

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or not self.name.islower():
            raise ValueError(f"capability name {self.name!r} must be a lowercase identifier")
        if self.commands and self.command is None:
            raise ValueError(f"capability {self.name!r} lists commands but cannot load them")

    @property
    def section(self) -> Section:
        """Its part of the config schema."""
        return Section(self.name, self.config, self.env_aliases, self.key_aliases, self.strict_keys)

    def layers_for(self, config: Any) -> list[tuple[str, Middleware]]:
        return list(self.tool_layers(config)) if self.tool_layers is not None else []

    def hooks_for(self, config: Any) -> list[tuple[str, RunHook]]:
        return list(self.run_hooks(config)) if self.run_hooks is not None else []

    def hidden_for(self, config: Any) -> ToolFilter | None:
        return self.hidden_tools(config) if self.hidden_tools is not None else None

    def watchers_for(self, config: Any) -> list[MemoryWatcher]:
        return list(self.memory_watchers(config)) if self.memory_watchers is not None else []

    def host_layers_for(self, config: Any) -> list[HostLayer]:
        return list(self.host_layers(config)) if self.host_layers is not None else []

    def private_for(self, config: Any, workspace: Path) -> list[Path]:
        return list(self.private_paths(config, workspace)) if self.private_paths else []

    def make_private_for(self, config: Any, workspace: Path) -> None:
        if self.make_private is not None:
            self.make_private(config, workspace)

    def replies_for(self, config: Any) -> list[Any]:
        return list(self.reply_layers(config)) if self.reply_layers is not None else []


__all__ = ["SHARED_PROCESS", "Capability", "HttpEndpoint", "NoConfig"]
