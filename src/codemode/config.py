"""codemode settings and upstream MCP server configuration.

Settings precedence, lowest to highest::

    defaults  <  <base>/config.json  <  CODEMODE_* environment  <  arguments

Upstream servers use the ``mcpServers`` JSON that Claude Desktop, Cursor and ``.mcp.json``
already use (``servers`` as in VS Code is accepted too), either in ``<base>/mcp.json`` or
inside ``<base>/config.json``; a name defined in both comes from ``mcp.json``::

    {"mcpServers": {
        "fs":  {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."]},
        "api": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                "timeout": 20, "include": ["search_*"], "exclude": ["delete_*"]}
    }}

Both files are JSON with comments: ``//`` and ``/* ... */`` outside strings are ignored, and
so is any ``"$comment"`` key. ``${VAR}`` and ``${VAR:-default}`` in commands, arguments,
environment values, working directories, URLs and header values are expanded from the host
environment when the file is loaded (``$${`` writes a literal ``${``); a missing variable
is a :class:`~codemode.errors.ConfigError` naming the file, the field and the variable.
A stdio server gets a minimal environment (``PATH``, ``HOME``, ``USER``, ``SHELL``, ``TERM``,
``LOGNAME``, as the MCP SDK and Claude Desktop do) plus its ``env``: host secrets reach a
server only when its entry names them.

Unknown keys in a server entry are ignored (clients add their own, e.g. ``autoApprove``);
unknown settings are refused, since a typo there would silently change nothing. Settings
from the environment are ``CODEMODE_<NAME>`` (``CODEMODE_TOOL_TIMEOUT=30``); the workspace
directory itself comes from ``CODEMODE_BASE`` (see ``codemode.workspace``).

This module knows nothing about the MCP SDK: it only describes what to connect to.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Collection, Mapping
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from codemode.errors import ConfigError
from codemode.privacy.secrets import NOT_SECRET_VARS, remember_secret

CONFIG_FILE = "config.json"
CONFIG_FILES = (CONFIG_FILE, "config.yaml")
"""The workspace config may be written in either format; both present is an error."""
SERVERS_FILE = "mcp.json"
ENV_PREFIX = "CODEMODE_"
SECTIONS = frozenset({"mcpServers", "servers", "llm"})
"""Top-level keys of the config file that are sections of their own, not ``Settings``."""

__all__ = [
    "CONFIG_FILE",
    "CONFIG_FILES",
    "ENV_PREFIX",
    "SECTIONS",
    "SERVERS_FILE",
    "RemoteServerConfig",
    "ServerConfig",
    "Settings",
    "StdioServerConfig",
    "expand_vars",
    "find_config_file",
    "load_config_document",
    "load_json_file",
    "load_section",
    "load_servers",
    "load_settings",
    "parse_servers",
    "strip_json_comments",
]


# --------------------------------------------------------------------------- settings


class Settings(BaseModel):
    """codemode's own settings (not the upstream servers)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_timeout: float = Field(60.0, gt=0, description="Default per-call timeout (s) for tools.")
    connect_timeout: float = Field(30.0, gt=0, description="Start + handshake timeout (s).")
    run_timeout: float = Field(60.0, gt=0, description="Default timeout (s) of one session run.")
    executor: Literal["subprocess", "inprocess", "sandbox"] = Field(
        "sandbox", description="Where agents' code runs; the sandbox refuses rather than degrade."
    )
    storage: Literal["file", "redis"] = "file"
    redis_url: str | None = None
    redis_prefix: str = "codemode"
    allow_runtime_deps: bool = Field(True, description="Let agents' code add packages.")
    allow_source_builds: bool = Field(
        False, description="Let deps build sdists (runs the package's code on the host)."
    )
    deps: tuple[str, ...] = Field((), description="Packages the workspace always has.")
    tenant: str = Field("default", description="The tenant this process serves (CallContext).")
    install_deps: bool = Field(False, description="Install missing `deps` when a session opens.")
    protocol: Literal["auto", "legacy", "modern"] = Field(
        "auto", description="MCP protocol negotiation for upstream servers (see MCPSource)."
    )


# --------------------------------------------------------------------------- servers


class _ServerBase(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)

    name: str = ""
    timeout: float | None = Field(None, gt=0)
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

# --------------------------------------------------------------------------- JSON with comments


def strip_json_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside JSON strings, keeping line numbers."""
    out: list[str] = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
        elif c == '"':
            in_str = True
            out.append(c)
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j == -1 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            end = n if j == -1 else j + 2
            out.append("\n" * text.count("\n", i, end))
            i = end
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _drop_comment_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_comment_keys(v) for k, v in value.items() if k != "$comment"}
    if isinstance(value, list):
        return [_drop_comment_keys(v) for v in value]
    return value


def load_json_file(path: Path) -> dict[str, Any]:
    """Read a JSON-with-comments object; a clear ConfigError names the file on failure."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    try:
        data = json.loads(strip_json_comments(text))
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ConfigError(f"{path}: invalid JSON at {where}: {exc.msg}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object at the top level")
    cleaned: dict[str, Any] = _drop_comment_keys(data)
    return cleaned


