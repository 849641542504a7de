"""The memory tools of ``codemode serve``: skills, artifacts, state and deps.

Each tool is declared against a row of the worker -> host table (``memory.rpc``): its
arguments are the row's params fields (``TOOLS`` says which, and any the tool adds), and it
calls the row's handler through ``Method.call`` (the same validation the worker's calls
get); only the text for the model is written here. ``invoke_skill`` runs the skill in the
caller's own session worker, never in the server process. ``add_dep``/``remove_dep``
exist only when runtime deps are allowed. ``tests/test_rpc.py`` checks every tool against
the table.
"""

from __future__ import annotations

import base64
import inspect
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from pydantic import Field
from typing_extensions import TypeAliasType

from ..errors import ValidationError
from ..result import ExecutionResult
from ..server.toolset import Call, Reply, ServerContext, Toolset, model_parameters, with_parameters
from .core import Memory
from .rpc import MEMORY_METHODS
from .state import NAME, State

INLINE_BYTES = 256 * 1024

JSONData = TypeAliasType(
    "JSONData", "dict[str, JSONData] | list[JSONData] | str | int | float | bool | None"
)
"""Any JSON value, spelled out so the input schema says so (clients check for a type)."""

Render = Callable[[Any, Mapping[str, Any]], Reply]


@dataclass(frozen=True)
class MemoryTool:
    """One MCP tool over one table row: which fields it takes, and how it answers."""

    name: str
    method: str
    description: str
    render: Render | None = None
    """Text for the model from (value, arguments); None: a hand-written handler below."""
    fields: tuple[str, ...] | None = None
    rename: Mapping[str, str] = field(default_factory=dict)
    extra: tuple[str, ...] = ()
    """Arguments the tool adds to the row's fields (hand-written handlers only)."""
    read_only: bool = False
    types: Mapping[str, Any] = field(default_factory=dict)
    """Argument -> the type its input schema shows, where the row's type says too little."""


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


def _rows(key: str, line: Callable[[dict[str, Any]], str], empty: str, hint: str = "") -> Render:
    def render(rows: Any, args: Mapping[str, Any]) -> Reply:
        if not rows:
            return Reply(empty.format(**args), {key: []})
        return Reply("\n".join(line(r) for r in rows), {key: rows}, hint=hint)

    return render


def _deleted(what: str) -> Render:
    def render(deleted: Any, args: Mapping[str, Any]) -> Reply:
        name = args["name"]
        text = f"Deleted {what} {name}." if deleted else f"No {what} named {name!r}."
        return Reply(text, {"deleted": deleted})

    return render


def _skill_shown(row: Any, args: Mapping[str, Any]) -> Reply:
    hint = f"read it in parts in run_code: skills.get({args['name']!r})['code']"
    return Reply(f"{row['skill_md']}\n```python\n{row['code'].rstrip()}\n```", row, hint=hint)


def _skill_saved(row: Any, args: Mapping[str, Any]) -> Reply:
    sig = str(row["signature"])[3:]
    return Reply(f"Saved skill {row['name']} v{row['version']}: skills.{row['name']}{sig}", row)


def _dep_line(row: dict[str, Any]) -> str:
    return f"{row['spec']} ({row['version'] or 'not installed'})"


def _dep_added(info: Any, args: Mapping[str, Any]) -> Reply:
    return Reply(f"Installed {info['name']} {info['version']}; import it in run_code.", info)


def _dep_removed(removed: Any, args: Mapping[str, Any]) -> Reply:
    name = args["name"]
    return Reply(
        f"Removed {name}." if removed else f"{name} was not installed.", {"removed": removed}
    )


