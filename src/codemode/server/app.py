"""The MCP server: codemode's tools as thin handlers over sessions and the tool registry.

``build_server`` returns an ``MCPServer`` (official SDK 2.x) exposing ``run_code``,
``search_tools``, ``list_servers``, ``list_tools``, ``get_tool`` and ``reset_session``,
plus the tools of capabilities (``codemode.assembly``): the memory's, for one.
Transports (stdio, HTTP) are started by ``cli.py`` / ``http.py``.

How a call finds its session (see docs/server.md, "Sessions"):

- no HTTP request behind the call (stdio, in-process): the process serves one client,
  so every call shares the ``local`` session;
- HTTP with an ``Mcp-Session-Id`` header (the 2025 handshake protocol): one session per
  MCP session id;
- HTTP without one (the stateless 2026-07-28 protocol): the ``Codemode-Session`` header,
  when the client sends one, names the session; otherwise the call gets a fresh
  session that is closed when the call ends (nothing persists), and the result says so.

Over HTTP the server answers ``server/discover`` with the handshake-era protocol
versions only, so ``mode="auto"`` clients fall back to the handshake and get a session
id: code mode is stateful by nature. A client that sends ``Codemode-Session`` keeps its
state that way, so it is offered the stateless protocol too.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp_types import DiscoverResult, InputRequiredResult, RequestParams
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import Field
from typing_extensions import TypedDict

from codemode import assembly
from codemode.capability import Capability
from codemode.errors import CodemodeError, ToolArgumentError, ToolNotFound
from codemode.output import full_text, run_fields, save_full_output, view_run
from codemode.result import ExecutionResult
from codemode.tools.registry import ToolRegistry

from ..observability.providers import remote_parent
from .approve import PausedRuns, no_elicitation
from .live import mcp_listener, request_meta
from .toolset import Call, Reply, ServerContext, Toolset, is_modern, load_text

SERVER_NAME = "codemode"
LOCAL_KEY = "local"
SESSION_HEADER = "codemode-session"
MAX_SESSION_NAME = 200
"""Longer ``Codemode-Session`` values are kept as their SHA-256 (the key stays small)."""
MCP_SESSION_HEADER = "mcp-session-id"

EPHEMERAL_NOTICE = (
    "This call could not be tied to a client session (no Mcp-Session-Id or Codemode-Session "
    "header), so it ran in a fresh session that is now closed: nothing persists."
)

logger = logging.getLogger(__name__)

MINIMAL_TOOLS = ("run_code", "search_tools")
"""What ``serve --tools minimal`` lists: discovery beyond search happens inside the code."""

__all__ = [
    "LOCAL_KEY",
    "MINIMAL_TOOLS",
    "SERVER_NAME",
    "build_server",
    "core_toolset",
    "session_key",
]


def session_key(ctx: Context) -> str | None:
    """Name the caller's session (``None``: the caller cannot be recognised again)."""
    headers: Mapping[str, str] | None = ctx.headers
    if ctx.request_context.request is None or headers is None:
        return LOCAL_KEY
    sid = headers.get(MCP_SESSION_HEADER)
    if sid:
        return f"mcp:{sid}"
    own = headers.get(SESSION_HEADER)
    if own:
        if len(own) <= MAX_SESSION_NAME:
            return f"client:{own}"
        # The whole value names the session: cut to its head, two long ids that share a
        # known prefix (a project's name, then a random part) named one session.
        return f"client-sha256:{hashlib.sha256(own.encode()).hexdigest()}"
    return None


# --------------------------------------------------------------------------- run_code


class ErrorOut(TypedDict):
    type: str
    message: str
    traceback: str
    lineno: int | None
    offset: int | None


class RunCodeOutput(TypedDict):
    """Structured content of ``run_code``: the fields of the compact text, separately,
    cut to the same limit as the text."""

    ok: bool
    stdout: str
    stderr: str
    value: Any
    has_value: bool
    value_is_repr: bool
    error: ErrorOut | None
    duration_ms: float
    timed_out: bool
    state_lost: bool
    truncated: list[str]
    sizes: dict[str, int]
    full_output: str | None
    warnings: list[str]
    session: Literal["persistent", "ephemeral"]
    notice: str | None


