"""What a plugin may add to codemode, one registry per seam.

A plugin is a Python distribution with an entry point in the ``codemode.plugins`` group.
The entry point names either a ``Capability`` (config section, tool layers, run hooks,
CLI groups, server tools: see ``codemode.capability``) or a function ``setup(api)`` that
receives a :class:`PluginAPI` and registers what it brings::

    [project.entry-points."codemode.plugins"]
    acme = "acme_codemode:setup"

    def setup(api: PluginAPI) -> None:
        api.tool_source(weather_sources)          # factory(workspace) -> ToolSource(s)
        api.middleware(stamp, stage="audit")      # a tool-call layer for every registry
        api.run_hook(check, stage="checks")       # a run hook for every session
        api.command("acme", load_group, "Acme's commands.")
        api.storage("s3", make_s3)                # settings `storage: s3`
        api.executor("vm", make_vm)               # settings `executor: vm`
        api.recognizer("ACME_ID", make_detector)  # privacy: a detector of personal data
        api.step_type("notify", run_notify)       # workflows: `- notify: {...}`

Middleware, run hooks and commands registered this way are folded into one capability
named after the plugin, so they reach ``codemode.assembly`` exactly as a built-in
capability's do: the registries below are the only other place codemode looks.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from ..capability import Capability, NoConfig
from ..chain import DEFAULT_STAGE, RUN_STAGES, TOOL_STAGES, RunHook
from ..errors import ConfigError

if TYPE_CHECKING:
    import click

    from ..execution.base import Executor
    from ..storage.base import Storage
    from ..tools.registry import Middleware
    from ..tools.spec import ToolSource
    from ..workspace import Workspace

T = TypeVar("T")

ToolSourceFactory = Callable[["Workspace"], "ToolSource | Iterable[ToolSource]"]
"""Builds a workspace's tool sources when its registry is built (may return none)."""
StorageFactory = Callable[["Workspace"], "Storage"]
ExecutorFactory = Callable[["Workspace | None"], "Executor"]
RecognizerFactory = Callable[[], Any]
"""Returns a detector: ``entities`` (tuple of entity names) and ``find(text)`` yielding
``(start, end, entity)`` spans (the protocol of ``codemode.privacy``'s detectors)."""
StepHandler = Callable[[Mapping[str, Any], Any], Awaitable[Any]]
"""``handler(arguments, step_context) -> output`` of a workflow step type."""


@dataclass(frozen=True, slots=True)
class Entry(Generic[T]):
    """One registered thing and the plugin that brought it (``""``: built in)."""

    name: str
    value: T
    plugin: str


class Registry(Generic[T]):
    """Name -> thing for one seam; a second claim to a name is refused, naming both."""

    def __init__(self, seam: str, reserved: Iterable[str] = ()) -> None:
        self.seam = seam
        self.reserved = frozenset(reserved)
        """Names codemode itself uses for this seam: no plugin may take them."""
        self._entries: dict[str, Entry[T]] = {}

    def add(self, name: str, value: T, plugin: str = "") -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{self.seam}: a name must be a non-empty string, not {name!r}")
        if name in self.reserved:
            raise ConfigError(f"{self.seam} {name!r} is built into codemode; choose another name")
        old = self._entries.get(name)
        if old is not None:
            who = f"plugin {old.plugin!r}" if old.plugin else "codemode"
            raise ConfigError(f"{self.seam} {name!r} is already provided by {who}")
        self._entries[name] = Entry(name, value, plugin)

    def get(self, name: str) -> T | None:
        entry = self._entries.get(name)
        return entry.value if entry is not None else None

    def entries(self) -> list[Entry[T]]:
        return list(self._entries.values())

    def names(self) -> list[str]:
        return list(self._entries)

    def drop_plugin(self, plugin: str) -> None:
        self._entries = {k: e for k, e in self._entries.items() if e.plugin != plugin}

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __len__(self) -> int:
        return len(self._entries)


class Registries:
    """Every seam's registry (one set per process, filled when plugins load)."""

    def __init__(
        self,
        *,
        capabilities: Iterable[str] = (),
        storages: Iterable[str] = (),
        executors: Iterable[str] = (),
        step_types: Iterable[str] = (),
        commands: Iterable[str] = (),
    ) -> None:
        """Each argument lists the names codemode reserves for that seam."""
        self.reserved_commands = frozenset(commands)
        """``codemode`` subcommands no plugin may shadow."""
        self.capabilities: Registry[Capability[Any]] = Registry("capability", capabilities)
        self.tool_sources: Registry[ToolSourceFactory] = Registry("tool source")
        self.storages: Registry[StorageFactory] = Registry("storage", storages)
        self.executors: Registry[ExecutorFactory] = Registry("executor", executors)
        self.recognizers: Registry[RecognizerFactory] = Registry("recognizer")
        self.step_types: Registry[StepHandler] = Registry("step type", step_types)

    def all(self) -> list[Registry[Any]]:
        return [
            self.capabilities,
            self.tool_sources,
            self.storages,
            self.executors,
            self.recognizers,
            self.step_types,
        ]

    def drop_plugin(self, plugin: str) -> None:
        for reg in self.all():
            reg.drop_plugin(plugin)

    def check_commands(self, plugin: str) -> None:
        """``plugin``'s CLI groups must not shadow codemode's or an earlier plugin's."""
        taken = dict.fromkeys(self.reserved_commands, "codemode")
        for entry in self.capabilities.entries():
            for name in entry.value.commands:
                if entry.plugin == plugin and name in taken:
                    raise ConfigError(f"command {name!r} is already provided by {taken[name]}")
                taken.setdefault(name, f"plugin {entry.plugin!r}")


