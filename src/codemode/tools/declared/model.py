"""The YAML (or JSON) format of tools defined outside MCP, in ``<workspace>/tools/``.

One file is one tool server (``tools.<name>.*``; the name defaults to the file's stem)::

    name: text
    description: Text utilities.
    tools:
      - name: word_count                  # a command-line tool: argv, never a shell
        description: Count the words of a file in the workspace.
        command: [wc, -w, "{path}"]
        parameters:
          path: {type: string, description: A path under /workspace}
        output: text                      # text | json | lines
        # host: true                      # run on the host, unsandboxed (loudly)

    # an HTTP tool server fixes scheme, host and port once:
    http:
      base_url: https://api.example.com/v1
      headers: {Authorization: "Bearer ${EXAMPLE_TOKEN}"}   # read on the host only
      allow_networks: []                  # CIDRs of private addresses it may reach
    tools:
      - name: get_item
        method: GET
        path: /items/{item_id}            # placeholders: percent-encoded path segments
        query: {fields: "{fields}"}
        parameters:
          item_id: {type: string}
          fields: {type: string, required: false}

Parameters become the tool's input schema (so stubs, search and argument validation work
as for MCP tools). A placeholder ``{p}`` may only name a declared parameter.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ...redact import NOT_SECRET_VARS, remember_secret, secret_name
from .template import placeholders, whole

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")

JSONType = Literal["string", "integer", "number", "boolean", "array", "object"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Param(_Model):
    """One typed parameter (a small JSON Schema)."""

    type: JSONType = "string"
    description: str = ""
    default: Any = None
    required: bool | None = Field(None, description="Default: required unless it has a default.")
    enum: list[Any] | None = None
    pattern: str | None = None
    minimum: float | None = None
    maximum: float | None = None
    items: dict[str, Any] | None = None
    allow_leading_dash: bool = Field(
        False,
        description="Command tools: let a value start with '-' (off: it could be read as "
        "an option by the program).",
    )

    @property
    def is_required(self) -> bool:
        return self.required if self.required is not None else self.default is None

    def to_schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.type}
        for key in ("description", "enum", "pattern", "minimum", "maximum", "items"):
            value = getattr(self, key)
            if value not in (None, ""):
                out[key] = value
        if self.default is not None:
            out["default"] = self.default
        return out


class Annotations(_Model):
    """What the tool does, as MCP tool annotations (policy and workflows read them)."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True

    def hints(self) -> dict[str, Any]:
        return {
            "readOnlyHint": self.read_only,
            "destructiveHint": self.destructive,
            "idempotentHint": self.idempotent,
            "openWorldHint": self.open_world,
        }


Argv = list[str | list[str]]


class ToolDef(_Model):
    """A command-line tool (``command``) or an HTTP tool (``method``/``path``)."""

    name: str
    description: str = ""
    parameters: dict[str, Param] = Field(default_factory=dict)
    timeout: float = Field(30.0, gt=0, le=3600)
    annotations: Annotations = Field(default_factory=Annotations)
    # command-line tools
    command: Argv | None = Field(
        None,
        description="argv template; a nested list is an optional group, left out when a "
        "parameter it names is missing, null or false.",
    )
    stdin: str | None = None
    output: Literal["text", "json", "lines"] = "text"
    ok_exit_codes: list[int] = Field(default_factory=lambda: [0])
    host: bool = Field(False, description="Run on the host instead of the sandbox.")
    env: dict[str, str] = Field(default_factory=dict)
    # HTTP tools
    method: Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"] | None = None
    path: str | None = None
    query: dict[str, str] = Field(default_factory=dict)
    headers: dict[str, str] = Field(default_factory=dict)
    body: Any = None

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]{0,63}", v):
            raise ValueError(
                "use letters, digits, '_' and '-' (at most 64), not starting with a digit"
            )
        return v

    @field_validator("parameters")
    @classmethod
    def _params(cls, v: dict[str, Param]) -> dict[str, Param]:
        for name in v:
            if not name.isidentifier():
                raise ValueError(f"parameter {name!r} must be a Python identifier")
        return v

    @property
    def kind(self) -> Literal["command", "http"]:
        return "command" if self.command is not None else "http"

    @model_validator(mode="after")
    def _consistent(self) -> ToolDef:
        http = self.method is not None or self.path is not None
        if (self.command is None) == (not http):
            raise ValueError(
                "a tool has either `command` (a command-line tool) or `method`/`path` "
                "(an HTTP tool)"
            )
        if self.command is not None:
            if not self.command or not isinstance(self.command[0], str):
                raise ValueError("command: the first item is the program (a string)")
            if placeholders(self.command[0]):
                raise ValueError("command: the program itself cannot be a parameter")
            stray = [f for f in ("query", "headers") if getattr(self, f)] + (
                ["body"] if self.body is not None else []
            )
            if stray:
                raise ValueError(f"{', '.join(stray)}: only for HTTP tools")
            used = [n for item in self.command for t in _items(item) for n in placeholders(t)]
            used += placeholders(self.stdin) if self.stdin else []
        else:
            if self.host or self.stdin is not None or self.env:
                raise ValueError("host, stdin and env are only for command-line tools")
            path = self.path or "/"
            if not path.startswith("/") or "?" in path or "#" in path:
                raise ValueError("path: must start with '/' and hold no '?' or '#' (use query)")
            used = placeholders(path)
            for value in self.query.values():
                used += placeholders(value)
            used += [n for t in _strings(self.body) for n in placeholders(t)]
            for value in self.headers.values():
                if placeholders(value):
                    raise ValueError("headers: parameters cannot go in headers (only ${VAR})")
        unknown = sorted({n for n in used if n not in self.parameters})
        if unknown:
            raise ValueError(f"placeholders name undeclared parameters: {', '.join(unknown)}")
        return self