async def render_run(
    result: ExecutionResult,
    *,
    limit: int,
    notice: str | None,
    ephemeral: bool,
    artifacts: Any = None,
) -> Reply:
    """Compact text (notice, stdout, stderr, then the value or the error) plus the fields,
    both within ``limit``; when something was cut, the full output is saved in
    ``artifacts`` (when given) and the markers name it."""
    room = limit - (len(notice) + 3 if notice else 0)
    view = view_run(result, room)
    saved: str | None = None
    if view.truncated and artifacts is not None:
        try:
            saved = await save_full_output(artifacts, full_text(result))
        except CodemodeError as exc:
            logger.warning("could not save a run's full output: %s", exc)
        else:
            hint = f"full output: artifacts.load({saved!r}) in run_code"
            view = view_run(result, room, hint=hint)
    text = f"[{notice}]\n{view.text}" if notice else view.text
    data = {
        **run_fields(result, view),
        "full_output": saved,
        "session": "ephemeral" if ephemeral else "persistent",
        "notice": notice,
    }
    return Reply(text, dict(data), is_error=not result.is_ok)


def output_artifacts(call: Call) -> Any:
    memory = call.server.memory
    return getattr(memory, "artifacts", None)


# --------------------------------------------------------------------------- tools

Detail = Literal["name", "description", "full"]


def core_toolset() -> Toolset:
    """The tools every codemode server has (the memory tools are added separately)."""
    ts = Toolset()

    # No outputSchema on purpose: clients validate structured content against it with
    # jsonschema on every call (~0.2 ms, more than the rest of codemode's overhead). The
    # fields are RunCodeOutput, documented in docs/server.md.
    @ts.tool(description_file="run_code.md")
    async def run_code(
        call: Call,
        code: Annotated[str, Field(description="Python source to run in your session.")],
        timeout: Annotated[
            float | None,
            Field(
                # Capped by the server (``capped_timeout``, which says so in the result's
                # warnings): not repeated here, where every word is in the model's context.
                description="Seconds before the run is interrupted (default: server's).",
                gt=0,
                allow_inf_nan=False,
            ),
        ] = None,
    ) -> Reply | InputRequiredResult:
        mcp = call.mcp
        if mcp is not None and is_modern(mcp) and no_elicitation(mcp) is None:
            # No back-channel on 2026-07-28: a question pauses the run (see approve.py).
            paused: PausedRuns = call.server.extras.setdefault("paused_runs", PausedRuns())
            if mcp.request_state is not None:
                return await paused.resume(call, mcp.request_state, dict(mcp.input_responses or {}))
            return await paused.start(call, lambda _: _run_code(call, code, timeout))
        return await _run_code(call, code, timeout)

    @ts.tool(description_file="reset_session.md")
    async def reset_session(call: Call) -> Reply:
        sessions = call.server.sessions
        key = call.session_key
        if key is None or key not in sessions:
            return Reply("Session is empty: nothing to reset.", {"reset": False})
        async with call.lease() as lease:
            await lease.session.reset()
        return Reply(
            "Session reset: variables, imports and functions are cleared.", {"reset": True}
        )

    @ts.tool(description_file="search_tools.md", read_only=True)
    async def search_tools(
        call: Call,
        query: Annotated[str, Field(description="Keywords describing what you want to do.")],
        detail_level: Annotated[
            Detail, Field(description='"name", "description" or "full".')
        ] = "name",
        limit: Annotated[int, Field(description="Maximum number of results.", ge=1, le=100)] = 10,
        max_results: Annotated[int, Field(description="Alias of limit.", ge=0, le=100)] = 0,
    ) -> Reply:
        return await _d_search(call.server.tools, query, detail_level, max_results or limit)

    @ts.tool(description_file="list_servers.md", read_only=True)
    async def list_servers(call: Call) -> Reply:
        workspace = call.server.workspace
        return await _d_servers(call.server.tools, workspace.warnings if workspace else [])

    @ts.tool(description_file="list_tools.md", read_only=True)
    async def list_tools(
        call: Call,
        server: Annotated[
            str | None, Field(description="Server name; omit for all servers.")
        ] = None,
    ) -> Reply:
        return await _d_list_tools(call.server.tools, server)

    @ts.tool(description_file="get_tool.md", read_only=True)
    async def get_tool(
        call: Call,
        name: Annotated[str, Field(description='Qualified tool name, "server.tool".')],
    ) -> Reply:
        return await _d_describe(call.server.tools, name)

    return ts


def capped_timeout(asked: float | None, most: float) -> tuple[float | None, str | None]:
    """A client's ``timeout`` within the server's maximum ``most``, and the warning that
    says it was lowered: a client must not hold a worker for ever (``1e308``).

    Raises ``ToolArgumentError`` for a timeout that is not a positive finite number (the
    input schema refuses those too; this guards callers that skip it).
    """
    if asked is None:
        return None, None
    if not (isinstance(asked, int | float) and math.isfinite(asked) and asked > 0):
        raise ToolArgumentError(
            f"timeout must be a positive finite number of seconds, not {asked!r}",
            server=SERVER_NAME,
            tool="run_code",
        )
    if asked <= most:
        return float(asked), None
    return most, (
        f"timeout lowered from {asked:g} s to the server's maximum of {most:g} s "
        "(budget.run.wall_time, else 3600 s or the server's default timeout)"
    )


