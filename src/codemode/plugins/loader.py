"""Finding and loading plugins: Python entry points in the ``codemode.plugins`` group.

Plugins load once per process, the first time anything asks (``codemode.assembly``,
``Workspace``, the storage and executor factories, the workflow engine). A plugin that
fails (its import raises, ``setup`` raises, it claims a name codemode or an earlier plugin
already uses) is reported with its name and error (``codemode plugins list``, the
``codemode.plugins`` logger) and everything it had registered is withdrawn; codemode and
the other plugins carry on.

``CODEMODE_PLUGINS_DISABLE`` (comma-separated entry point names, or ``*``) skips plugins
without importing them: the way out when a plugin breaks the process at import.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

from ..capability import Capability
from .api import PluginAPI, Registries

GROUP = "codemode.plugins"
DISABLE_ENV = "CODEMODE_PLUGINS_DISABLE"

log = logging.getLogger("codemode.plugins")


@dataclass
class Plugin:
    """One entry point of the ``codemode.plugins`` group and what became of it."""

    name: str
    value: str
    """``module:attribute`` as the entry point names it."""
    distribution: str = ""
    version: str = ""
    location: str = ""
    """Where the distribution is installed."""
    status: str = "loaded"
    """``loaded``, ``failed`` or ``disabled``."""
    error: str | None = None
    provides: list[str] = field(default_factory=list)
    """What it registered, as ``seam name`` strings."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "distribution": self.distribution,
            "version": self.version,
            "location": self.location,
            "status": self.status,
            "error": self.error,
            "provides": list(self.provides),
        }


@dataclass
class Loaded:
    """The plugins of this process and the registries they filled."""

    plugins: list[Plugin]
    registries: Registries


_lock = threading.RLock()
_loaded: Loaded | None = None


def load(*, reload: bool = False, env: Mapping[str, str] | None = None) -> Loaded:
    """The process's plugins (loaded on first call; ``reload=True`` loads them again)."""
    global _loaded
    with _lock:
        if _loaded is None or reload:
            _loaded = _load(env if env is not None else os.environ)
        return _loaded


def _reserved() -> Registries:
    from .. import assembly
    from ..cli import SUBCOMMANDS
    from ..execution import EXECUTOR_NAMES

    builtin = assembly.BUILTIN
    reg = Registries(
        capabilities=[c.name for c in builtin],
        storages=("file", "redis"),
        executors=EXECUTOR_NAMES,
        step_types=_builtin_step_kinds(),
        commands=[*SUBCOMMANDS, *(name for c in builtin for name in c.commands)],
    )
    return reg


def _builtin_step_kinds() -> tuple[str, ...]:
    from ..workflows.steps import BUILTIN_KINDS

    return BUILTIN_KINDS


def _entry_points() -> Iterable[metadata.EntryPoint]:
    return sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name)


def _load(env: Mapping[str, str]) -> Loaded:
    registries = _reserved()
    disabled = {n.strip() for n in env.get(DISABLE_ENV, "").split(",") if n.strip()}
    plugins: list[Plugin] = []
    seen: set[str] = set()
    for ep in _entry_points():
        plugin = _describe(ep)
        plugins.append(plugin)
        if ep.name in seen:
            plugin.status, plugin.error = "failed", "another plugin has the same name"
            continue
        seen.add(ep.name)
        if "*" in disabled or ep.name in disabled:
            plugin.status = "disabled"
            continue
        _load_one(ep, plugin, registries)
    return Loaded(plugins, registries)


def _describe(ep: metadata.EntryPoint) -> Plugin:
    dist = ep.dist
    plugin = Plugin(ep.name, ep.value)
    if dist is not None:
        plugin.distribution = str(dist.metadata["Name"] or "")
        plugin.version = str(dist.version or "")
        try:
            plugin.location = str(dist.locate_file(""))
        except (NotImplementedError, TypeError):
            plugin.location = ""
    return plugin


def _load_one(ep: metadata.EntryPoint, plugin: Plugin, registries: Registries) -> None:
    before = {id(reg): set(reg.names()) for reg in registries.all()}
    try:
        target = ep.load()
        api = PluginAPI(ep.name, registries)
        if isinstance(target, Capability):
            api.capability(target)
        elif callable(target):
            target(api)
        else:
            raise TypeError(
                f"{ep.value} is a {type(target).__name__}: a plugin entry point must name a "
                "Capability or a function setup(api)"
            )
        api.finish()
        registries.check_commands(ep.name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin must not stop codemode
        registries.drop_plugin(ep.name)
        plugin.status = "failed"
        plugin.error = f"{type(exc).__name__}: {exc}"
        log.warning("plugin %r (%s) failed to load: %s", ep.name, ep.value, plugin.error)
        return
    for reg in registries.all():
        for name in sorted(set(reg.names()) - before[id(reg)]):
            plugin.provides.append(f"{reg.seam} {name}")
            if reg is registries.capabilities:
                cap = reg.get(name)
                assert cap is not None
                plugin.provides += [f"command {c}" for c in cap.commands]


def capabilities() -> tuple[Capability[Any], ...]:
    """The capabilities plugins added, in the order they loaded."""
    return tuple(e.value for e in load().registries.capabilities.entries())


__all__ = ["DISABLE_ENV", "GROUP", "Loaded", "Plugin", "capabilities", "load"]
