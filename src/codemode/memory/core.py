"""Memory: a session's skills, artifacts, state and deps, behind one object.

``Memory.install(host)`` serves the worker->host methods (``skills.*``, ``artifacts.*``,
``state.*``, ``deps.*``: the table in ``memory.rpc``) on a ``HostAPI``; the same objects
serve the Python SDK, the CLI and the MCP server tools.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..storage import FileStorage, Storage
from ..storage.quota import QuotaStorage
from .artifacts import Artifacts
from .deps import Deps
from .events import MemoryWatcher, WatchedStorage, Watchers
from .skills import Skills
from .state import State

if TYPE_CHECKING:
    from ..hostapi import HostAPI
    from ..workspace import Workspace


class Memory:
    """Skills, artifacts and state on one ``Storage``, plus an optional deps directory."""

    def __init__(
        self,
        storage: Storage,
        *,
        deps: Deps | None = None,
        allow_runtime_deps: bool = True,
        workspace: str | None = None,
    ) -> None:
        self.storage = storage
        self._watchers = Watchers(workspace)
        watched = WatchedStorage(storage, self._watchers)
        self.skills = Skills(watched)
        self.artifacts = Artifacts(watched)
        self.state = State(watched)
        self.deps = deps
        if deps is not None:
            deps.on_change = self._deps_changed
        if deps is not None and not allow_runtime_deps:
            deps.allow_runtime_deps = False
        self.allow_runtime_deps = allow_runtime_deps and (deps is None or deps.allow_runtime_deps)

    @classmethod
    def from_workspace(
        cls,
        path: str | os.PathLike[str],
        *,
        allow_runtime_deps: bool | None = None,
        deps: Sequence[str] | None = None,
        storage: Storage | None = None,
    ) -> Memory:
        """Records under the workspace (or Redis when its config says so), deps in ``deps/``.

        Unset arguments come from the workspace settings (``storage``/``redis_url``/
        ``redis_prefix``; the memory section's ``allow_runtime_deps``, ``deps``, ``deps_index_url``
        and quota).
        """
        from ..workspace import Workspace

        return cls.for_workspace(
            Workspace.open(Path(path).expanduser().absolute()),
            allow_runtime_deps=allow_runtime_deps,
            deps=deps,
            storage=storage,
        )

    @classmethod
    def for_workspace(
        cls,
        workspace: Workspace,
        *,
        allow_runtime_deps: bool | None = None,
        deps: Sequence[str] | None = None,
        storage: Storage | None = None,
    ) -> Memory:
        """``from_workspace`` for a workspace that is already open."""
        from .capability import MEMORY

        base, config = workspace.path, workspace.section(MEMORY)
        if storage is None:
            storage = _storage_for(workspace)
            mb, records = config.quota_mb, config.quota_records
            storage = QuotaStorage(
                storage, max_bytes=(mb << 20) or None, max_records=records or None
            )
        if allow_runtime_deps is None:
            allow_runtime_deps = config.allow_runtime_deps
        from ..assembly import configure_memory

        memory = cls(
            storage,
            deps=Deps(
                base / "deps",
                allow_runtime_deps=allow_runtime_deps,
                index_url=config.deps_index_url,
                configured=config.deps if deps is None else deps,
                max_bytes=(config.deps_quota_mb << 20) or None,
            ),
            allow_runtime_deps=allow_runtime_deps,
            workspace=str(base),
        )
        configure_memory(memory, workspace.capabilities, workspace.sections)
        return memory

    def watch(self, watcher: MemoryWatcher) -> None:
        """Call ``watcher(MemoryWrite)`` after every write (skills, artifacts, state, deps),
        whoever asked for it."""
        self._watchers.add(watcher)

    def _deps_changed(self, op: str, name: str) -> None:
        self._watchers.tell(op, "deps", name)

    @property
    def deps_dir(self) -> Path | None:
        """The directory the worker must import packages from (pass as ``deps_dir=``)."""
        return self.deps.site if self.deps is not None else None

    async def prepare(self, *, install_deps: bool = False) -> list[str]:
        """Install configured deps that are missing (when asked); returns what was added."""
        if install_deps and self.deps is not None:
            return await self.deps.install_configured()
        return []

    async def aclose(self) -> None:
        await self.storage.aclose()

    # -- worker -> host ----------------------------------------------------------------
    def install(self, host: HostAPI) -> None:
        """Serve ``skills.*``, ``artifacts.*``, ``state.*`` and ``deps.*`` on ``host``
        (the rows of ``codemode.memory.rpc``)."""
        from .rpc import MEMORY_METHODS

        MEMORY_METHODS.install(host, self)


def _storage_for(workspace: Workspace) -> Storage:
    """FileStorage under the workspace, unless its settings choose Redis or a plugin's."""
    base, settings = workspace.path, workspace.settings
    if settings.storage == "redis":
        from ..storage.redis import RedisStorage

        return RedisStorage(settings.redis_url or "redis://127.0.0.1:6379/0", settings.redis_prefix)
    if settings.storage != "file":
        return _plugin_storage(workspace, settings.storage)
    return FileStorage(base)


def _plugin_storage(workspace: Workspace, name: str) -> Storage:
    """A storage backend a plugin registered under ``name`` (``codemode.plugins``)."""
    from ..errors import ConfigError
    from ..plugins import names, storage_factory

    factory = storage_factory(name)
    if factory is None:
        known = ", ".join(["file", "redis", *names("storages")])
        raise ConfigError(f"unknown storage {name!r}; choose one of {known}")
    return factory(workspace)


__all__ = ["Memory"]