def find_config_file(base: Path) -> Path | None:
    """The workspace's config file (``config.json`` or ``config.yaml``), if there is one."""
    found = [base / name for name in CONFIG_FILES if (base / name).is_file()]
    if len(found) > 1:
        raise ConfigError(
            f"{base}: both {' and '.join(p.name for p in found)} exist; codemode reads one "
            "config file: merge them into one and remove the other"
        )
    return found[0] if found else None


def load_config_document(path: Path) -> dict[str, Any]:
    """A config file as a dict: YAML for ``.yaml``/``.yml``, JSON with comments otherwise."""
    if path.suffix not in (".yaml", ".yml"):
        return load_json_file(path)
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        raise ConfigError(f"{path}: invalid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    cleaned: dict[str, Any] = _drop_comment_keys(data)
    return cleaned


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
                remember_secret(got)  # never shown to a model, a log or a console
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
    if isinstance(out.get("args"), list):
        out["args"] = [
            expand_vars(a, env, where=f"{where}.args[{i}]") if isinstance(a, str) else a
            for i, a in enumerate(out["args"])
        ]
    for key in ("env", "headers"):
        if isinstance(out.get(key), dict):
            out[key] = {
                k: expand_vars(v, env, where=f"{where}.{key}.{k}") if isinstance(v, str) else v
                for k, v in out[key].items()
            }
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


def load_servers(
    *paths: Path | None, env: Mapping[str, str] | None = None
) -> dict[str, ServerConfig]:
    """Servers from each existing file in order; a later file wins for the same name."""
    servers: dict[str, ServerConfig] = {}
    for path in paths:
        if path is not None and path.exists():
            servers.update(parse_servers(load_config_document(path), source=str(path), env=env))
    return servers


def _settings_from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in Settings.model_fields:
        value = env.get(ENV_PREFIX + field.upper())
        if value is not None and value != "":
            out[field] = value
    return out


def load_settings(
    config_file: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    sections: Collection[str] = (),
    **overrides: Any,
) -> Settings:
    """Settings from defaults < ``config_file`` < ``CODEMODE_*`` env < ``overrides``.

    ``overrides`` whose value is ``None`` are ignored, so CLI options can be passed through.
    Keys named in ``sections`` belong to capabilities (``load_sections``), not to these.
    """
    env = os.environ if env is None else env
    layers: list[tuple[str, dict[str, Any]]] = []
    if config_file is not None and config_file.exists():
        doc = load_config_document(config_file)
        skip = {*SECTIONS, *sections}
        file_settings = {k: v for k, v in doc.items() if k not in skip}
        layers.append((str(config_file), file_settings))
    layers.append(("environment", _settings_from_env(env)))
    layers.append(("arguments", {k: v for k, v in overrides.items() if v is not None}))

    merged: dict[str, Any] = {}
    for _, layer in layers:
        merged.update(layer)
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = _field_path(err)
        origin = next(
            (src for src, layer in reversed(layers) if field.split(".")[0] in layer), "settings"
        )
        if origin == "environment":
            field = ENV_PREFIX + field.upper()
        raise ConfigError(f"{origin}: {field}: {err['msg']}") from None


M = TypeVar("M", bound=BaseModel)


def load_section(
    config_file: Path | None,
    name: str,
    model: type[M],
    *,
    env: Mapping[str, str] | None = None,
    override: Any = None,
) -> M:
    """A capability's config section: the file's ``name`` < ``CODEMODE_<NAME>`` and
    ``CODEMODE_<NAME>_<FIELD>`` < ``override`` (e.g. a CLI flag).

    A section may be written as a scalar when its model has a ``shorthand(value)``
    classmethod turning one into an object (``"privacy": true``, ``CODEMODE_PRIVACY=1``).
    """
    env = {} if env is None else env
    layers: list[tuple[str, Any]] = []
    if config_file is not None and config_file.exists():
        doc = load_config_document(config_file)
        if name in doc:
            layers.append((f"{config_file}: {name}", doc[name]))
    prefix = f"{ENV_PREFIX}{name.upper()}"
    whole = env.get(prefix)
    if whole:
        try:  # an object in JSON, or a shorthand such as "1"
            layers.append((prefix, json.loads(whole) if whole.lstrip()[:1] == "{" else whole))
        except ValueError as exc:
            raise ConfigError(f"{prefix}: invalid JSON: {exc}") from None
    fields = {
        f: env[f"{prefix}_{f.upper()}"]
        for f in model.model_fields
        if env.get(f"{prefix}_{f.upper()}")
    }
    if fields:
        layers.append((f"{prefix}_*", fields))
    if override is not None:
        layers.append(("arguments", override))
    merged: dict[str, Any] = {}
    source = f"{config_file}: {name}"
    shorthand = getattr(model, "shorthand", None)
    for where, raw in layers:
        if not isinstance(raw, dict) and callable(shorthand):
            raw = shorthand(raw)
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected an object, got {type(raw).__name__}")
        merged.update(raw)
        source = where
    try:
        return model.model_validate(merged)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise ConfigError(f"{source}.{_field_path(err)}: {err['msg']}") from None
