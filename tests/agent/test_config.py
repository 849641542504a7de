"""The llm section: precedence, the seeds' names, errors that name field and source, and
where a .env file may (and may not) come from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from codemode.agent import LLMConfig, create_agent, resolve_llm_config
from codemode.agent.config import ENV_ALIASES
from codemode.errors import ConfigError

ALL_SEED_NAMES = {
    "LLM_PROVIDER": ("provider", "azure"),
    "LLM_MODEL": ("model", "gpt-4o"),
    "LLM_TEMPERATURE": ("temperature", "0.3"),
    "LLM_MAX_TOKENS": ("max_tokens", "1500"),
    "OPENAI_API_KEY": ("openai_api_key", "sk-o"),
    "OPENAI_BASE_URL": ("openai_base_url", "http://127.0.0.1:9/v1"),
    "AZURE_OPENAI_ENDPOINT": ("azure_endpoint", "https://r.openai.azure.com"),
    "AZURE_OPENAI_API_KEY": ("azure_api_key", "az-key"),
    "AZURE_OPENAI_DEPLOYMENT_NAME": ("azure_deployment", "dep"),
    "AZURE_OPENAI_API_VERSION": ("azure_api_version", "2025-01-01"),
    "ANTHROPIC_API_KEY": ("anthropic_api_key", "sk-ant"),
}


def test_every_seed_environment_name_sets_its_field() -> None:
    env = {name: value for name, (_, value) in ALL_SEED_NAMES.items()}
    cfg = resolve_llm_config(env=env).config
    assert cfg.provider == "azure_openai" and cfg.model == "gpt-4o"
    assert cfg.temperature == 0.3 and cfg.max_tokens == 1500
    for name, (field, value) in ALL_SEED_NAMES.items():
        got = getattr(cfg, field)
        got = got.get_secret_value() if hasattr(got, "get_secret_value") else got
        if field not in ("provider", "temperature", "max_tokens"):
            assert got == value, name
    assert set(ALL_SEED_NAMES) <= set(ENV_ALIASES)


def test_the_chat_deployment_name_is_an_alias_too() -> None:
    cfg = resolve_llm_config(env={"AZURE_OPENAI_CHAT_DEPLOYMENT_NAME": "chat"}).config
    assert cfg.azure_deployment == "chat"


def test_precedence_is_defaults_file_dotenv_environment_arguments(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(
        json.dumps(
            {"llm": {"model": "file", "max_tokens": 111, "temperature": 0.1, "max_steps": 4}}
        )
    )
    (tmp_path / ".env").write_text("LLM_MODEL=dotenv\nLLM_MAX_TOKENS=222\nLLM_TEMPERATURE=0.2\n")
    env = {"LLM_MODEL": "environment", "LLM_MAX_TOKENS": "333"}
    resolved = resolve_llm_config(tmp_path, env=env, llm_model="argument")
    cfg = resolved.config
    assert (cfg.model, cfg.max_tokens, cfg.temperature, cfg.max_steps) == ("argument", 333, 0.2, 4)
    assert cfg.max_seconds == LLMConfig.model_validate({}).max_seconds  # default
    assert resolved.source_of("model") == "argument llm_model"
    assert resolved.source_of("max_tokens") == "environment: LLM_MAX_TOKENS"
    assert resolved.source_of("temperature") == f".env {tmp_path / '.env'}: LLM_TEMPERATURE"
    assert resolved.source_of("max_steps") == f"{tmp_path / 'config.json'}: llm.max_steps"
    assert resolved.source_of("max_seconds") == "default"


def test_a_bad_value_names_the_field_and_the_source_it_came_from(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"environment: LLM_TEMPERATURE: .*number"):
        resolve_llm_config(env={"LLM_TEMPERATURE": "hot"})
    (tmp_path / "config.yaml").write_text("llm:\n  max_steps: 0\n")
    with pytest.raises(ConfigError, match=r"config\.yaml: llm\.max_steps: .*greater than"):
        resolve_llm_config(tmp_path, env={})
    with pytest.raises(ConfigError, match=r"argument llm_base_url: .*http"):
        resolve_llm_config(env={}, llm_base_url="ftp://x")
    with pytest.raises(ConfigError, match="unknown LLM setting 'llm_modle'"):
        resolve_llm_config(env={}, llm_modle="x")


def test_the_config_may_be_yaml_but_not_both_formats(tmp_path: Path) -> None:
    (tmp_path / "config.yaml").write_text("llm:\n  provider: anthropic\n  model: claude-x\n")
    assert resolve_llm_config(tmp_path, env={}).config.provider == "anthropic"
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(
        ConfigError, match=r"has config\.json and config\.yaml: keep one config file"
    ):
        resolve_llm_config(tmp_path, env={})


def test_the_workspace_settings_accept_the_llm_section(tmp_path: Path) -> None:
    from codemode.workspace import Workspace

    (tmp_path / "config.json").write_text(json.dumps({"llm": {"model": "m"}, "run_timeout": 9}))
    assert Workspace.open(tmp_path, env={}).settings.run_timeout == 9


def test_a_dotenv_in_the_current_directory_is_never_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cwd = tmp_path / "project"
    cwd.mkdir()
    (cwd / ".env").write_text("OPENAI_BASE_URL=http://attacker.invalid/v1\nLLM_MODEL=planted\n")
    monkeypatch.chdir(cwd)
    ws = tmp_path / "ws"
    ws.mkdir()
    cfg = resolve_llm_config(ws, env={}).config
    assert cfg.openai_base_url is None and cfg.model is None
    assert "OPENAI_BASE_URL" not in os.environ  # nothing was exported either


def test_an_explicit_env_file_is_read_and_not_exported(tmp_path: Path) -> None:
    env_file = tmp_path / "llm.env"
    env_file.write_text('OPENAI_API_KEY="sk-from-file"\nexport LLM_MODEL=gpt-x\n')
    cfg = resolve_llm_config(env={}, env_file=env_file).config
    assert cfg.openai_api_key is not None
    assert cfg.openai_api_key.get_secret_value() == "sk-from-file" and cfg.model == "gpt-x"
    assert "sk-from-file" not in repr(cfg) and "sk-from-file" not in str(cfg.model_dump())
    assert os.environ.get("OPENAI_API_KEY") != "sk-from-file"
    with pytest.raises(ConfigError, match="does not exist"):
        resolve_llm_config(env={}, env_file=tmp_path / "missing.env")


def test_one_providers_endpoint_never_serves_another() -> None:
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:1/v1", "ANTHROPIC_API_KEY": "sk-ant"}
    cfg = resolve_llm_config(env=env).config
    assert cfg.effective_provider == "anthropic"
    assert cfg.url_for("anthropic") is None  # the official endpoint, not OpenAI's variable


def test_the_provider_is_picked_from_the_configured_keys() -> None:
    assert resolve_llm_config(env={}).config.effective_provider == "none"
    assert resolve_llm_config(env={"OPENAI_API_KEY": "k"}).config.effective_provider == "openai"
    azure = {"AZURE_OPENAI_ENDPOINT": "https://x.example", "AZURE_OPENAI_API_KEY": "k"}
    assert resolve_llm_config(env=azure).config.effective_provider == "azure_openai"
    off = resolve_llm_config(env={"OPENAI_API_KEY": "k"}, llm_enabled=False).config
    assert off.effective_provider == "none"


def test_create_agent_takes_programmatic_settings_without_any_file(tmp_path: Path) -> None:
    agent = create_agent(
        base=tmp_path,
        env={},
        llm_provider="openai",
        llm_model="gpt-4o-mini",
        llm_api_key="sk-prog",
        llm_base_url="http://127.0.0.1:9/v1",
        llm_temperature=0.3,
        llm_max_tokens=2000,
        max_steps=5,
    )
    with agent:
        assert agent.provider == "openai" and agent.config.max_steps == 5
        assert agent.model is not None and agent.model.model == "gpt-4o-mini"


def test_missing_provider_settings_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs an API key: set OPENAI_API_KEY"):
        create_agent(base=tmp_path, env={}, llm_provider="openai")
    with pytest.raises(ConfigError, match="needs an endpoint: set AZURE_OPENAI_ENDPOINT"):
        create_agent(base=tmp_path, env={}, llm_provider="azure", llm_api_key="k")
    with pytest.raises(ConfigError, match="unknown create_agent argument"):
        create_agent(base=tmp_path, env={}, state_file="x.json")