T = MemoryTool
SKILL_TOOLS = (
    T("list_skills", "skills.list", "List saved skills (reusable code): name, signature, "
      "version, description.", _rows("skills", _skill_line, "No skills saved yet. Save one "
      "with create_skill.", "narrow it down with search_skills"), read_only=True),
    T("search_skills", "skills.search", "Find saved skills relevant to a task (ranked by "
      "name, description, parameters and code). Invoke one in run_code with "
      "skills.<name>(...).", _rows("skills", _skill_line, "No skills match {query!r}."),
      read_only=True),
    T("get_skill", "skills.get", "Show a skill: its SKILL.md (description, parameters) and "
      "code.", _skill_shown),
    T("create_skill", "skills.create", "Save Python code as a reusable skill. The code must "
      "define run(...) (plain or async); it is checked but not run. Skills can call tools.* "
      "and other skills.*. Later, in run_code: skills.<name>(arg=...).", _skill_saved),
    T("delete_skill", "skills.delete", "Delete a saved skill and its earlier versions.",
      _deleted("skill")),
    T("invoke_skill", "skills.source", "Run a saved skill in your session with keyword "
      "arguments and return its result (the same as run_code with "
      "skills.<name>(**arguments)).", fields=("name",), extra=("arguments", "timeout")),
)  # fmt: skip
ARTIFACT_AND_STATE_TOOLS = (
    T("list_artifacts", "artifacts.list", "List saved artifacts (name, type, size, created, "
      "description) without loading their data.", _rows("artifacts", _artifact_line,
      "No artifacts saved yet.", "list them in run_code: artifacts.list()"), read_only=True),
    T("load_artifact", "artifacts.load", "Load an artifact: JSON and text come back as they "
      "were saved; bytes as base64 (large binary artifacts: use artifacts.load in "
      "run_code).", read_only=True),
    T("save_artifact", "artifacts.save", "Save data as a named artifact that survives "
      "sessions (JSON value or text; set is_base64=true to store bytes given as base64).",
      extra=("is_base64",), types={"data": JSONData}),
    T("delete_artifact", "artifacts.delete", "Delete a saved artifact.", _deleted("artifact")),
    T("get_state", "state.get", "Read the workspace state (a small JSON object shared with "
      "run_code's state), or one key of it; state_file names another state document.",
      fields=("key",), extra=("state_file",), read_only=True),
    T("save_state", "state.replace", "Save the workspace state (a JSON object): replaces it, "
      "or merges the given keys with merge=true; state_file names another state document.",
      rename={"data": "state_data"}, extra=("merge", "state_file")),
)  # fmt: skip
DEPS_TOOLS = (
    T("list_deps", "deps.list", "List the Python packages installed for run_code.",
      _rows("deps", _dep_line, "No extra packages installed."), read_only=True),
)  # fmt: skip
RUNTIME_DEPS_TOOLS = (
    T("add_dep", "deps.add", "Install a Python package for run_code (a requirement such as "
      "'requests>=2'; no pip options or URLs).", _dep_added),
    T("remove_dep", "deps.remove", "Uninstall a Python package installed with add_dep.",
      _dep_removed),
)  # fmt: skip
TOOLS = (*SKILL_TOOLS, *ARTIFACT_AND_STATE_TOOLS, *DEPS_TOOLS, *RUNTIME_DEPS_TOOLS)


def _memory(call: Call) -> Memory:
    memory = call.server.memory
    if memory is None:
        raise ValidationError("this server has no storage for skills, artifacts and state")
    return memory


def register(toolset: Toolset, ctx: ServerContext) -> None:
    """Add the memory tools (``memory.capability`` calls this for ``build_server``)."""
    memory = ctx.memory
    if memory is None:
        return
    tools = [*SKILL_TOOLS, *ARTIFACT_AND_STATE_TOOLS]
    if memory.deps is not None:
        tools += DEPS_TOOLS
        if memory.allow_runtime_deps:
            tools += RUNTIME_DEPS_TOOLS
    for tool in tools:
        _add(toolset, tool)


