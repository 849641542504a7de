"""A file of declared tools as a ``ToolSource``: into the same registry as MCP servers."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...config.files import load_document, validate_document
from ...errors import ConfigError, ToolArgumentError, ToolError, ToolNotFound
from ..spec import ToolCallResult, ToolSpec
from .command import CommandRunner
from .http import HttpRunner
from .model import ToolDef, ToolFile, input_schema, remember_secrets

log = logging.getLogger("codemode.tools.declared")

HOST_MARK = "[runs on the host] "
_OUTPUT: dict[str, Any] = {
    "text": {"type": "string"},
    "lines": {"type": "array", "items": {"type": "string"}},
}
SUFFIXES = (".yaml", ".yml", ".json")


class DeclaredSource:
    """The tools of one definition file (``tools.<name>.<tool>``)."""

    trusted_annotations = True
    """Its annotations are the workspace owner's word (workflows may rely on them)."""

    def __init__(
        self,
        definition: ToolFile,
        *,
        name: str,
        files_dir: Path,
        sandbox: Callable[[], Any],
        env: Mapping[str, str] | None = None,
        origin: str = "",
        host_refused: str | None = None,
    ) -> None:
        self._name = name
        self.definition = definition
        self.origin = origin
        self.description = definition.description or f"tools defined in {origin or name}"
        env = os.environ if env is None else env
        remember_secrets(definition, env)
        self._tools = {t.name: t for t in definition.tools}
        self._commands = CommandRunner(files_dir, sandbox, env)
        self._http = HttpRunner(definition.http, env) if definition.http is not None else None
        self._host_refused = host_refused
        """Why its ``host: true`` tools may not run (``Workspace.unjailed_refused``)."""
        for tool in definition.tools:
            if tool.kind == "command" and tool.host and host_refused is not None:
                log.warning("tool %s.%s (%s) is refused: host: true, and %s",
                            name, tool.name, origin, host_refused)  # fmt: skip
            elif tool.kind == "command" and tool.host:
                log.warning(
                    "tool %s.%s (%s) runs on the HOST, outside the sandbox (host: true)",
                    name,
                    tool.name,
                    origin,
                )

    @property
    def name(self) -> str:
        return self._name

    async def list_tools(self) -> list[ToolSpec]:
        return [self._spec(t) for t in self._tools.values()]

    def _spec(self, tool: ToolDef) -> ToolSpec:
        description = tool.description
        if tool.kind == "command" and tool.host:
            description = HOST_MARK + description
        return ToolSpec(
            server=self._name,
            name=tool.name,
            description=description,
            input_schema=input_schema(tool),
            annotations=tool.annotations.hints(),
            output_schema=_OUTPUT.get(tool.output) if tool.kind == "command" else None,
            in_workspace=tool.kind == "command",  # its working directory is files/
        )

    async def call_tool(
        self, tool: str, arguments: dict[str, Any], *, timeout: float | None = None
    ) -> ToolCallResult:
        found = self._tools.get(tool)
        if found is None:
            raise ToolNotFound(f"no tool {tool!r}", server=self._name, tool=tool)
        if found.kind == "command" and found.host and self._host_refused is not None:
            raise ToolError(
                f"it runs on the host (host: true), which is refused: {self._host_refused}",
                server=self._name,
                tool=tool,
            )
        args = _arguments(found, arguments)
        if found.kind == "command":
            return await self._commands.run(found, args, timeout)
        assert self._http is not None
        return await self._http.run(found, args, timeout)

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()


def _arguments(tool: ToolDef, given: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults applied; unknown names and missing required ones refused (the registry's
    schema check runs first; this keeps a direct ``call_tool`` just as strict)."""
    unknown = sorted(set(given) - set(tool.parameters))
    if unknown:
        raise ToolArgumentError(f"unknown arguments: {', '.join(unknown)}", tool=tool.name)
    args: dict[str, Any] = {}
    for name, param in tool.parameters.items():
        value = given.get(name, param.default)
        if value is None and param.is_required:
            raise ToolArgumentError(f"missing required argument {name!r}", tool=tool.name)
        args[name] = value
    return args


def load_file(path: Path, **options: Any) -> DeclaredSource:
    """One definition file as a source; ConfigError with file, line and field."""
    doc = load_document(path)
    definition = validate_document(doc, ToolFile)
    name = definition.name or path.stem
    return DeclaredSource(definition, name=name, origin=str(path), **options)


def workspace_sources(workspace: Any) -> list[DeclaredSource]:
    """Every definition in ``<workspace>/tools/``; a broken file is logged and skipped (the
    workspace's other tools stay usable); the warning names the file, line and field."""
    folder = Path(workspace.path) / "tools"
    if not folder.is_dir():
        return []
    files_dir = Path(workspace.files_dir)
    sandbox_cache: list[Any] = []

    def sandbox() -> Any:
        if not sandbox_cache:
            from ...execution.sandbox import SandboxExecutor

            files_dir.mkdir(parents=True, exist_ok=True)
            sandbox_cache.append(SandboxExecutor.for_workspace(workspace))
        return sandbox_cache[0]

    # ``${VAR}`` from the environment the workspace was opened with: a tenant's is its
    # env_file, never the server's (which holds every tenant's token).
    env = getattr(workspace, "environment", None)
    refused = getattr(workspace, "unjailed_refused", None)
    out: list[DeclaredSource] = []
    for path in sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES):
        try:
            out.append(
                load_file(path, files_dir=files_dir, sandbox=sandbox, env=env, host_refused=refused)
            )
        except ConfigError as exc:
            log.warning("tool definitions %s are ignored: %s", path, exc)
    return out


__all__ = ["HOST_MARK", "DeclaredSource", "load_file", "workspace_sources"]
