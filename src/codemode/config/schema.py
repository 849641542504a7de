"""One config schema: codemode's core settings plus a section per capability.

Where a value comes from, lowest to highest::

    defaults  <  the config file  <  the environment  <  arguments

- The config file is ``<base>/config.json`` (JSON with comments) or ``<base>/config.yaml``
  (or ``.yml``): one of them; two is a ``ConfigError`` naming both. Core settings are its
  top-level keys; a capability's section is the object under its name
  (``{"memory": {"deps": ["six"]}}``; a section whose model has a ``shorthand``
  classmethod also takes a scalar: ``"privacy": true``); ``mcpServers``/``servers`` are
  the upstream servers (``codemode.config.servers``). A section may also accept some top-level keys
  (``key_aliases``; the memory's ``deps``, ``install_deps``... from before sections).
- The environment: ``CODEMODE_<FIELD>`` for core settings, ``CODEMODE_<SECTION>_<FIELD>``
  for a section's, plus the aliases a section registers (``env_aliases``, e.g. an agent
  runner's ``OPENAI_API_KEY``); the first name set wins. Lists are JSON (``["a", "b"]``) or
  comma-separated. Every name is listed in docs/configuration.md (a test checks it).
- Arguments: ``Workspace.open(base, run_timeout=5)``; ``None`` values are ignored.

Every error names the field and its source: ``config.json:4:18``, ``environment variable
CODEMODE_RUN_TIMEOUT`` or ``argument run_timeout``, and says what is allowed in the user's
words (``config.messages``). An unknown key in the file, or in a server entry of the file
or of ``mcp.json`` (``servers_file=``), is a warning with a did-you-mean
(``Config.warnings``, also logged), or an error when strict (``strict=True``, or
``CODEMODE_STRICT=1`` when ``strict`` is not given).
Inside a section declared ``strict_keys`` (the guardrails: policy, budget...) an unknown
key is always an error.
"""

from __future__ import annotations

import json
import logging
import os
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from codemode.errors import ConfigError

from .files import Document, Key, load_document
from .messages import did_you_mean, explain, kind_of
from .servers import SERVER_BLOCKS, ServerConfig, parse_servers

CONFIG_FILE = "config.json"
CONFIG_FILES = ("config.json", "config.yaml", "config.yml")
ENV_PREFIX = "CODEMODE_"
SERVER_KEYS = frozenset(SERVER_BLOCKS)
IGNORED_KEYS = frozenset({"$schema"})
SERVERS_FILE_KEYS = frozenset({*SERVER_KEYS, *IGNORED_KEYS, "inputs"})
"""Top-level keys of ``mcp.json`` (``inputs``: VS Code's prompts for secrets, not read)."""
STRICT_ENV = "CODEMODE_STRICT"

log = logging.getLogger("codemode.config")

M = TypeVar("M", bound=BaseModel)


