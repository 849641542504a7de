"""Plugins: Python packages that add to codemode through entry points (``codemode.plugins``).

A plugin names a ``Capability`` or a ``setup(api: PluginAPI)`` function (see
``codemode.plugins.api``). What plugins add lands in the same places as codemode's own
parts: capabilities in ``codemode.assembly.installed()``, tool sources in each workspace's
registry, storage backends and executors behind the ``storage`` and ``executor``
settings, PII recognizers for the privacy capability (``recognizers()``), step types for
workflows. ``codemode plugins list`` shows what loaded, from where, and what failed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .api import (
    Entry,
    ExecutorFactory,
    PluginAPI,
    RecognizerFactory,
    Registries,
    Registry,
    StepHandler,
    StorageFactory,
    ToolSourceFactory,
)
from .loader import DISABLE_ENV, GROUP, Loaded, Plugin, capabilities, load

if TYPE_CHECKING:
    from ..tools.spec import ToolSource
    from ..workspace import Workspace


def plugins() -> list[Plugin]:
    """Every plugin entry point found, with its status."""
    return list(load().plugins)


def tool_sources(workspace: Workspace) -> list[ToolSource]:
    """The tool sources plugins build for ``workspace`` (a failing factory is logged and
    skipped: one broken plugin must not take the workspace's other tools down)."""
    from ..tools.spec import ToolSource

    out: list[ToolSource] = []
    for entry in load().registries.tool_sources.entries():
        try:
            made = entry.value(workspace)
        except Exception as exc:  # noqa: BLE001 - a plugin's failure is reported, not raised
            from .loader import log

            log.warning("plugin %r: tool source %r failed: %s", entry.plugin, entry.name, exc)
            continue
        if made is None:
            continue
        items = [made] if isinstance(made, ToolSource) else list(made)
        out += items
    return out


def storage_factory(name: str) -> StorageFactory | None:
    return load().registries.storages.get(name)


def executor_factory(name: str) -> ExecutorFactory | None:
    return load().registries.executors.get(name)


def recognizers() -> dict[str, RecognizerFactory]:
    """Name -> factory of the PII detectors plugins provide, for ``codemode.privacy``.

    A factory takes no argument and returns a detector with ``entities`` (entity type
    names) and ``find(text)`` yielding ``(start, end, entity)`` spans.
    """
    return {e.name: e.value for e in load().registries.recognizers.entries()}


def step_types() -> dict[str, StepHandler]:
    """Name -> handler of the workflow step types plugins provide."""
    return {e.name: e.value for e in load().registries.step_types.entries()}


def names(seam: str) -> list[str]:
    """Names registered for ``storages`` or ``executors`` (for messages and validation)."""
    registry: Any = getattr(load().registries, seam)
    return list(registry.names())


__all__ = [
    "DISABLE_ENV",
    "GROUP",
    "Entry",
    "ExecutorFactory",
    "Loaded",
    "Plugin",
    "PluginAPI",
    "RecognizerFactory",
    "Registries",
    "Registry",
    "StepHandler",
    "StorageFactory",
    "ToolSourceFactory",
    "capabilities",
    "executor_factory",
    "load",
    "names",
    "plugins",
    "recognizers",
    "step_types",
    "storage_factory",
    "tool_sources",
]
