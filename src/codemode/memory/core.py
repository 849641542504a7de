"""Memory: a session's skills, artifacts, state and deps, behind one object.

``Memory.install(host)`` registers the worker->host methods (``skills.*``, ``artifacts.*``,
``state.*``, ``deps.*``) on a ``HostAPI``; the same objects serve the Python SDK, the CLI
and the MCP server tools. Skill code is never run here: ``skills.source`` hands it to the
worker, which runs it.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import DepsError, ValidationError
from ..storage import FileStorage, Storage
from .artifacts import Artifacts
from .deps import Deps
from .skills import Skills
from .state import State

if TYPE_CHECKING:
    from ..workspace import Workspace

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


class _Host(Protocol):
    def register(self, method: str, handler: Handler) -> None: ...


def _arg(params: dict[str, Any], key: str, typ: type | tuple[type, ...] = str) -> Any:
    if key not in params:
        raise ValidationError(f"missing argument {key!r}")
    value = params[key]
    if not isinstance(value, typ):
        raise ValidationError(f"argument {key!r} has the wrong type ({type(value).__name__})")
    return value


def _opt(params: dict[str, Any], key: str, default: Any = None) -> Any:
    value = params.get(key)
    return default if value is None else value


class Memory:
    """Skills, artifacts and state on one ``Storage``, plus an optional deps directory."""

    def __init__(
        self,
        storage: Storage,
        *,
        deps: Deps | None = None,
        allow_runtime_deps: bool = True,
    ) -> None:
        self.storage = storage
        self.skills = Skills(storage)
        self.artifacts = Artifacts(storage)
        self.state = State(storage)
        self.deps = deps
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
        ``redis_prefix``, ``allow_runtime_deps``, ``deps``, ``allow_source_builds``).
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
        if allow_runtime_deps is None:
            allow_runtime_deps = config.allow_runtime_deps
        return cls(
            storage,
            deps=Deps(
                base / "deps",
                allow_runtime_deps=allow_runtime_deps,
                allow_source_builds=config.allow_source_builds,
                configured=config.deps if deps is None else deps,
            ),
            allow_runtime_deps=allow_runtime_deps,
        )

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

    def _need_deps(self) -> Deps:
        if self.deps is None:
            raise DepsError("this session has no deps directory")
        return self.deps

    # -- worker -> host ----------------------------------------------------------------
    def install(self, host: _Host) -> None:
        """Register ``skills.*``, ``artifacts.*``, ``state.*`` and ``deps.*`` on ``host``."""
        sk, ar, st = self.skills, self.artifacts, self.state

        async def skills_create(p: dict[str, Any]) -> Any:
            code = p.get("code", p.get("source"))
            if not isinstance(code, str):
                raise ValidationError("skills.create needs the skill's code (a string)")
            skill = await sk.create(
                _arg(p, "name"),
                code,
                _opt(p, "description", ""),
                parameters=p.get("parameters"),
                tags=p.get("tags"),
                notes=_opt(p, "notes", ""),
                replace=bool(p.get("replace", False)),
            )
            return skill.summary()

        async def skills_update(p: dict[str, Any]) -> Any:
            skill = await sk.update(
                _arg(p, "name"),
                code=p.get("code", p.get("source")),
                description=p.get("description"),
                parameters=p.get("parameters"),
                tags=p.get("tags"),
                notes=p.get("notes"),
            )
            return skill.summary()

        async def skills_get(p: dict[str, Any]) -> Any:
            return (await sk.get(_arg(p, "name"))).to_dict()

        async def skills_list(p: dict[str, Any]) -> Any:
            return await sk.list()

        async def skills_search(p: dict[str, Any]) -> Any:
            return await sk.search(_opt(p, "query", ""), int(_opt(p, "limit", 10)))

        async def skills_delete(p: dict[str, Any]) -> Any:
            return await sk.delete(_arg(p, "name"))

        async def skills_rollback(p: dict[str, Any]) -> Any:
            return (await sk.rollback(_arg(p, "name"), p.get("version"))).summary()

        async def skills_versions(p: dict[str, Any]) -> Any:
            return await sk.versions(_arg(p, "name"))

        async def skills_source(p: dict[str, Any]) -> Any:
            return await sk.source(_arg(p, "name"), p.get("have_version"))

        async def artifacts_save(p: dict[str, Any]) -> Any:
            if "data" not in p:
                raise ValidationError("artifacts.save needs 'data'")
            return await ar.save(_arg(p, "name"), p["data"], description=_opt(p, "description", ""))

        async def artifacts_load(p: dict[str, Any]) -> Any:
            return await ar.load(_arg(p, "name"))

        async def artifacts_info(p: dict[str, Any]) -> Any:
            return await ar.info(_arg(p, "name"))

        async def artifacts_list(p: dict[str, Any]) -> Any:
            return await ar.list()

        async def artifacts_delete(p: dict[str, Any]) -> Any:
            return await ar.delete(_arg(p, "name"))

        async def artifacts_exists(p: dict[str, Any]) -> Any:
            return await ar.exists(_arg(p, "name"))

        async def state_get(p: dict[str, Any]) -> Any:
            return await st.get(p.get("key"), p.get("default"))

        async def state_set(p: dict[str, Any]) -> Any:
            if "key" in p:
                await st.set(_arg(p, "key"), p.get("value"))
            else:
                await st.replace(_arg(p, "data", dict))
            return None

        async def state_update(p: dict[str, Any]) -> Any:
            return await st.update(_arg(p, "data", dict))

        async def state_delete(p: dict[str, Any]) -> Any:
            return await st.delete(_arg(p, "key"))

        async def deps_add(p: dict[str, Any]) -> Any:
            return await self._need_deps().add(_arg(p, "spec"))

        async def deps_remove(p: dict[str, Any]) -> Any:
            return await self._need_deps().remove(_arg(p, "name"))

        async def deps_list(p: dict[str, Any]) -> Any:
            return await self._need_deps().list()

        async def deps_sync(p: dict[str, Any]) -> Any:
            return await self._need_deps().sync()

        handlers: dict[str, Handler] = {
            "skills.create": skills_create,
            "skills.update": skills_update,
            "skills.get": skills_get,
            "skills.list": skills_list,
            "skills.search": skills_search,
            "skills.delete": skills_delete,
            "skills.rollback": skills_rollback,
            "skills.versions": skills_versions,
            "skills.source": skills_source,
            "artifacts.save": artifacts_save,
            "artifacts.load": artifacts_load,
            "artifacts.info": artifacts_info,
            "artifacts.list": artifacts_list,
            "artifacts.delete": artifacts_delete,
            "artifacts.exists": artifacts_exists,
            "state.get": state_get,
            "state.set": state_set,
            "state.update": state_update,
            "state.delete": state_delete,
            "deps.add": deps_add,
            "deps.remove": deps_remove,
            "deps.list": deps_list,
            "deps.sync": deps_sync,
        }
        for method, handler in handlers.items():
            host.register(method, handler)


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