class Settings(BaseModel):
    """codemode's core settings (capabilities' settings are their sections)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_timeout: float = Field(60.0, gt=0, description="Default per-call timeout (s) for tools.")
    connect_timeout: float = Field(30.0, gt=0, description="Start + handshake timeout (s).")
    run_timeout: float = Field(60.0, gt=0, description="Default timeout (s) of one session run.")
    executor: str = Field(
        "sandbox",
        description="Where agents' code runs (sandbox, subprocess, inprocess, ray, or a "
        "plugin's); the sandbox refuses rather than degrade.",
    )
    storage: str = Field(
        "file", description="Where skills, artifacts and state live (file, redis, or a plugin's)."
    )
    redis_url: str | None = Field(None, description="Redis URL when storage is redis.")
    redis_prefix: str = Field("codemode", description="Key prefix in Redis (one per tenant).")
    tenant: str = Field("default", description="The tenant this process serves (CallContext).")
    protocol: Literal["auto", "legacy", "modern"] = Field(
        "auto", description="MCP protocol negotiation for upstream servers (see MCPSource)."
    )
    output_limit: int = Field(
        20_000,
        ge=1_000,
        description="Characters of output one reply carries (text; structured content at "
        "most twice that); more is cut with a marker saying how to get everything.",
    )
    workspace_quota_mb: int = Field(
        1024, ge=0, description="Disk /workspace (files/) may use; 0: no limit."
    )
    workspace_quota_files: int = Field(
        50_000, ge=0, description="Files and directories /workspace may hold; 0: no limit."
    )

    @field_validator("executor")
    @classmethod
    def _executor(cls, value: str) -> str:
        return _known("executor", value, ("subprocess", "inprocess", "sandbox", "ray"), "executors")

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: str) -> str:
        return _known("storage", value, ("file", "redis"), "storages")


def _known(what: str, value: str, builtin: tuple[str, ...], seam: str) -> str:
    """A built-in name, or one a plugin registered (plugins load on first need only)."""
    if value in builtin:
        return value
    from codemode.plugins import names

    from .messages import did_you_mean, shown

    known = [*builtin, *names(seam)]
    if value not in known:
        choices = ", ".join(shown(k) for k in known)
        raise ValueError(
            f"expected one of {choices}, got the string {shown(value)}"
            + did_you_mean(value, known, value=True)
        )
    return value


@dataclass(frozen=True)
class Section:
    """A part of the schema: the core settings (``name=""``) or one capability's section."""

    name: str
    model: type[BaseModel]
    env_aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """field -> further environment variable names read for it (documented)."""
    key_aliases: Mapping[str, str] = field(default_factory=dict)
    """top-level key of the file (or argument) -> field of this section."""
    strict_keys: bool = False
    """An unknown key in this section is an error, not a warning: for sections whose
    misspelt setting would silently leave a guard off (``{"policy": {"destructiv": ...}}``)."""

    def __post_init__(self) -> None:
        fields = set(self.model.model_fields)
        for name in (*self.env_aliases, *self.key_aliases.values()):
            if name not in fields:
                raise ValueError(f"section {self.name or 'core'!r}: alias for unknown field {name}")

    @property
    def label(self) -> str:
        return self.name or "settings"

    def dotted(self, field_name: str) -> str:
        return f"{self.name}.{field_name}" if self.name else field_name

    def env_names(self, field_name: str) -> tuple[str, ...]:
        """Its ``CODEMODE_...`` name first, then its aliases."""
        prefix = f"{ENV_PREFIX}{self.name.upper()}_" if self.name else ENV_PREFIX
        return (prefix + field_name.upper(), *self.env_aliases.get(field_name, ()))


CORE = Section("", Settings)


@dataclass(frozen=True)
class _Origin:
    """Where one value came from, for messages."""

    kind: Literal["file", "env", "argument"]
    name: str  # the environment variable or argument name
    keys: tuple[Key, ...] = ()  # its place in the file

    def where(self, doc: Document | None, sub: Sequence[Key] = ()) -> str:
        if self.kind == "file" and doc is not None:
            return doc.where([*self.keys, *sub])
        if self.kind == "env":
            return f"environment variable {self.name}"
        return f"argument {self.name}"


@dataclass
class Config:
    """The loaded configuration: core settings, each section, the upstream servers (when
    asked for), and what was ignored."""

    settings: Settings
    sections: dict[str, BaseModel]
    file: Path | None = None
    warnings: list[str] = field(default_factory=list)
    servers: dict[str, ServerConfig] = field(default_factory=dict)

    def section(self, name: str, model: type[M]) -> M:
        value = self.sections[name]
        if not isinstance(value, model):
            raise TypeError(f"section {name!r} is a {type(value).__name__}, not {model.__name__}")
        return value


def find_config_file(base: Path) -> Path | None:
    """The workspace's config file, or None; two of them is an error naming both."""
    found = [base / name for name in CONFIG_FILES if (base / name).exists()]
    if len(found) > 1:
        raise ConfigError(
            f"{base} has {' and '.join(p.name for p in found)}: keep one config file "
            "(codemode reads either config.json or config.yaml, never both)"
        )
    return found[0] if found else None