async def _run_code(call: Call, code: str, timeout: float | None) -> Reply:
    timeout, lowered = capped_timeout(timeout, call.server.max_run_timeout)
    async with call.lease() as lease:
        with remote_parent(request_meta(call.mcp)):
            result = await lease.session.run(
                code,
                timeout=timeout,
                on_output=mcp_listener(call, call.server.output_limit),
            )
    if lowered is not None:
        result = replace(result, warnings=(lowered, *result.warnings))
    notice = EPHEMERAL_NOTICE if lease.ephemeral else lease.notice
    return await render_run(
        result,
        limit=call.server.output_limit,
        notice=notice,
        ephemeral=lease.ephemeral,
        artifacts=output_artifacts(call),
    )


# --------------------------------------------------------------------------- discovery


def _problems(registry: ToolRegistry | None) -> list[str]:
    problems = getattr(registry, "problems", None)
    return list(problems()) if problems is not None else []


def _with_problems(reply: Reply, registry: ToolRegistry | None) -> Reply:
    """Say which servers are missing from a result, first (a cut keeps the head)."""
    problems = _problems(registry)
    if not problems:
        return reply
    head = "\n".join(f"[warning] {p}" for p in problems)
    data = {**(reply.data or {}), "warnings": problems}
    return Reply(f"{head}\n{reply.text}", data, reply.is_error, reply.hint)


async def _d_search(registry: ToolRegistry | None, query: str, detail: str, limit: int) -> Reply:
    rows = await registry.search(query, detail, limit) if registry is not None else []
    if not rows:
        reply = Reply(
            f"No tools match {query!r}. Try other words, or list_servers() and list_tools().",
            {"tools": []},
        )
    else:
        grouped: dict[str, Any] = {}  # the seeds' shape: {server: [names] | {name: {...}}}
        for r in rows:
            server, _, tool = str(r["name"]).partition(".")
            if detail == "name":
                grouped.setdefault(server, []).append(tool)
            else:
                grouped.setdefault(server, {})[tool] = {k: v for k, v in r.items() if k != "name"}
        hint = "ask for fewer (limit) or less (detail_level), or use tools.search() in run_code"
        data = {"tools": rows, "by_server": grouped}
        reply = Reply("\n".join(_tool_line(r) for r in rows), data, hint=hint)
    return _with_problems(reply, registry)


async def _d_servers(registry: ToolRegistry | None, config_warnings: Sequence[str] = ()) -> Reply:
    """Each server and its state, then what the configuration had that was ignored (a
    misspelt key may be why a server is missing or still enabled)."""
    rows = await registry.servers() if registry is not None else []
    lines = []
    for r in rows:
        original = f" (original name: {r['original']})" if r.get("original") else ""
        count = "?" if r.get("tools") is None else r["tools"]
        about = f" - {r['description']}" if r.get("description") else ""
        status = r.get("problem") or r.get("status", "ok")
        lines.append(f"{r['name']}{original}: {count} tools, {status}{about}")
    if not rows:
        lines.append("No MCP servers are configured: add them to mcp.json in the workspace.")
    if config_warnings:
        lines.append("Configuration warnings (the user can fix these in the workspace files):")
        lines += [f"- {w}" for w in config_warnings]
    data: dict[str, Any] = {"servers": rows}
    if config_warnings:
        data["config_warnings"] = list(config_warnings)
    return Reply("\n".join(lines), data)


async def _d_list_tools(registry: ToolRegistry | None, server: str | None) -> Reply:
    if registry is None:
        return Reply("No MCP servers are configured.", {"tools": []})
    rows = await registry.list(server, "description")
    if not rows:
        reply = Reply("No tools.", {"tools": []})
    else:
        hint = "list one server at a time (server=...), or use tools.list() in run_code"
        reply = Reply("\n".join(_tool_line(r) for r in rows), {"tools": rows}, hint=hint)
    return _with_problems(reply, registry) if server is None else reply


