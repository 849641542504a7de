"""The ``llm`` section: which model drives the agent, and where its settings come from.

Precedence, lowest to highest::

    defaults  <  the workspace's config file ("llm" section of config.json / config.yaml)
              <  a .env file (the workspace root's, or --env-file)
              <  the process environment  <  arguments (create_agent(llm_model=...))

Environment names are the seeds' (``LLM_MODEL``, ``OPENAI_API_KEY``, ...; see ``ENV_ALIASES``)
plus ``CODEMODE_LLM_<FIELD>`` for every field. A ``.env`` file is read only from the
workspace root or from a file named explicitly, never from the current directory: code an
agent runs can write files in its working directory, and a planted ``OPENAI_BASE_URL``
there would send the host's API key to whoever planted it. The ``.env`` values are parsed,
not exported: ``os.environ`` is left untouched, so nothing reaches a worker's environment.

Every resolved setting remembers where it came from, so a validation error names the
field and its source (``.env /home/me/.codemode/.env: LLM_TEMPERATURE: ...``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

from codemode.config import find_config_file, load_document
from codemode.errors import ConfigError

SECTION = "llm"
ENV_PREFIX = "CODEMODE_LLM_"
DOTENV = ".env"

Provider = Literal["openai", "azure_openai", "anthropic", "sampling", "none"]
PROVIDER_ALIASES = {"azure": "azure_openai", "azure-openai": "azure_openai", "claude": "anthropic"}

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-6"}
DEFAULT_AZURE_API_VERSION = "2024-08-01-preview"

# Seeds' names -> field. Later names win over earlier ones for the same field.
ENV_ALIASES: dict[str, str] = {
    "LLM_PROVIDER": "provider",
    "LLM_MODEL": "model",
    "LLM_TEMPERATURE": "temperature",
    "LLM_MAX_TOKENS": "max_tokens",
    "OPENAI_API_KEY": "openai_api_key",
    "OPENAI_BASE_URL": "openai_base_url",
    "AZURE_OPENAI_ENDPOINT": "azure_endpoint",
    "AZURE_OPENAI_API_KEY": "azure_api_key",
    "AZURE_OPENAI_CHAT_DEPLOYMENT_NAME": "azure_deployment",
    "AZURE_OPENAI_DEPLOYMENT_NAME": "azure_deployment",
    "AZURE_OPENAI_API_VERSION": "azure_api_version",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "ANTHROPIC_BASE_URL": "anthropic_base_url",
}

__all__ = [
    "ENV_ALIASES",
    "LLMConfig",
    "ResolvedLLM",
    "resolve_llm_config",
]


class LLMConfig(BaseModel):
    """Settings of the agent's model (the ``llm`` section)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: Provider | None = Field(
        None,
        description="openai, azure_openai, anthropic, sampling (the MCP client's model) or none; "
        "unset: the first provider whose key is configured, else none (rule-based fallback).",
    )
    enabled: bool = Field(True, description="False: never call a model (rule-based fallback).")
    model: str | None = Field(None, description="Model name (Azure: the deployment if unset).")
    api_key: SecretStr | None = Field(None, description="Key for the chosen provider.")
    openai_api_key: SecretStr | None = None
    azure_api_key: SecretStr | None = None
    anthropic_api_key: SecretStr | None = None
    base_url: str | None = Field(None, description="Endpoint of the chosen provider.")
    openai_base_url: str | None = None
    anthropic_base_url: str | None = None
    azure_endpoint: str | None = None
    azure_deployment: str | None = None
    azure_api_version: str = DEFAULT_AZURE_API_VERSION
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int = Field(2000, gt=0, description="Most tokens per model reply.")
    token_param: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        "auto",
        description="How the reply limit is sent to OpenAI/Azure; auto switches to "
        "max_completion_tokens when a model refuses max_tokens.",
    )
    mode: Literal["auto", "tools", "fenced"] = Field(
        "auto", description="tools: native tool calling (run_code); fenced: ```python blocks."
    )
    timeout: float = Field(120.0, gt=0, description="Seconds per model request.")
    max_retries: int = Field(3, ge=0, le=20, description="Retries on 429/5xx/timeouts.")
    max_steps: int = Field(12, ge=1, le=200, description="Most model turns per task.")
    max_total_tokens: int | None = Field(None, gt=0, description="Token budget per task.")
    max_seconds: float = Field(600.0, gt=0, description="Wall-time limit per task.")
    run_timeout: float | None = Field(None, gt=0, description="Seconds per code run.")

    @field_validator("provider", mode="before")
    @classmethod
    def _provider_alias(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip().lower()
            return PROVIDER_ALIASES.get(v, v) or None
        return v

    @field_validator("base_url", "openai_base_url", "anthropic_base_url", "azure_endpoint")
    @classmethod
    def _http_url(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        if not v.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL, got {v!r}")
        return v

    # -- derived --------------------------------------------------------------------
    @property
    def effective_provider(self) -> Provider:
        """The provider to use: the configured one, or the first with a key, or none."""
        if not self.enabled:
            return "none"
        if self.provider is not None:
            return self.provider
        if self.azure_endpoint and (self.azure_api_key or self.api_key):
            return "azure_openai"
        if self.openai_api_key or (self.api_key and (self.base_url or self.openai_base_url)):
            return "openai"
        if self.anthropic_api_key:
            return "anthropic"
        return "none"

    def key_for(self, provider: str) -> SecretStr | None:
        specific = {
            "openai": self.openai_api_key,
            "azure_openai": self.azure_api_key,
            "anthropic": self.anthropic_api_key,
        }.get(provider)
        return self.api_key or specific

    def url_for(self, provider: str) -> str | None:
        """The endpoint for ``provider``: a provider's own variable never serves another."""
        specific = {"openai": self.openai_base_url, "anthropic": self.anthropic_base_url}
        return self.base_url or specific.get(provider)

    @property
    def effective_model(self) -> str:
        provider = self.effective_provider
        if self.model:
            return self.model
        if provider == "azure_openai" and self.azure_deployment:
            return self.azure_deployment
        return DEFAULT_MODELS.get(provider, "")


class ResolvedLLM(BaseModel):
    """An ``LLMConfig`` plus where each of its fields came from."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: LLMConfig
    sources: dict[str, str]

    def source_of(self, field: str) -> str:
        return self.sources.get(field, "default")


def _from_env(env: Mapping[str, str], origin: str) -> tuple[dict[str, Any], dict[str, str]]:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name, field in ENV_ALIASES.items():
        value = env.get(name)
        if value is not None and value.strip() != "":
            values[field] = value
            sources[field] = f"{origin}: {name}"
    for field in LLMConfig.model_fields:
        name = ENV_PREFIX + field.upper()
        value = env.get(name)
        if value is not None and value.strip() != "":
            values[field] = value
            sources[field] = f"{origin}: {name}"
    return values, sources


def _read_dotenv(path: Path) -> dict[str, str]:
    from dotenv import dotenv_values

    if not path.is_file():
        raise ConfigError(f"{path}: the env file does not exist")
    try:
        raw = dotenv_values(path, interpolate=False)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the env file: {exc}") from exc
    return {k: v for k, v in raw.items() if v is not None}


def resolve_llm_config(
    base: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    env_file: str | os.PathLike[str] | None = None,
    config: LLMConfig | None = None,
    **arguments: Any,
) -> ResolvedLLM:
    """Resolve the ``llm`` section (see the module doc for the precedence).

    ``base`` is the workspace directory (its config file and ``.env`` are read when they
    exist; ``None``: no workspace). ``arguments`` are field names, with or without the
    seeds' ``llm_`` prefix (``llm_model="gpt-4o"``); ``None`` values are ignored.
    ``config`` is an ``LLMConfig`` taken as arguments (fields explicitly set in it).
    """
    env = os.environ if env is None else env
    layers: list[tuple[dict[str, Any], dict[str, str]]] = []
    root = Path(base).expanduser() if base is not None else None
    if root is not None:
        config_file = find_config_file(root)
        if config_file is not None:
            section = load_document(config_file).data.get(SECTION) or {}
            if not isinstance(section, dict):
                raise ConfigError(f"{config_file}: {SECTION}: expected an object")
            layers.append((section, {k: f"{config_file}: {SECTION}.{k}" for k in section}))
    dotenv_path = Path(env_file).expanduser() if env_file is not None else None
    if dotenv_path is None and root is not None and (root / DOTENV).is_file():
        dotenv_path = root / DOTENV
    if dotenv_path is not None:
        layers.append(_from_env(_read_dotenv(dotenv_path), f".env {dotenv_path}"))
    layers.append(_from_env(env, "environment"))
    args: dict[str, Any] = {}
    arg_sources: dict[str, str] = {}
    if config is not None:
        for field in config.model_fields_set:
            args[field] = getattr(config, field)
            arg_sources[field] = "argument llm"
    for name, value in arguments.items():
        if value is None:
            continue
        field = name.removeprefix("llm_")
        if field == "azure_deployment_name":
            field = "azure_deployment"
        if field not in LLMConfig.model_fields:
            raise ConfigError(f"unknown LLM setting {name!r}; known: {', '.join(_arg_names())}")
        args[field] = value
        arg_sources[field] = f"argument {name}"
    layers.append((args, arg_sources))

    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for values, origin in layers:
        merged.update(values)
        sources.update(origin)
    try:
        resolved = LLMConfig.model_validate(merged)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            field = str(err["loc"][0]) if err.get("loc") else ""
            where = sources.get(field, f"{SECTION}.{field}")
            problems.append(f"{where}: {err['msg']}")
        raise ConfigError("invalid LLM settings: " + "; ".join(problems)) from None
    return ResolvedLLM(config=resolved, sources=sources)


def _arg_names() -> list[str]:
    return [f"llm_{f}" for f in LLMConfig.model_fields]