def load_config(
    file: Path | None,
    *,
    env: Mapping[str, str] | None = None,
    sections: Sequence[Section] = (),
    overrides: Mapping[str, Any] | None = None,
    strict: bool | None = None,
    servers_file: Path | None = None,
) -> Config:
    """Core settings and ``sections`` from ``file`` < ``env`` < ``overrides``.

    With ``servers_file`` (``mcp.json``), ``Config.servers`` holds the upstream servers of
    ``file`` and then of ``servers_file`` (which wins for a name in both).
    """
    env = os.environ if env is None else env
    if strict is None:
        strict = _strict_from(env)
    schema = [CORE, *sections]
    _check_schema(schema)
    doc = load_document(file) if file is not None and file.exists() else None
    loader = _Loader(schema, doc)
    unknown: list[str] = []
    if doc is not None:
        unknown = loader.read_file(doc.data)
        if loader.refused:
            raise ConfigError("\n".join(loader.refused))
    loader.read_env(env)
    loader.read_arguments({k: v for k, v in (overrides or {}).items() if v is not None})
    servers: dict[str, ServerConfig] = {}
    problems: list[str] = []
    if servers_file is not None:
        settings_keys = {*Settings.model_fields, *loader.by_name, *loader.aliases}
        try:
            servers = _read_servers(doc, servers_file, env, unknown, settings_keys)
        except ConfigError as exc:  # reported with the settings' problems and the warnings
            problems.append(str(exc))
    problems += loader.problems()
    warnings = [] if strict else [f"{message}; it is ignored" for message in unknown]
    for message in warnings:  # also beside an error: a misspelt key may be its cause
        log.warning("%s", message)
    if strict and unknown:
        problems = [*unknown, *problems, "(strict mode: unknown keys are errors, not warnings)"]
    if problems:
        raise ConfigError("\n".join(problems))
    built = loader.built
    core = built.pop("")
    assert isinstance(core, Settings)
    return Config(core, built, doc.path if doc is not None else None, warnings, servers)


def _strict_from(env: Mapping[str, str]) -> bool:
    raw = env.get(STRICT_ENV, "").strip().lower()
    if raw in ("", "0", "false", "no", "off"):
        return False
    if raw in ("1", "true", "yes", "on"):
        return True
    raise ConfigError(f"environment variable {STRICT_ENV}: expected true or false, got {raw!r}")


def _read_servers(
    doc: Document | None,
    servers_file: Path,
    env: Mapping[str, str],
    unknown: list[str],
    settings_keys: set[str],
) -> dict[str, ServerConfig]:
    """The config file's servers, then ``mcp.json``'s; unknown keys go to ``unknown``."""
    servers: dict[str, ServerConfig] = {}
    extra = load_document(servers_file) if servers_file.exists() else None
    for source in (doc, extra):
        if source is not None:
            servers.update(
                parse_servers(source.data, source=str(source.path), env=env, doc=source,
                              warnings=unknown)
            )  # fmt: skip
    if extra is not None:
        for key in extra.data:
            if key in SERVERS_FILE_KEYS:
                continue
            where = extra.where([key], key=True)
            if key in settings_keys:
                unknown.append(f"{where}: {key!r} belongs in config.json, not {extra.path.name}")
            else:
                hint = did_you_mean(key, SERVER_KEYS)
                unknown.append(f"{where}: unknown key {key!r}{hint}")
    return servers


def load_settings(
    config_file: Path | None = None,
    *,
    env: Mapping[str, str] | None = None,
    strict: bool | None = None,
    **overrides: Any,
) -> Settings:
    """Only the core settings (``load_config`` without capability sections)."""
    return load_config(config_file, env=env, overrides=overrides, strict=strict).settings


def _check_schema(schema: Sequence[Section]) -> None:
    seen: dict[str, str] = {}
    for section in schema:
        names = [
            *(f"key {k}" for k in section.key_aliases),
            *(f"environment variable {v}" for f in section.model.model_fields
              for v in section.env_names(f)),
        ]  # fmt: skip
        if section.name:
            names.append(f"key {section.name}")
        else:
            names += [f"key {f}" for f in section.model.model_fields]
        for name in names:
            if name in seen:
                raise ValueError(f"{name} is claimed by {seen[name]} and {section.label}")
            seen[name] = section.label