async def _d_describe(registry: ToolRegistry | None, name: str) -> Reply:
    if registry is None:
        raise ToolNotFound(f"no tool named {name!r}: no MCP servers are configured", tool=name)
    try:
        info = await registry.describe(name)
    except ToolNotFound as exc:
        hint = f" Did you mean: {', '.join(exc.suggestions)}?" if exc.suggestions else ""
        return Reply(f"ToolNotFound: {exc}.{hint}", None, is_error=True)
    parts = [f"tools.{info['name']}{_sig_tail(info)}"]
    if info.get("description"):
        parts.append(str(info["description"]).strip())
    original = info.get("original")
    if isinstance(original, dict):
        parts.append(
            f"Original names: server {original.get('server')!r}, tool {original.get('tool')!r}"
        )
    parts.append("Input schema: " + json.dumps(info.get("input_schema"), ensure_ascii=False))
    if info.get("output_schema") is not None:
        parts.append("Output schema: " + json.dumps(info["output_schema"], ensure_ascii=False))
    hint = f"read it in parts in run_code: tools.describe({name!r})"
    return Reply("\n\n".join(parts), info, hint=hint)


def _sig_tail(row: dict[str, Any]) -> str:
    """``(a: int) -> dict`` from a signature that may or may not repeat the name."""
    sig = str(row.get("signature") or "(...)")
    i = sig.find("(")
    return sig[i:] if i >= 0 else sig


def _tool_line(row: dict[str, Any]) -> str:
    line = str(row["name"])
    if "signature" in row:
        line += _sig_tail(row)
    if row.get("original"):
        line += f"  [original: {row['original']}]"
    if row.get("description"):
        line += f"\n    {row['description']}"
    if "input_schema" in row:
        line += "\n    input schema: " + json.dumps(row["input_schema"], ensure_ascii=False)
    return line


def build_server(
    context: ServerContext,
    *,
    transport: Literal["stdio", "http"] = "stdio",
    toolset: Toolset | None = None,
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING",
    capability_tools: bool = True,
    capabilities: Sequence[Capability[Any]] | None = None,
    minimal: bool = False,
) -> MCPServer[Any]:
    """The MCP server for one ``codemode serve``; ``context`` is shared by every call.

    Capabilities (``codemode.assembly``; by default the workspace's) add their tools after
    the core ones. ``capability_tools=False`` (``serve --tools core``) lists only the six
    core tools: skills, artifacts, state and deps stay reachable from the code, and every
    client's context carries ~1,700 fewer tokens of tool definitions. ``minimal=True``
    (``serve --tools minimal``) lists only ``run_code`` and ``search_tools``, with shorter
    instructions: the smallest fixed cost (< 1,000 tokens), everything else is reached from
    the code.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        server_version = version("codemode")
    except PackageNotFoundError:
        server_version = "0"
    server: MCPServer[Any] = MCPServer(
        SERVER_NAME,
        title="codemode",
        instructions=load_text(
            "server_instructions_minimal.md" if minimal else "server_instructions.md"
        ),
        version=server_version,
        log_level=log_level,
    )
    ws = context.workspace
    if capabilities is None:
        capabilities = ws.capabilities if ws is not None else assembly.installed()
    if toolset is None:
        toolset = core_toolset()
        if minimal:
            toolset = toolset.only(MINIMAL_TOOLS)
        elif capability_tools:
            assembly.add_server_tools(toolset, context, capabilities)
    assembly.configure_toolset(toolset, capabilities, ws.sections if ws is not None else {})
    context.extras["reply_layers"] = toolset.layers  # custom tools' replies pass them too
    toolset.apply(server, context, session_key)
    if transport == "http":
        _advertise_handshake_only(server)
    return server


def _advertise_handshake_only(server: MCPServer[Any]) -> None:
    """Answer ``server/discover`` with the eras a client can keep a session in.

    Without a ``Codemode-Session`` header only handshake-era versions are offered:
    ``mode="auto"`` clients then use the initialize handshake, which gives each client
    an ``Mcp-Session-Id`` and so a persistent session. A client that sends the header
    has said how it keeps state, so the stateless 2026-07-28 protocol is offered too
    (and preferred by negotiating clients). Clients pinned to the stateless protocol are
    served either way (see ``session_key``).
    """
    low = server._lowlevel_server  # the SDK documents replacing this handler here

    async def discover(ctx: Any, params: RequestParams | None) -> DiscoverResult:
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        stateful = headers is not None and bool(headers.get(SESSION_HEADER))
        versions = [*HANDSHAKE_PROTOCOL_VERSIONS, *(MODERN_PROTOCOL_VERSIONS if stateful else ())]
        return DiscoverResult(
            supported_versions=versions,
            capabilities=low.get_capabilities(protocol_version=ctx.protocol_version),
            instructions=low.instructions,
        )

    low.add_request_handler("server/discover", RequestParams, discover)