class PluginAPI:
    """Handed to a plugin's ``setup(api)``: everything it registers is tagged with its name."""

    def __init__(self, plugin: str, registries: Registries) -> None:
        self.plugin = plugin
        self._reg = registries
        self._layers: list[tuple[str, Middleware]] = []
        self._hooks: list[tuple[str, RunHook]] = []
        self._commands: dict[str, tuple[str, Callable[[], click.Command]]] = {}

    # -- capabilities and the two chains -------------------------------------------------
    def capability(self, capability: Capability[Any]) -> None:
        """A whole capability: config section, tool layers, run hooks, CLI, server tools."""
        if not isinstance(capability, Capability):
            raise ConfigError(f"capability(): expected a Capability, got {type(capability)}")
        self._reg.capabilities.add(capability.name, capability, self.plugin)

    def middleware(self, layer: Middleware, stage: str = DEFAULT_STAGE) -> None:
        """A tool-call layer ``layer(call, call_next)`` on every workspace registry."""
        _check_stage(stage, TOOL_STAGES, "tool-call")
        self._layers.append((stage, layer))

    def run_hook(self, hook: RunHook, stage: str = DEFAULT_STAGE) -> None:
        """A run hook ``hook(event, call_next)`` on every session opened on a workspace."""
        _check_stage(stage, RUN_STAGES, "run")
        self._hooks.append((stage, hook))

    def command(self, name: str, loader: Callable[[], click.Command], help: str = "") -> None:
        """``codemode <name>``: ``loader()`` imports and returns the click command."""
        if not name or not all(c.isalnum() or c in "-_" for c in name):
            raise ConfigError(f"command name {name!r}: use letters, digits, '-' and '_'")
        self._commands[name] = (help or f"Added by plugin {self.plugin}.", loader)

    # -- other seams ------------------------------------------------------------------
    def tool_source(self, factory: ToolSourceFactory, name: str | None = None) -> None:
        """Tool sources for each workspace's registry: ``factory(workspace)`` returns one
        ``ToolSource``, several, or none; their tools appear as ``tools.<source>.<tool>``."""
        self._reg.tool_sources.add(name or f"{self.plugin}", factory, self.plugin)

    def storage(self, name: str, factory: StorageFactory) -> None:
        """A storage backend chosen with the ``storage`` setting: ``factory(workspace)``."""
        self._reg.storages.add(name, factory, self.plugin)

    def executor(self, name: str, factory: ExecutorFactory) -> None:
        """An executor chosen with the ``executor`` setting: ``factory(workspace | None)``."""
        self._reg.executors.add(name, factory, self.plugin)

    def recognizer(self, name: str, factory: RecognizerFactory) -> None:
        """A detector of personal data for the privacy capability (see ``RecognizerFactory``)."""
        self._reg.recognizers.add(name, factory, self.plugin)

    def step_type(self, name: str, handler: StepHandler) -> None:
        """A workflow step type: ``- <name>: {arguments}`` runs ``handler(arguments, ctx)``."""
        if not name.isidentifier():
            raise ConfigError(f"step type {name!r} must be an identifier")
        self._reg.step_types.add(name, handler, self.plugin)

    # -- folding ------------------------------------------------------------------------
    def finish(self) -> None:
        """Fold middleware, hooks and commands into one capability named after the plugin."""
        if not (self._layers or self._hooks or self._commands):
            return
        layers, hooks, commands = list(self._layers), list(self._hooks), dict(self._commands)

        def command(name: str) -> click.Command:
            return commands[name][1]()

        cap: Capability[NoConfig] = Capability(
            name=capability_name(self.plugin),
            config=NoConfig,
            tool_layers=(lambda _c: layers) if layers else None,
            run_hooks=(lambda _c: hooks) if hooks else None,
            commands={name: help_ for name, (help_, _) in commands.items()},
            command=command if commands else None,
        )
        self._reg.capabilities.add(cap.name, cap, self.plugin)


def capability_name(plugin: str) -> str:
    """The name of the capability a plugin's loose parts are folded into."""
    name = "".join(c if c.isalnum() else "_" for c in plugin.lower()).strip("_") or "plugin"
    return name if name[0].isalpha() else f"p_{name}"


def _check_stage(stage: str, stages: tuple[str, ...], kind: str) -> None:
    if stage not in stages:
        raise ConfigError(f"unknown {kind} stage {stage!r}; stages: {', '.join(stages)}")


__all__ = [
    "Entry",
    "ExecutorFactory",
    "PluginAPI",
    "RecognizerFactory",
    "Registries",
    "Registry",
    "StepHandler",
    "StorageFactory",
    "ToolSourceFactory",
    "capability_name",
]
