"""The memory tools of ``codemode serve``: skills, artifacts, state and deps.

Thin handlers over ``ServerContext.memory`` (a ``codemode.memory.Memory`` on the same
storage as the sessions). ``invoke_skill`` runs the skill in the caller's own session
worker, never in the server process. ``add_dep``/``remove_dep`` exist only when runtime
deps are allowed.
"""

from __future__ import annotations

import base64
import json
from typing import Annotated, Any

from pydantic import Field

from codemode.errors import ValidationError

from ..server.toolset import Call, Reply, ServerContext, Toolset

INLINE_BYTES = 256 * 1024

Name = Annotated[str, Field(description="The skill's name (a Python identifier).")]
ArtifactName = Annotated[str, Field(description="The artifact's name.")]
StateFile = Annotated[
    str | None,
    Field(description='A named state document, e.g. "progress.json" (default: the workspace\'s).'),
]


def _skill_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['name']}: unreadable ({row['error']})"
    sig = str(row.get("signature") or "run()")
    line = f"skills.{row['name']}{sig[3:]}  v{row.get('version', 1)}"
    if row.get("description"):
        line += f"\n    {row['description']}"
    return line


def _artifact_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['name']}: unreadable ({row['error']})"
    about = f" - {row['description']}" if row.get("description") else ""
    return f"{row['name']} ({row['type']}, {row['size']} bytes, {row['created']}){about}"


def _memory(call: Call) -> Any:
    memory = call.server.memory
    if memory is None:
        raise ValidationError("this server has no storage for skills, artifacts and state")
    return memory


def register(toolset: Toolset, ctx: ServerContext) -> None:
    """Add the memory tools (called by ``app.build_server``)."""
    if ctx.memory is None:
        return
    _skills(toolset)
    _artifacts_and_state(toolset)
    _deps(toolset, ctx)


def _skills(ts: Toolset) -> None:
    @ts.tool(
        description="List saved skills (reusable code): name, signature, version, description.",
        read_only=True,
    )
    async def list_skills(call: Call) -> Reply:
        rows = await _memory(call).skills.list()
        if not rows:
            return Reply("No skills saved yet. Save one with create_skill.", {"skills": []})
        return Reply("\n".join(_skill_line(r) for r in rows), {"skills": rows})

    @ts.tool(
        description="Find saved skills relevant to a task (ranked by name, description, "
        "parameters and code). Invoke one in run_code with skills.<name>(...).",
        read_only=True,
    )
    async def search_skills(
        call: Call,
        query: Annotated[str, Field(description="What you want to do, in a few words.")],
        limit: Annotated[int, Field(description="Maximum number of results.", ge=1, le=100)] = 10,
    ) -> Reply:
        rows = await _memory(call).skills.search(query, limit)
        if not rows:
            return Reply(f"No skills match {query!r}.", {"skills": []})
        return Reply("\n".join(_skill_line(r) for r in rows), {"skills": rows})

    @ts.tool(description="Show a skill: its SKILL.md (description, parameters) and code.")
    async def get_skill(call: Call, name: Name) -> Reply:
        skill = await _memory(call).skills.get(name)
        text = f"{skill.skill_md()}\n```python\n{skill.code.rstrip()}\n```"
        return Reply(text, skill.to_dict())

    @ts.tool(
        description="Save Python code as a reusable skill. The code must define run(...) "
        "(plain or async); it is checked but not run. Skills can call tools.* and other "
        "skills.*. Later, in run_code: skills.<name>(arg=...)."
    )
    async def create_skill(
        call: Call,
        name: Name,
        code: Annotated[str, Field(description="Python source defining run(...).")],
        description: Annotated[str, Field(description="What it does and when to use it.")],
        parameters: Annotated[
            dict[str, str] | None,
            Field(description="Optional: parameter name -> description."),
        ] = None,
        tags: Annotated[list[str] | None, Field(description="Optional tags.")] = None,
        notes: Annotated[str, Field(description="Optional usage notes (SKILL.md body).")] = "",
        replace: Annotated[
            bool, Field(description="Update the skill if it exists (the old version is kept).")
        ] = False,
    ) -> Reply:
        skill = await _memory(call).skills.create(
            name, code, description, parameters=parameters, tags=tags, notes=notes, replace=replace
        )
        return Reply(
            f"Saved skill {skill.name} v{skill.version}: skills.{skill.name}{skill.signature[3:]}",
            skill.summary(),
        )

    @ts.tool(description="Delete a saved skill and its earlier versions.")
    async def delete_skill(call: Call, name: Name) -> Reply:
        deleted = await _memory(call).skills.delete(name)
        text = f"Deleted skill {name}." if deleted else f"No skill named {name!r}."
        return Reply(text, {"deleted": deleted})

    @ts.tool(
        description="Run a saved skill in your session with keyword arguments and return "
        "its result (the same as run_code with skills.<name>(**arguments))."
    )
    async def invoke_skill(
        call: Call,
        name: Name,
        arguments: Annotated[
            dict[str, Any] | None, Field(description="Keyword arguments for the skill's run().")
        ] = None,
        timeout: Annotated[
            float | None, Field(description="Seconds before the run is interrupted.", gt=0)
        ] = None,
    ) -> Reply:
        from ..server.app import EPHEMERAL_NOTICE, render_run
        from .skills import check_skill_name

        check_skill_name(name)
        args = json.dumps(arguments or {}, ensure_ascii=False)
        code = f"skills.invoke({name!r}, **__import__('json').loads({args!r}))"
        ctx = call.server
        async with ctx.sessions.lease(call.session_key) as lease:
            result = await lease.session.run(code, timeout=timeout)
        notice = EPHEMERAL_NOTICE if lease.ephemeral else lease.notice
        return render_run(result, limit=ctx.output_limit, notice=notice, ephemeral=lease.ephemeral)