def _add(toolset: Toolset, tool: MemoryTool) -> None:
    method = MEMORY_METHODS[tool.method]
    params = [
        p.replace(annotation=Annotated[(tool.types[p.name], *p.annotation.__metadata__)])
        if p.name in tool.types
        else p
        for p in model_parameters(method.params, tool.fields, tool.rename)
    ]
    if tool.render is None:
        custom = HANDWRITTEN[tool.name]
        own = list(inspect.signature(custom).parameters.values())[1 + len(params) :]
        params += [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

        async def handler(call: Call, **arguments: Any) -> Reply:
            reply: Reply = await custom(call, **arguments)
            return reply

    else:
        render, back = tool.render, {v: k for k, v in tool.rename.items()}

        async def handler(call: Call, **arguments: Any) -> Reply:
            args = {back.get(k, k): v for k, v in arguments.items()}
            return render(await method.call(_memory(call), args), args)

    fn = with_parameters(handler, params, tool.name)
    toolset.add(fn, description=tool.description, read_only=tool.read_only)


# -- the tools that do more than one call ----------------------------------------------
async def invoke_skill(
    call: Call,
    name: str,
    arguments: Annotated[
        dict[str, Any] | None, Field(description="Keyword arguments for the skill's run().")
    ] = None,
    timeout: Annotated[
        float | None, Field(description="Seconds before the run is interrupted.", gt=0)
    ] = None,
) -> Reply:
    from ..server.app import EPHEMERAL_NOTICE, output_artifacts, render_run
    from .skills.model import check_skill_name, invoke_code

    check_skill_name(name)
    code = invoke_code(name, arguments or {})
    ctx = call.server
    async with ctx.sessions.lease(call.session_key) as lease:
        result = await lease.session.run(code, timeout=timeout)
    notice = EPHEMERAL_NOTICE if lease.ephemeral else lease.notice
    return await render_run(
        _without_generated_frame(result),
        limit=ctx.output_limit,
        notice=notice,
        ephemeral=lease.ephemeral,
        artifacts=output_artifacts(call),
    )


_CELL_FRAME = re.compile(r'  File "<cell \d+>", line \d+, in <module>\n(?:    .*\n)*')


def _without_generated_frame(result: ExecutionResult) -> ExecutionResult:
    """The traceback of a failed skill starts at the skill's own code: the one-line cell
    invoke_skill generated to call it is not the model's code and is left out."""
    err = result.error
    if err is None or not err.traceback:
        return result
    tb = _CELL_FRAME.sub("", err.traceback, count=1)
    if '  File "' not in tb:
        tb = tb.replace("Traceback (most recent call last):\n", "", 1)
    return replace(result, error=replace(err, traceback=tb, lineno=None, offset=None))


async def load_artifact(call: Call, name: str) -> Reply:
    memory = _memory(call)
    info = await MEMORY_METHODS["artifacts.info"].call(memory, {"name": name})
    if info["type"] == "bytes" and info["size"] > INLINE_BYTES:
        return Reply(
            f"{name} holds {info['size']} bytes: too big to return here; "
            f"use artifacts.load({name!r}) in run_code.",
            {"info": info},
        )
    value = await MEMORY_METHODS["artifacts.load"].call(memory, {"name": name})
    if info["type"] == "bytes":
        b64 = base64.b64encode(value).decode("ascii")
        return Reply(f"{name}: {info['size']} bytes, base64:\n{b64}", {"info": info, "base64": b64})
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)
    hint = f"read it in parts in run_code: artifacts.load({name!r})"
    return Reply(text, {"info": info, "value": value}, hint=hint)


async def save_artifact(
    call: Call,
    name: str,
    data: Any,
    description: str = "",
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
    args = {"name": name, "data": value, "description": description}
    info = await MEMORY_METHODS["artifacts.save"].call(_memory(call), args)
    return Reply(f"Saved artifact {_artifact_line(info)}", info)


StateFile = Annotated[
    str | None,
    Field(description='A named state document, e.g. "progress.json" (default: the workspace\'s).'),
]


async def get_state(call: Call, key: str | None = None, state_file: StateFile = None) -> Reply:
    state, _ = _state(call, state_file)
    exists = await state.exists()
    doc = await state.get()
    value = doc if key is None else doc.get(key)
    data = {"key": key, "value": value, "exists": exists, "data": doc}
    hint = "read one key with get_state(key=...), or state.get(key) in run_code"
    return Reply(json.dumps(value, ensure_ascii=False), data, hint=hint)


async def save_state(
    call: Call,
    state_data: dict[str, Any],
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


def _state(call: Call, state_file: str | None) -> tuple[State, str]:
    """The state document ``state_file`` names (``x.json`` and ``x`` are the same one;
    ``state.json``, the seeds' default, is the workspace's own state)."""
    memory = _memory(call)
    if state_file is None:
        return memory.state, f"{NAME}.json"
    name = state_file.removesuffix(".json")
    if name == NAME:
        return memory.state, state_file
    return State(memory.storage, name), state_file


HANDWRITTEN: dict[str, Callable[..., Any]] = {
    "invoke_skill": invoke_skill,
    "load_artifact": load_artifact,
    "save_artifact": save_artifact,
    "get_state": get_state,
    "save_state": save_state,
}
