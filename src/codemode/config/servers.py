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

A key codemode does not read in a server entry is a warning with a did-you-mean
(``"timout"``, ``"enable"``), except the keys other clients add for themselves
(``FOREIGN_SERVER_KEYS``: ``autoApprove``, ``disabled``, ``type``...).

This module knows nothing about the MCP SDK: it only describes what to connect to.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator

from codemode.errors import ConfigError
from codemode.redact import NOT_SECRET_VARS, remember_secret, secret_name

from .files import Document, load_document
from .messages import did_you_mean, explain, kind_of, shown

SERVERS_FILE = "mcp.json"

__all__ = [
    "FOREIGN_SERVER_KEYS",
    "SERVERS_FILE",
    "SERVER_BLOCKS",
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
    max_message_bytes: int = Field(32 * 1024 * 1024, gt=0)
    """The largest single message accepted from the server; a larger one fails the calls
    waiting on it and restarts the server (it is not read into memory whole)."""
    trusted: bool = False
    """Believe the tool annotations this server declares (``readOnlyHint``...); otherwise
    policies apply the MCP defaults (destructive, open-world)."""

    def allows(self, tool: str) -> bool:
        """Whether ``include``/``exclude`` (glob patterns) let ``tool`` through, named as
        the server lists it or as the code calls it (``get-weather``, ``get_weather``), as
        policy rules may name it: an ``exclude`` written with the name discovery shows must
        not leave the tool callable."""
        from codemode.tools.spec import py_identifier  # the tools package imports config

        names = (tool, py_identifier(tool))
        if self.include is not None and not any(
            fnmatchcase(n, p) for p in self.include for n in names
        ):
            return False
        return not any(fnmatchcase(n, p) for p in self.exclude for n in names)


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
    read_only: bool = Field(
        False, description="Show every path it is given read-only (its HOME stays writable)."
    )
    _config_dir: str | None = PrivateAttr(None)

    @property
    def config_dir(self) -> str | None:
        """The folder of the file this entry was read from: where a relative ``cwd`` (and,
        without one, each relative path it is given) starts. None when built in code: then
        where codemode runs."""
        return self._config_dir

    def placed(self, folder: str | os.PathLike[str]) -> StdioServerConfig:
        """This entry as read from a file in ``folder``."""
        out = self.model_copy()
        out._config_dir = os.path.abspath(folder)
        return out

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
                remember_secret(got)  # never shown to a model, a log, a console or in errors
            return got
        if default is not None:
            return default
        at = f"{where}: " if where else ""
        raise ConfigError(
            f"{at}environment variable {name} is not set (write ${{{name}:-default}} for a default)"
        )

    return _VAR.sub(sub, value)


def _expand_server(raw: dict[str, Any], env: Mapping[str, str], entry: _Entry) -> dict[str, Any]:
    out = dict(raw)
    for key in ("command", "cwd", "url"):
        if isinstance(out.get(key), str):
            out[key] = expand_vars(out[key], env, where=entry.at(key))
    for key in ("args", "read_only_paths", "writable_paths"):
        if isinstance(out.get(key), list):
            out[key] = [
                expand_vars(a, env, where=entry.at(key, i)) if isinstance(a, str) else a
                for i, a in enumerate(out[key])
            ]
    for key in ("env", "headers"):
        if isinstance(out.get(key), dict):
            out[key] = {
                k: expand_vars(v, env, where=entry.at(key, k)) if isinstance(v, str) else v
                for k, v in out[key].items()
            }
            for k, v in out[key].items():
                if isinstance(v, str) and secret_name(str(k)):
                    remember_secret(v.removeprefix("Bearer ").removeprefix("Basic "))
    return out


# --------------------------------------------------------------------------- parsing

SERVER_BLOCKS = ("mcpServers", "servers")
"""The keys that hold server entries (``servers``: VS Code's spelling)."""

FOREIGN_SERVER_KEYS: dict[str, tuple[str, str]] = {
    "autoApprove": ("Cline", ""),
    "alwaysAllow": ("Roo Code, Kilo Code", ""),
    "trust": ("Gemini CLI", ""),
    "description": ("Gemini CLI", ""),
    "watchPaths": ("Roo Code", ""),
    "dev": ("VS Code", ""),
    "gallery": ("VS Code", ""),
    "version": ("VS Code", ""),
    "disabledTools": ("Roo Code, Windsurf", 'list those tools in "exclude"'),
    "excludeTools": ("Gemini CLI", 'write "exclude"'),
    "includeTools": ("Gemini CLI", 'write "include"'),
    "envFile": ("VS Code, Cursor", 'put its variables in "env"'),
    "httpUrl": ("Gemini CLI", 'write "url"'),
    "serverUrl": ("Windsurf", 'write "url"'),
    "oauth": ("Gemini CLI, Claude Code", 'send a token in "headers"'),
}
"""Keys other MCP clients write in a server entry: key -> (clients, what to write instead).

They stay in a file those clients share with codemode. With no advice they only concern
the other client (approvals, UI) and pass silently; with advice their intent would be lost
here, so each is a warning saying what codemode reads instead. docs/configuration.md lists
them (a test checks it)."""

_TYPE_KEYS = ("transportType", "type", "transport")  # Cline's, most clients', codemode's
_STDIO_KEYS = frozenset(StdioServerConfig.model_fields) - {"transport"}
_REMOTE_KEYS = frozenset(RemoteServerConfig.model_fields) - {"transport"}
_KNOWN_KEYS = _STDIO_KEYS | _REMOTE_KEYS | {*_TYPE_KEYS, "disabled"}


class _Entry:
    """One server entry: where its parts are written, for messages."""

    def __init__(self, block: str, name: str, source: str, doc: Document | None) -> None:
        self.block, self.name, self.source, self.doc = block, name, source, doc

    def at(self, *keys: str | int) -> str:
        """``file:line:column: mcpServers.<name>.<keys>``, placed at the value."""
        where = self.source
        if self.doc is not None:
            where = self.doc.where([self.block, self.name, *keys])
        path = "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in keys)
        return f"{where}: {self.block}.{self.name}{path}"

    def key_at(self, key: str) -> str:
        """``file:line:column: mcpServers.<name>``, placed at ``key`` in the entry."""
        where = self.doc.where([self.block, self.name, key], key=True) if self.doc else self.source
        return f"{where}: {self.block}.{self.name}"


def _check_keys(entry: _Entry, data: Mapping[str, Any], stdio: bool) -> list[str]:
    """A message per key codemode does not read (foreign keys without advice pass)."""
    own, other = (_STDIO_KEYS, _REMOTE_KEYS) if stdio else (_REMOTE_KEYS, _STDIO_KEYS)
    out = []
    for key in data:
        if key in own or key in _TYPE_KEYS or key == "disabled":
            continue
        where = entry.key_at(key)
        if key in FOREIGN_SERVER_KEYS:
            clients, advice = FOREIGN_SERVER_KEYS[key]
            if advice:
                out.append(f"{where}: {key!r} ({clients}) is not read by codemode: {advice}")
        elif key in other:
            kind, needs = ("a stdio server", "url") if stdio else ("a remote server", "command")
            out.append(f"{where}: {key!r} does not apply to {kind} (it goes with {needs!r})")
        else:
            hint = did_you_mean(key, sorted(_KNOWN_KEYS - {"name"}))
            out.append(f"{where}: unknown key {key!r}{hint}")
    return out


def _server_from_raw(
    entry: _Entry, raw: Any, env: Mapping[str, str], warnings: list[str] | None
) -> ServerConfig:
    if not isinstance(raw, dict):
        raise ConfigError(f"{entry.at()}: expected an object, got {kind_of(raw)}")
    data = dict(raw)
    if "disabled" in data:  # Cline / Cursor spelling
        disabled = data.pop("disabled")
        if not isinstance(disabled, bool):
            raise ConfigError(
                f"{entry.at('disabled')}: expected true or false, got {kind_of(disabled)}"
            )
        data.setdefault("enabled", not disabled)
    kind: Any = None
    for key in _TYPE_KEYS:
        if key in data:
            kind, kind_key = data.pop(key), key
    if kind is not None:
        norm = _TRANSPORT_ALIASES.get(str(kind).lower())
        if norm is None:
            hint = did_you_mean(str(kind).lower(), _TRANSPORT_ALIASES, value=True)
            raise ConfigError(
                f"{entry.at(kind_key)}: unknown transport {shown(kind)}{hint}"
                " (use stdio, http, streamable-http or sse)"
            )
        kind = norm
    for key in ("include", "exclude"):
        if isinstance(data.get(key), str):
            data[key] = [data[key]]
    if kind is None:
        if "command" in data and "url" in data:
            raise ConfigError(
                f"{entry.at()}: give either 'command' (stdio) or 'url' (remote), not both"
            )
        kind = "stdio" if "command" in data else "streamable-http" if "url" in data else None
    if kind is None:
        advice = [f"; {k!r} is a {FOREIGN_SERVER_KEYS[k][0]} key: {FOREIGN_SERVER_KEYS[k][1]}"
                  for k in ("httpUrl", "serverUrl") if k in data]  # fmt: skip
        raise ConfigError(
            f"{entry.at()}: needs 'command' (stdio server) or 'url' (remote server)"
            + "".join(advice)
        )
    if warnings is not None:
        warnings.extend(_check_keys(entry, raw, kind == "stdio"))
    data["name"] = entry.name
    # A disabled server is not expanded: it must not fail for a variable it would need.
    disabled = data.get("enabled", True) is False
    expanded = data if disabled else _expand_server(data, env, entry)
    model: type[StdioServerConfig] | type[RemoteServerConfig]
    model = StdioServerConfig if kind == "stdio" else RemoteServerConfig
    expanded["transport"] = kind
    try:
        server = model.model_validate(expanded)
    except ValidationError as exc:
        problems = [f"{entry.at(*e['loc'])}: {explain(e, model)}" for e in exc.errors()]
        raise ConfigError("\n".join(problems)) from None
    if isinstance(server, StdioServerConfig) and entry.doc is not None:
        return server.placed(entry.doc.path.parent)
    return server


def parse_servers(
    data: Mapping[str, Any],
    *,
    source: str = "<config>",
    env: Mapping[str, str] | None = None,
    doc: Document | None = None,
    warnings: list[str] | None = None,
) -> dict[str, ServerConfig]:
    """Parse the ``mcpServers`` (or ``servers``) object of a loaded config document.

    ``doc`` (the document ``data`` came from) puts lines and columns in messages; keys that
    codemode does not read are appended to ``warnings`` when it is given.
    """
    env = os.environ if env is None else env
    present = [b for b in SERVER_BLOCKS if b in data]
    if not present:
        return {}
    block = present[0]
    at = doc.where([block]) if doc is not None else source
    if len(present) > 1 and warnings is not None:
        second = doc.where([present[1]], key=True) if doc is not None else source
        warnings.append(f"{second}: a second server list {present[1]!r} beside {block!r}")
    entries = data[block]
    if not isinstance(entries, dict):
        raise ConfigError(
            f"{at}: {block}: expected an object mapping names to servers, got {kind_of(entries)}"
        )
    servers: dict[str, ServerConfig] = {}
    for name, raw in entries.items():
        if not isinstance(name, str) or not name.strip():
            raise ConfigError(f"{at}: {block}: server names must be non-empty strings")
        servers[name] = _server_from_raw(_Entry(block, name, source, doc), raw, env, warnings)
    return servers


def load_servers(
    *paths: Path, env: Mapping[str, str] | None = None, warnings: list[str] | None = None
) -> dict[str, ServerConfig]:
    """Servers from each existing file in order; a later file wins for the same name."""
    servers: dict[str, ServerConfig] = {}
    for path in paths:
        if path.exists():
            doc = load_document(path)
            servers.update(
                parse_servers(doc.data, source=str(path), env=env, doc=doc, warnings=warnings)
            )
    return servers