def _artifacts_and_state(ts: Toolset) -> None:
    @ts.tool(
        description="List saved artifacts (name, type, size, created, description) "
        "without loading their data.",
        read_only=True,
    )
    async def list_artifacts(call: Call) -> Reply:
        rows = await _memory(call).artifacts.list()
        if not rows:
            return Reply("No artifacts saved yet.", {"artifacts": []})
        return Reply("\n".join(_artifact_line(r) for r in rows), {"artifacts": rows})

    @ts.tool(
        description="Load an artifact: JSON and text come back as they were saved; bytes "
        "as base64 (large binary artifacts: use artifacts.load in run_code).",
        read_only=True,
    )
    async def load_artifact(call: Call, name: ArtifactName) -> Reply:
        memory = _memory(call)
        info = await memory.artifacts.info(name)
        if info["type"] == "bytes":
            if info["size"] > INLINE_BYTES:
                return Reply(
                    f"{name} holds {info['size']} bytes: too big to return here; "
                    f"use artifacts.load({name!r}) in run_code.",
                    {"info": info},
                )
            raw = await memory.artifacts.load(name)
            b64 = base64.b64encode(raw).decode("ascii")
            return Reply(
                f"{name}: {info['size']} bytes, base64:\n{b64}", {"info": info, "base64": b64}
            )
        value = await memory.artifacts.load(name)
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
        return Reply(text, {"info": info, "value": value})

    @ts.tool(
        description="Save data as a named artifact that survives sessions (JSON value or "
        "text; set is_base64=true to store bytes given as base64)."
    )
    async def save_artifact(
        call: Call,
        name: ArtifactName,
        data: Annotated[Any, Field(description="A JSON value, a string, or base64 bytes.")],
        description: Annotated[str, Field(description="What the data is.")] = "",
        is_base64: Annotated[bool, Field(description="data is base64-encoded bytes.")] = False,
    ) -> Reply:
        value = data
        if is_base64:
            if not isinstance(data, str):
                raise ValidationError("with is_base64=true, data must be a base64 string")
            try:
                value = base64.b64decode(data, validate=True)
            except ValueError as exc:
                raise ValidationError(f"data is not valid base64: {exc}") from None
        info = await _memory(call).artifacts.save(name, value, description=description)
        return Reply(f"Saved artifact {_artifact_line(info)}", info)

    @ts.tool(description="Delete a saved artifact.")
    async def delete_artifact(call: Call, name: ArtifactName) -> Reply:
        deleted = await _memory(call).artifacts.delete(name)
        text = f"Deleted artifact {name}." if deleted else f"No artifact named {name!r}."
        return Reply(text, {"deleted": deleted})

    @ts.tool(
        description="Read the workspace state (a small JSON object shared with run_code's "
        "state), or one key of it; state_file names another state document.",
        read_only=True,
    )
    async def get_state(
        call: Call,
        key: Annotated[str | None, Field(description="One key; omit for the whole state.")] = None,
        state_file: StateFile = None,
    ) -> Reply:
        state, _ = _state(call, state_file)
        exists = await state.exists()
        value = await state.get(key)
        data = {"key": key, "value": value, "exists": exists, "data": await state.get()}
        return Reply(json.dumps(value, ensure_ascii=False), data)

    @ts.tool(
        description="Save the workspace state (a JSON object): replaces it, or merges the "
        "given keys with merge=true; state_file names another state document."
    )
    async def save_state(
        call: Call,
        state_data: Annotated[dict[str, Any], Field(description="The state (a JSON object).")],
        merge: Annotated[bool, Field(description="Merge keys instead of replacing.")] = False,
        state_file: StateFile = None,
    ) -> Reply:
        state, name = _state(call, state_file)
        if merge:
            doc = await state.update(state_data)
        else:
            await state.replace(state_data)
            doc = state_data
        data = {"state": doc, "success": True, "file": name}
        return Reply(f"State saved ({len(doc)} keys) in {name}.", data)


