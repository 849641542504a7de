"""The workspace: one directory holding codemode's configuration and stored memory.

Layout (``<base>`` is ``base=``/``--base``, else ``$CODEMODE_BASE``, else ``~/.codemode``)::

    <base>/mcp.json       upstream MCP servers ("mcpServers", as in Claude Desktop / Cursor)
    <base>/config.json    optional codemode settings, or config.yaml (docs/configuration.md)
    <base>/skills/        saved skills        (storage is implemented elsewhere; these are
    <base>/artifacts/     saved artifacts      only the paths)
    <base>/deps/          packages installed for the sandbox

The directory and an example ``mcp.json`` (all servers commented out with ``//``, which
codemode's loader accepts) are created on first use.

``Workspace.registry()`` returns the process-wide :class:`ToolRegistry` for this workspace:
every session of the process opened on the same base shares it, hence one connection per
upstream server per process.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from codemode.config import (
    CONFIG_FILE,
    SERVERS_FILE,
    Config,
    ServerConfig,
    Settings,
    find_config_file,
    load_config,
)
from codemode.errors import ConfigError

C = TypeVar("C", bound=BaseModel)

if TYPE_CHECKING:
    from codemode.capability import Capability
    from codemode.tools.registry import ToolRegistry

__all__ = [
    "BASE_ENV",
    "EXAMPLE_MCP_JSON",
    "Workspace",
    "default_base",
    "serving_tenants",
    "tenant_workspace",
]

BASE_ENV = "CODEMODE_BASE"

EXAMPLE_MCP_JSON = """\
// Upstream MCP servers for codemode: the "mcpServers" format of Claude Desktop, Cursor
// and .mcp.json. Lines starting with // are comments (codemode strips them).
// Per server, besides command/args/env/cwd (stdio) or url/headers/type (remote):
//   "timeout": seconds per call, "connect_timeout": seconds to start and list its
//   tools (default: config.json's connect_timeout), "enabled": false to skip it,
//   "isolation": "none" to run it without its jail (docs/isolation.md; loud),
//   "read_only_paths"/"writable_paths": more host paths for its jail, "read_only":
//   true to show it every path it is given read-only; relative paths start here,
//   "include"/"exclude": tool names or globs ("search_*"),
//   "trusted": true to let the policy believe its tool annotations (readOnlyHint...).
// ${VAR} and ${VAR:-default} are read from the environment when the file is loaded.
{
  "mcpServers": {
    // "filesystem": {
    //   "command": "npx",
    //   "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/projects"],
    //   "timeout": 30
    // },
    // "time": {"command": "uvx", "args": ["mcp-server-time"]},
    // "remote": {
    //   "type": "http",
    //   "url": "https://example.com/mcp",
    //   "headers": {"Authorization": "Bearer ${EXAMPLE_TOKEN}"},
    //   "include": ["search_*", "get_item"]
    // }
  }
}
"""

_registries: dict[tuple[Path, str, str | None], ToolRegistry] = {}
_registries_lock = threading.Lock()
_tenants: dict[str, Workspace] = {}
"""The workspaces of ``codemode serve --tenants``, by path (``CallContext.workspace``)."""
_tenants_lock = threading.Lock()  # its own: a registry is built under _registries_lock


def default_base(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    raw = env.get(BASE_ENV) or "~/.codemode"
    return Path(raw).expanduser()


class Workspace:
    """An opened workspace directory with its parsed settings, sections and servers."""

    def __init__(
        self,
        path: Path,
        settings: Settings,
        servers: dict[str, ServerConfig],
        *,
        capabilities: Sequence[Capability[Any]] = (),
        sections: Mapping[str, BaseModel] | None = None,
        warnings: Sequence[str] = (),
    ) -> None:
        self.path = path
        self.settings = settings
        self.servers = servers
        self.capabilities = tuple(capabilities)
        """The capabilities this workspace's sessions and registry are assembled from."""
        self.sections: dict[str, BaseModel] = dict(sections or {})
        """Each capability's config section, by capability name."""
        self.warnings = list(warnings)
        """What the configuration had that codemode ignored (unknown keys...)."""
        self.environment: dict[str, str] | None = None
        """The environment it was opened with, when not the process's: a tenant's (its
        ``env_file``), which whatever else reads settings for it (its model's key) must
        use too, never the server's."""
        self.unjailed_refused: str | None = None
        """Why its ``"isolation": "none"`` servers and ``host: true`` tools are refused (a
        tenant's under ``--tenants``, naming the setting that allows them); None: allowed."""

    @classmethod
    def open(
        cls,
        base: str | os.PathLike[str] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        capabilities: Sequence[Capability[Any]] | None = None,
        strict: bool | None = None,
        **settings: Any,
    ) -> Workspace:
        """Open (creating on first use) the workspace at ``base``.

        ``settings`` override the file and the environment (``None`` values are ignored);
        a capability's section is passed as a mapping (``memory={"deps": [...]}``).
        ``capabilities`` default to ``codemode.assembly.installed()``. Raises
        ``ConfigError`` naming the source and field of any invalid configuration; unknown
        keys in the config file and in server entries are warnings (``Workspace.warnings``,
        logged on ``codemode.config``), errors if ``strict`` (default: ``CODEMODE_STRICT``).
        """
        from codemode import assembly

        env = os.environ if env is None else env
        caps = assembly.installed() if capabilities is None else tuple(capabilities)
        assembly.check(caps)
        path = (Path(base).expanduser() if base is not None else default_base(env)).resolve()
        _create(path)
        config_file = find_config_file(path)
        config = load_config(
            config_file,
            env=env,
            sections=[c.section for c in caps],
            overrides=settings,
            strict=strict,
            servers_file=path / SERVERS_FILE,
        )
        opened = cls.from_config(path, config, config.servers, caps)
        if env is not os.environ:
            opened.environment = dict(env)
        return opened

    def serve_as_tenant(self, *, allow_unjailed: bool = False) -> None:
        """Make this the workspace of tenant ``settings.tenant`` of ``codemode serve
        --tenants``: layers that find a workspace by a call's context (privacy's vault, the
        audit's keys) then read its settings and environment, never the server's; and
        unless ``allow_unjailed``, nothing of it runs as the server's own user."""
        if not allow_unjailed:
            self.unjailed_refused = (
                "under codemode serve --tenants a tenant's servers and tools run jailed "
                "(unjailed, they would run as the server's own user, who reads every "
                "tenant's files); the operator may allow it for this tenant with "
                f'"allow_unjailed": true (tenants.{self.settings.tenant}.allow_unjailed in '
                "the tenants file)"
            )
        with _tenants_lock:
            _tenants[str(self.path)] = self

    @classmethod
    def from_config(
        cls,
        path: Path,
        config: Config,
        servers: dict[str, ServerConfig],
        capabilities: Sequence[Capability[Any]],
    ) -> Workspace:
        return cls(
            path,
            config.settings,
            servers,
            capabilities=capabilities,
            sections=config.sections,
            warnings=config.warnings,
        )

    def section(self, capability: Capability[C]) -> C:
        """The capability's config section, typed (its defaults if it was not configured)."""
        value = self.sections.get(capability.name)
        if value is None:
            return capability.config()
        if not isinstance(value, capability.config):
            raise TypeError(f"section {capability.name!r} is not a {capability.config.__name__}")
        return value

    def __repr__(self) -> str:
        return f"Workspace({str(self.path)!r}, servers={sorted(self.servers)})"

    # ------------------------------------------------------------------ paths

    @property
    def servers_file(self) -> Path:
        return self.path / SERVERS_FILE

    @property
    def config_file(self) -> Path:
        """The config file in use (``config.json`` or ``config.yaml``), or where one goes."""
        return find_config_file(self.path) or self.path / CONFIG_FILE

    @property
    def skills_dir(self) -> Path:
        return self.path / "skills"

    @property
    def artifacts_dir(self) -> Path:
        return self.path / "artifacts"

    @property
    def files_dir(self) -> Path:
        """The agent's own files: the only part of the workspace its code can see."""
        return self.path / "files"

    @property
    def deps_dir(self) -> Path:
        return self.path / "deps"

    @property
    def enabled_servers(self) -> dict[str, ServerConfig]:
        return {name: cfg for name, cfg in self.servers.items() if cfg.enabled}

    # ------------------------------------------------------------------ tools

    def _fingerprint(self) -> str:
        doc = {
            "servers": {n: c.model_dump(mode="json") for n, c in self.enabled_servers.items()},
            "settings": self.settings.model_dump(mode="json"),
            "sections": {n: c.model_dump(mode="json") for n, c in self.sections.items()},
            "capabilities": [id(c) for c in self.capabilities],
            "declared_tools": _files_stamp(self.path / "tools"),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def private_paths(self) -> list[str]:
        """Keys and logs its configuration keeps outside it: upstream servers' jails show
        them empty, as they show the workspace (``codemode.isolation.servers``)."""
        from codemode.assembly import private_paths

        return private_paths(self.capabilities, self.sections, self.path)

    def make_private(self) -> None:
        """Create the private paths its capabilities would make at first use (an absolute
        ``audit.path``'s directory, a custom head or key file): before a server starts, so
        its jail can hide them and its uid never owns them."""
        from codemode.assembly import make_private

        make_private(self.capabilities, self.sections, self.path)

    def registry(self) -> ToolRegistry:
        """The process-wide tool registry for this workspace (one MCPSource per server).

        Shared by every session of the process on the same base and configuration, so each
        upstream server has one connection per process. Nothing connects until first use.
        """
        key = (self.path, self._fingerprint(), self.unjailed_refused)
        with _registries_lock:
            reg = _registries.get(key)
            if reg is None:
                reg = _registries[key] = self._build_registry()
            return reg

    def _build_registry(self) -> ToolRegistry:
        from codemode.assembly import configure_registry
        from codemode.isolation.servers import Isolation
        from codemode.plugins import tool_sources as plugin_tool_sources
        from codemode.tools.declared import workspace_sources
        from codemode.tools.registry import ToolRegistry
        from codemode.tools.sources.mcp import MCPSource

        # No registry-wide timeout: each MCPSource applies its server's ``timeout`` or
        # ``settings.tool_timeout``; a registry default would override the per-server one.
        reg = ToolRegistry()
        reg.workspace = str(self.path)
        # A named tenant's servers run as that tenant's own uid (isolation.uids.server_uid).
        tenant = self.settings.tenant if self.settings.tenant != "default" else None
        isolation = Isolation(
            workspace=self.path,
            files=self.files_dir,
            tenant=tenant,
            private=tuple(self.private_paths()),
            prepare=self.make_private,
            refuse_unjailed=self.unjailed_refused,
        )
        for name, cfg in self.enabled_servers.items():
            reg.add_source(
                MCPSource(
                    name,
                    cfg,
                    default_timeout=self.settings.tool_timeout,
                    connect_timeout=self.settings.connect_timeout,
                    protocol=self.settings.protocol,
                    isolation=isolation,
                )
            )
        for source in [*workspace_sources(self), *plugin_tool_sources(self)]:
            reg.add_source(source)  # tools/*.yaml of the workspace, then plugins' sources
        configure_registry(reg, self.capabilities, self.sections)
        return reg


def tenant_workspace(path: str | None) -> Workspace | None:
    """The workspace of ``codemode serve --tenants`` at ``path`` (None: not a tenant's)."""
    with _tenants_lock:
        return _tenants.get(path) if path is not None else None


def serving_tenants() -> bool:
    """Whether this process serves tenants (``codemode serve --tenants``)."""
    with _tenants_lock:
        return bool(_tenants)


def _files_stamp(folder: Path) -> list[tuple[str, int, int]]:
    """Names, sizes and mtimes of a folder's files: edited tool definitions mean a new
    registry (cheap: no file is read)."""
    try:
        entries = sorted(folder.iterdir())
    except OSError:
        return []
    out = []
    for p in entries:
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((p.name, st.st_size, st.st_mtime_ns))
    return out


def _create(path: Path) -> None:
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{path}: the workspace path exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        servers_file = path / SERVERS_FILE
        if not servers_file.exists():
            tmp = servers_file.with_name(f".{SERVERS_FILE}.{os.getpid()}.tmp")
            tmp.write_text(EXAMPLE_MCP_JSON, encoding="utf-8")
            os.replace(tmp, servers_file)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the workspace: {exc.strerror or exc}") from exc