class HttpServer(_Model):
    """What every HTTP tool of the file shares: where it goes, and what it may reach."""

    base_url: str = Field(description="scheme://host[:port][/base path]; fixed for every tool.")
    headers: dict[str, str] = Field(default_factory=dict)
    allow_networks: list[str] = Field(
        default_factory=list,
        description="CIDRs of non-public addresses the tools may reach (e.g. 127.0.0.1/32); "
        "cloud metadata addresses only when listed as themselves.",
    )
    max_redirects: int = Field(5, ge=0, le=20)
    max_response_bytes: int = Field(10_000_000, gt=0)

    @field_validator("base_url")
    @classmethod
    def _base(cls, v: str) -> str:
        parts = urlsplit(v)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("base_url must be http:// or https:// with a host")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("base_url holds no credentials, query or fragment (use headers)")
        if _ENV_REF.search(v) or "{" in v:
            raise ValueError("base_url is fixed: no ${VAR} or {parameter} in it")
        return v.rstrip("/")

    @field_validator("allow_networks")
    @classmethod
    def _nets(cls, v: list[str]) -> list[str]:
        for net in v:
            try:
                ipaddress.ip_network(net, strict=False)
            except ValueError as exc:
                raise ValueError(f"{net!r} is not a network (CIDR): {exc}") from None
        return v


class ToolFile(_Model):
    """One file of ``<workspace>/tools/``: a tool server."""

    name: str | None = None
    description: str = ""
    http: HttpServer | None = None
    tools: list[ToolDef] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> ToolFile:
        names = [t.name for t in self.tools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"tools named twice: {', '.join(twice)}")
        if any(t.kind == "http" for t in self.tools) and self.http is None:
            raise ValueError("HTTP tools need an `http:` section with their base_url")
        return self


def env_refs(text: str) -> list[str]:
    return _ENV_REF.findall(text)


def expand_env(text: str, env: Any, *, where: str) -> str:
    """``${VAR}`` from the host's environment; a missing variable is an error naming it.
    The value is remembered as a secret (:func:`codemode.redact.remember_secret`), as
    mcp.json's expansions are: an API that echoes it back does not show it to the model."""
    from ...errors import ToolError

    def sub(m: re.Match[str]) -> str:
        value = env.get(m.group(1))
        if value is None:
            raise ToolError(f"{where}: environment variable {m.group(1)} is not set on the host")
        if m.group(1) not in NOT_SECRET_VARS:
            remember_secret(str(value))
        return str(value)

    return _ENV_REF.sub(sub, text)


def remember_secrets(definition: ToolFile, env: Any) -> None:
    """Remember, before any call, the credentials a definition holds: what its ``${VAR}``
    expand to now, and literal values under secret-looking names (``Authorization``,
    ``api_key``...) in headers, queries and command environments."""
    groups: list[dict[str, Any]] = []
    if definition.http is not None:
        groups.append(definition.http.headers)
    for tool in definition.tools:
        groups += [tool.headers, tool.env, tool.query]
    for group in groups:
        for key, value in group.items():
            if not isinstance(value, str):
                continue
            for name in _ENV_REF.findall(value):
                got = env.get(name)
                if got is not None and name not in NOT_SECRET_VARS:
                    remember_secret(str(got))
            if secret_name(str(key)) and not placeholders(value) and "${" not in value:
                remember_secret(value)
                remember_secret(value.rsplit(" ", 1)[-1])  # "Bearer x", "Key x": x alone


def _items(item: str | list[str]) -> list[str]:
    return [item] if isinstance(item, str) else list(item)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def input_schema(tool: ToolDef) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {name: p.to_schema() for name, p in tool.parameters.items()},
        "required": [name for name, p in tool.parameters.items() if p.is_required],
        "additionalProperties": False,
    }


__all__ = [
    "Annotations",
    "HttpServer",
    "Param",
    "ToolDef",
    "ToolFile",
    "env_refs",
    "expand_env",
    "input_schema",
    "whole",
]