class _Loader:
    """Collects each section's raw values and where they came from, then validates."""

    def __init__(self, schema: Sequence[Section], doc: Document | None) -> None:
        self.schema = schema
        self.doc = doc
        self.values: dict[str, dict[str, Any]] = {s.name: {} for s in schema}
        self.origins: dict[str, dict[str, _Origin]] = {s.name: {} for s in schema}
        self.by_name = {s.name: s for s in schema if s.name}
        self.aliases = {k: (s, f) for s in schema for k, f in s.key_aliases.items()}
        self.refused: list[str] = []
        """Unknown keys of ``strict_keys`` sections (errors whatever ``strict`` says)."""

    def _set(self, section: Section, name: str, value: Any, origin: _Origin) -> None:
        self.values[section.name][name] = value
        self.origins[section.name][name] = origin

    def _top_level(self, key: str) -> tuple[Section, str] | Section | None:
        """What a top-level key (or argument) names: a core field, a section, or an alias."""
        if key in Settings.model_fields:
            return CORE, key
        if key in self.by_name:
            return self.by_name[key]
        return self.aliases.get(key)

    def read_file(self, data: Mapping[str, Any]) -> list[str]:
        """Take the file's values; returns a message per unknown key."""
        assert self.doc is not None
        unknown: list[str] = []
        candidates = [*Settings.model_fields, *self.by_name, *self.aliases, *SERVER_KEYS]
        for key, value in data.items():
            if key in SERVER_KEYS or key in IGNORED_KEYS:
                continue
            target = self._top_level(key)
            if target is None:
                unknown.append(self._unknown(key, candidates, (key,), "setting"))
            elif isinstance(target, Section):
                value = _shorthand(target, value)
                if not isinstance(value, dict):
                    where = self.doc.where([key])
                    raise ConfigError(
                        f"{where}: {key}: expected an object (the {key} section), "
                        f"got {kind_of(value)}"
                    )
                fields = list(target.model.model_fields)
                for sub, subvalue in value.items():
                    if sub in fields:
                        self._set(target, sub, subvalue, _Origin("file", "", (key, sub)))
                    else:
                        label = f"setting of the {key} section"
                        message = self._unknown(sub, fields, (key, sub), label)
                        if target.strict_keys:
                            message = message.replace("; it is ignored", "; fix or remove it")
                            self.refused.append(message)
                        else:
                            unknown.append(message)
            else:
                section, name = target
                self._set(section, name, value, _Origin("file", "", (key,)))
        return unknown

    def _unknown(self, key: str, candidates: list[str], keys: tuple[Key, ...], what: str) -> str:
        assert self.doc is not None
        hint = did_you_mean(key, candidates)
        return f"{self.doc.where(keys, key=True)}: unknown {what} {key!r}{hint}"

    def read_env(self, env: Mapping[str, str]) -> None:
        for section in self.schema:
            for name, info in section.model.model_fields.items():
                for var in section.env_names(name):
                    raw = env.get(var)
                    if raw is None or raw == "":
                        continue
                    value = _env_value(raw, info.annotation, var, section.dotted(name))
                    self._set(section, name, value, _Origin("env", var))
                    break

    def read_arguments(self, overrides: Mapping[str, Any]) -> None:
        for key, value in overrides.items():
            target = self._top_level(key)
            if target is None:
                raise ConfigError(f"argument {key}: not a setting of codemode")
            if isinstance(target, Section):
                value = _shorthand(target, value)
                if not isinstance(value, Mapping):
                    raise ConfigError(f"argument {key}: expected a mapping of its settings")
                for sub, subvalue in value.items():
                    self._set(target, sub, subvalue, _Origin("argument", f"{key}.{sub}"))
            else:
                self._set(target[0], target[1], value, _Origin("argument", key))

    def problems(self) -> list[str]:
        """Validate every section (kept in ``built``); a message per invalid value."""
        self.built: dict[str, BaseModel] = {}
        problems: list[str] = []
        for section in self.schema:
            try:
                self.built[section.name] = section.model.model_validate(self.values[section.name])
            except ValidationError as exc:
                for err in exc.errors():
                    problems.append(self._describe(section, err))
        return problems

    def _describe(self, section: Section, err: Mapping[str, Any]) -> str:
        loc = tuple(err.get("loc", ()))
        name = str(loc[0]) if loc else ""
        path = section.dotted(name) + "".join(f"[{p!r}]" for p in loc[1:])
        origin = self.origins[section.name].get(name)
        where = origin.where(self.doc, loc[1:]) if origin is not None else "defaults"
        return f"{where}: {path}: {explain(err, section.model)}"


def _shorthand(section: Section, value: Any) -> Any:
    """A scalar written for a whole section (``"privacy": true``), as the object its
    model's ``shorthand`` classmethod makes of it; other values are returned as they are."""
    make = getattr(section.model, "shorthand", None)
    return make(value) if callable(make) and not isinstance(value, Mapping) else value


def _env_value(raw: str, annotation: Any, var: str, dotted: str) -> Any:
    """An environment string for pydantic: JSON for lists/objects, commas for lists."""
    text = raw.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"environment variable {var}: {dotted}: not JSON ({exc})") from None
    if _is_sequence(annotation):
        return [part.strip() for part in text.split(",") if part.strip()]
    return raw


def _is_sequence(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, set, frozenset):
        return True
    return any(_is_sequence(arg) for arg in typing.get_args(annotation)) if origin else False


__all__ = [
    "CONFIG_FILE",
    "CONFIG_FILES",
    "CORE",
    "ENV_PREFIX",
    "Config",
    "Section",
    "Settings",
    "find_config_file",
    "load_config",
    "load_settings",
]
