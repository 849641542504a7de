"""The ``skills.*``, ``artifacts.*``, ``state.*`` and ``deps.*`` rows of the worker -> host
table (see ``codemode.rpc``). The MCP memory tools (``server_tools``) and the CLI
(``cli``) take their parameters from these models and call these handlers.

Skill code is never run here: ``skills.source`` hands it to the worker, which runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from ..errors import DepsError
from ..rpc import Method, Params, Table

if TYPE_CHECKING:
    from .core import Memory
    from .deps import Deps

Name = Annotated[str, Field(description="The skill's name (a Python identifier).")]
ArtifactName = Annotated[str, Field(description="The artifact's name.")]
Version = Annotated[int | None, Field(description="A version number.")]


# -- skills -----------------------------------------------------------------------------
class SkillName(Params):
    name: Name


class SkillCreate(Params):
    name: Name
    code: str = Field(description="Python source defining run(...).")
    description: str = Field("", description="What it does and when to use it.")
    parameters: dict[str, Any] | list[dict[str, Any]] | None = Field(
        None, description="Optional: parameter name -> description."
    )
    tags: list[str] | None = Field(None, description="Optional tags.")
    notes: str = Field("", description="Optional usage notes (SKILL.md body).")
    replace: bool = Field(
        False, description="Update the skill if it exists (the old version is kept)."
    )


class SkillUpdate(Params):
    name: Name
    code: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | list[dict[str, Any]] | None = None
    tags: list[str] | None = None
    notes: str | None = None


class SkillSearch(Params):
    query: str = Field("", description="What you want to do, in a few words.")
    limit: int = Field(10, ge=0, le=10_000, description="Maximum number of results.")


class SkillRollback(Params):
    name: Name
    version: Version = None


class SkillSource(Params):
    name: Name
    have_version: Version = None


class NoParams(Params):
    pass


async def _skills_create(m: Memory, p: SkillCreate) -> Any:
    skill = await m.skills.create(
        p.name,
        p.code,
        p.description,
        parameters=p.parameters,
        tags=p.tags,
        notes=p.notes,
        replace=p.replace,
    )
    return skill.summary()


async def _skills_update(m: Memory, p: SkillUpdate) -> Any:
    changes = p.model_dump(exclude={"name"})
    return (await m.skills.update(p.name, **changes)).summary()


async def _skills_get(m: Memory, p: SkillName) -> Any:
    return (await m.skills.get(p.name)).to_dict()


async def _skills_list(m: Memory, p: NoParams) -> Any:
    return await m.skills.list()


async def _skills_search(m: Memory, p: SkillSearch) -> Any:
    return await m.skills.search(p.query, p.limit)


async def _skills_delete(m: Memory, p: SkillName) -> Any:
    return await m.skills.delete(p.name)


async def _skills_rollback(m: Memory, p: SkillRollback) -> Any:
    return (await m.skills.rollback(p.name, p.version)).summary()


async def _skills_versions(m: Memory, p: SkillName) -> Any:
    return await m.skills.versions(p.name)


async def _skills_source(m: Memory, p: SkillSource) -> Any:
    return await m.skills.source(p.name, p.have_version)


# -- artifacts --------------------------------------------------------------------------
class ArtifactRef(Params):
    name: ArtifactName


class ArtifactSave(Params):
    name: ArtifactName
    data: Any = Field(description="bytes, a string, or JSON-like data.")
    description: str = Field("", description="What the data is.")


async def _artifacts_save(m: Memory, p: ArtifactSave) -> Any:
    return await m.artifacts.save(p.name, p.data, description=p.description)


async def _artifacts_load(m: Memory, p: ArtifactRef) -> Any:
    return await m.artifacts.load(p.name)


async def _artifacts_info(m: Memory, p: ArtifactRef) -> Any:
    return await m.artifacts.info(p.name)


async def _artifacts_list(m: Memory, p: NoParams) -> Any:
    return await m.artifacts.list()


async def _artifacts_delete(m: Memory, p: ArtifactRef) -> Any:
    return await m.artifacts.delete(p.name)


async def _artifacts_exists(m: Memory, p: ArtifactRef) -> Any:
    return await m.artifacts.exists(p.name)


# -- state ------------------------------------------------------------------------------
class StateGet(Params):
    key: str | None = Field(None, description="One key; omit for the whole state.")
    default: Any = None


class StateSet(Params):
    key: str = Field(description="The key.")
    value: Any = Field(None, description="A JSON-like value.")


class StateData(Params):
    data: dict[str, Any] = Field(description="The state (a JSON object).")


class StateKey(Params):
    key: str = Field(description="The key.")


async def _state_get(m: Memory, p: StateGet) -> Any:
    return await m.state.get(p.key, p.default)


async def _state_set(m: Memory, p: StateSet) -> Any:
    await m.state.set(p.key, p.value)


async def _state_replace(m: Memory, p: StateData) -> Any:
    await m.state.replace(p.data)


async def _state_update(m: Memory, p: StateData) -> Any:
    return await m.state.update(p.data)


async def _state_delete(m: Memory, p: StateKey) -> Any:
    return await m.state.delete(p.key)


# -- deps -------------------------------------------------------------------------------
class DepSpec(Params):
    spec: str = Field(description="A requirement, e.g. 'six==1.17.0'.")


class DepName(Params):
    name: str = Field(description="The package name.")


def _deps(m: Memory) -> Deps:
    if m.deps is None:
        raise DepsError("this session has no deps directory")
    return m.deps


async def _deps_add(m: Memory, p: DepSpec) -> Any:
    return await _deps(m).add(p.spec)


async def _deps_remove(m: Memory, p: DepName) -> Any:
    return await _deps(m).remove(p.name)


async def _deps_list(m: Memory, p: NoParams) -> Any:
    return await _deps(m).list()


async def _deps_sync(m: Memory, p: NoParams) -> Any:
    return await _deps(m).sync()


M = Method
MEMORY_METHODS: Table[Memory] = Table(
    M("skills.create", SkillCreate, _skills_create, "summary", "Save code as a new skill."),
    M("skills.update", SkillUpdate, _skills_update, "summary", "Change a skill (new version)."),
    M("skills.get", SkillName, _skills_get, "dict with code", "One skill in full."),
    M("skills.list", NoParams, _skills_list, "list of summaries", "Every skill, no code."),
    M("skills.search", SkillSearch, _skills_search, "list of summaries", "Rank skills."),
    M("skills.delete", SkillName, _skills_delete, "bool", "Delete a skill and its versions."),
    M("skills.rollback", SkillRollback, _skills_rollback, "summary", "Restore a version."),
    M("skills.versions", SkillName, _skills_versions, "list of versions", "Kept versions."),
    M("skills.source", SkillSource, _skills_source, "name, version, code", "Code to run."),
    M("artifacts.save", ArtifactSave, _artifacts_save, "info", "Save named data."),
    M("artifacts.load", ArtifactRef, _artifacts_load, "the data", "Load an artifact."),
    M("artifacts.info", ArtifactRef, _artifacts_info, "info", "Type, size, created."),
    M("artifacts.list", NoParams, _artifacts_list, "list of info", "Every artifact, no data."),
    M("artifacts.delete", ArtifactRef, _artifacts_delete, "bool", "Delete an artifact."),
    M("artifacts.exists", ArtifactRef, _artifacts_exists, "bool", "Whether it exists."),
    M("state.get", StateGet, _state_get, "the value or the document", "Read the state."),
    M("state.set", StateSet, _state_set, "null", "Set one key."),
    M("state.replace", StateData, _state_replace, "null", "Replace the whole state."),
    M("state.update", StateData, _state_update, "the new document", "Merge keys in."),
    M("state.delete", StateKey, _state_delete, "bool", "Delete one key."),
    M("deps.add", DepSpec, _deps_add, "name, spec, version, site", "Install a package."),
    M("deps.remove", DepName, _deps_remove, "bool", "Uninstall a package."),
    M("deps.list", NoParams, _deps_list, "list of packages", "Packages asked for."),
    M("deps.sync", NoParams, _deps_sync, "installed, site", "Rebuild the deps directory."),
)


__all__ = ["MEMORY_METHODS"]