def _state(call: Call, state_file: str | None) -> tuple[Any, str]:
    """The state document ``state_file`` names (``x.json`` and ``x`` are the same one;
    ``state.json``, the seeds' default, is the workspace's own state)."""
    from .state import NAME, State

    memory = _memory(call)
    if state_file is None:
        return memory.state, f"{NAME}.json"
    name = state_file.removesuffix(".json")
    if name == NAME:
        return memory.state, state_file
    return State(memory.storage, name), state_file


def _deps(ts: Toolset, ctx: ServerContext) -> None:
    memory = ctx.memory
    if getattr(memory, "deps", None) is None:
        return

    @ts.tool(description="List the Python packages installed for run_code.", read_only=True)
    async def list_deps(call: Call) -> Reply:
        rows = await _memory(call).deps.list()
        if not rows:
            return Reply("No extra packages installed.", {"deps": []})
        lines = [f"{r['spec']} ({r['version'] or 'not installed'})" for r in rows]
        return Reply("\n".join(lines), {"deps": rows})

    if not getattr(memory, "allow_runtime_deps", False):
        return

    @ts.tool(
        description="Install a Python package for run_code (a requirement such as "
        "'requests>=2'; no pip options or URLs)."
    )
    async def add_dep(
        call: Call, spec: Annotated[str, Field(description="A requirement, e.g. 'six==1.17.0'.")]
    ) -> Reply:
        info = await _memory(call).deps.add(spec)
        return Reply(f"Installed {info['name']} {info['version']}; import it in run_code.", info)

    @ts.tool(description="Uninstall a Python package installed with add_dep.")
    async def remove_dep(
        call: Call, name: Annotated[str, Field(description="The package name.")]
    ) -> Reply:
        removed = await _memory(call).deps.remove(name)
        return Reply(
            f"Removed {name}." if removed else f"{name} was not installed.", {"removed": removed}
        )
