"""Upstream MCP server configuration (codemode's own settings: ``config.schema``).

Upstream servers use the ``mcpServers`` JSON that Claude Desktop, Cursor and ``.mcp.json``
already use (``servers`` as in VS Code is accepted too), either in ``<base>/mcp.json`` or
inside ``<base>/config.json``; a name defined in both comes from ``mcp.json``::

    {"mcpServers": {
        "fs":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "api": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                "timeout": 20, "include": ["search_*"], "exclude": ["delete_*"]}
    }}

``mcp.json`` is JSON with comments (``//`` and ``/* ... */`` outside strings are ignored, and
so is any ``"$comment"`` key); the config file may also be YAML (``config.files``).
``${VAR}`` and ``${VAR:-default}`` in commands, arguments,
environment values, working directories, URLs and header values are expanded from the host
environment when the file is loaded (``$${`` writes a literal ``${``); a missing variable
is a :class:`~codemode.errors.ConfigError` naming the file, the field and the variable.
A stdio server gets a minimal environment (``PATH``, ``HOME``, ``USER``, ``SHELL``, ``TERM``,
``LOGNAME``, as the MCP SDK and Claude Desktop do) plus its ``env``: host secrets reach a
server only when its entry names them.

Unknown keys in a server entry are ignored (clients add their own, e.g. ``autoApprove``).

This module knows nothing about the MCP SDK: it only describes what to connect to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from codemode.errors import ConfigError
from codemode.redact import NOT_SECRET_VARS, remember_secret, secret_name

from .files import load_json_file

SERVERS_FILE = "mcp.json"

__all__ = [
    "SERVERS_FILE",
    "RemoteServerConfig",
    "ServerConfig",
    "StdioServerConfig",
    "expand_vars",
    "load_servers",
    "parse_servers",
]


# --------------------------------------------------------------------------- servers


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = ""
    timeout: float | None = Field(None, gt=0)
    connect_timeout: float | None = Field(None, gt=0)
    enabled: bool = True
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    protocol: Literal["auto", "legacy", "modern"] | None = None

    def allows(self, tool: str) -> bool:
        """Whether ``include``/``exclude`` (glob patterns) let ``tool`` through."""
        if self.include is not None and not any(fnmatchcase(tool, p) for p in self.include):
            return False
        return not any(fnmatchcase(tool, p) for p in self.exclude)


class StdioServerConfig(_ServerBase):
    """A server codemode starts as a child process and talks to over stdin/stdout."""

    transport: Literal["stdio"] = "stdio"
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    isolation: Literal["auto", "none"] = Field(
        "auto",
        description="auto: a jail as its own uid (see codemode.isolation.servers); none: "
        "as codemode's own user with all its rights (logged loudly, shown by doctor).",
    )
    network: bool | None = Field(
        None, description="Network in the jail; default: shared unless it is given a "
        "path inside the workspace.",
    )  # fmt: skip
    read_only_paths: tuple[str, ...] = Field((), description="More host paths it may read.")
    writable_paths: tuple[str, ...] = Field((), description="More host paths it may write.")

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("must not be empty")
        return v


class RemoteServerConfig(_ServerBase):
    """A server reached over the network: streamable HTTP (default) or legacy SSE."""

    transport: Literal["streamable-http", "sse"] = "streamable-http"
    url: str
    headers: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"must be an http:// or https:// URL, got {v!r}")
        return v


ServerConfig = StdioServerConfig | RemoteServerConfig

_TRANSPORT_ALIASES = {
    "stdio": "stdio",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "streamable_http": "streamable-http",
    "streamablehttp": "streamable-http",
    "sse": "sse",
}

# --------------------------------------------------------------------------- ${VAR} expansion

_VAR = re.compile(r"\$\$\{|\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_vars(value: str, env: Mapping[str, str], *, where: str = "") -> str:
    """Expand ``${VAR}`` / ``${VAR:-default}``; ``$${`` is a literal ``${``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$${":
            return "${"
        name, default = m.group(1), m.group(2)
        got = env.get(name)
        if got is not None and (got or default is None):
            if name not in NOT_SECRET_VARS:
                remember_secret(got)  # never shown back in a server's stderr or errors
            return got
        if default is not None:
            return default
        at = f"{where}: " if where else ""
        raise ConfigError(
            f"{at}environment variable {name} is not set (write ${{{name}:-default}} for a default)"
        )

    return _VAR.sub(sub, value)


def _expand_server(raw: dict[str, Any], env: Mapping[str, str], where: str) -> dict[str, Any]:
    out = dict(raw)
    for key in ("command", "cwd", "url"):
        if isinstance(out.get(key), str):
            out[key] = expand_vars(out[key], env, where=f"{where}.{key}")
    for key in ("args", "read_only_paths", "writable_paths"):
        if isinstance(out.get(key), list):
            out[key] = [
                expand_vars(a, env, where=f"{where}.{key}[{i}]") if isinstance(a, str) else a
                for i, a in enumerate(out[key])
            ]
    for key in ("env", "headers"):
        if isinstance(out.get(key), dict):
            out[key] = {
                k: expand_vars(v, env, where=f"{where}.{key}.{k}") if isinstance(v, str) else v
                for k, v in out[key].items()
            }
            for k, v in out[key].items():
                if isinstance(v, str) and secret_name(str(k)):
                    remember_secret(v.removeprefix("Bearer ").removeprefix("Basic "))
    return out


# --------------------------------------------------------------------------- parsing


def _field_path(err: Mapping[str, Any]) -> str:
    return ".".join(str(p) for p in err.get("loc", ()))


def _server_from_raw(name: str, raw: Any, env: Mapping[str, str], source: str) -> ServerConfig:
    where = f"{source}: mcpServers.{name}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected an object, got {type(raw).__name__}")
    data = dict(raw)
    if "disabled" in data:  # Cline / Cursor spelling
        disabled = data.pop("disabled")
        if not isinstance(disabled, bool):
            raise ConfigError(f"{where}.disabled: expected true or false")
        data.setdefault("enabled", not disabled)
    kind = data.pop("type", None)
    kind = data.pop("transport", kind)
    if kind is not None:
        norm = _TRANSPORT_ALIASES.get(str(kind).lower())
        if norm is None:
            raise ConfigError(
                f"{where}.type: unknown transport {kind!r}"
                " (use stdio, http, streamable-http or sse)"
            )
        kind = norm
    for key in ("include", "exclude"):
        if isinstance(data.get(key), str):
            data[key] = [data[key]]
    data["name"] = name
    # A disabled server is not expanded: it must not fail for a variable it would need.
    disabled = data.get("enabled", True) is False
    expanded = data if disabled else _expand_server(data, env, where)

    if kind is None:
        if "command" in data and "url" in data:
            raise ConfigError(f"{where}: give either 'command' (stdio) or 'url' (remote), not both")
        kind = "stdio" if "command" in data else "streamable-http" if "url" in data else None
    if kind is None:
        raise ConfigError(f"{where}: needs 'command' (stdio server) or 'url' (remote server)")
    model: type[StdioServerConfig] | type[RemoteServerConfig]
    model = StdioServerConfig if kind == "stdio" else RemoteServerConfig
    expanded["transport"] = kind
    try:
        return model.model_validate(expanded)
    except ValidationError as exc:
        problems = "; ".join(f"{_field_path(e)}: {e['msg']}" for e in exc.errors())
        first = _field_path(exc.errors()[0]) if exc.errors() else ""
        raise ConfigError(f"{where}.{first}: {problems}") from None


def parse_servers(
    data: Mapping[str, Any], *, source: str = "<config>", env: Mapping[str, str] | None = None
) -> dict[str, ServerConfig]:
    """Parse the ``mcpServers`` (or ``servers``) object of a loaded config document."""
    env = os.environ if env is None else env
    block = data.get("mcpServers", data.get("servers"))
    if block is None:
        return {}
    if not isinstance(block, dict):
        raise ConfigError(f"{source}: mcpServers: expected an object mapping names to servers")
    servers: dict[str, ServerConfig] = {}
    for name, raw in block.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{source}: mcpServers: server names must be non-empty strings")
        servers[name] = _server_from_raw(name, raw, env, source)
    return servers


def load_servers(*paths: Path, env: Mapping[str, str] | None = None) -> dict[str, ServerConfig]:
    """Servers from each existing file in order; a later file wins for the same name."""
    servers: dict[str, ServerConfig] = {}
    for path in paths:
        if path.exists():
            servers.update(parse_servers(load_json_file(path), source=str(path), env=env))
    return servers
