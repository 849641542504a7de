"""One config schema: core settings and capability sections, from a file, env and arguments."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict

from codemode import assembly
from codemode.capability import Capability
from codemode.config import CORE, Section, find_config_file, load_config
from codemode.errors import ConfigError
from codemode.memory.capability import MEMORY, MemoryConfig
from codemode.workspace import Workspace

REPO = Path(__file__).resolve().parents[1]


class AgentConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    provider: str = "openai"
    api_key: str | None = None
    max_turns: int = 10


AGENT = Section(
    "agent",
    AgentConfig,
    env_aliases={"provider": ("LLM_PROVIDER",), "api_key": ("OPENAI_API_KEY",)},
)


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_yaml_and_json_config_files_mean_the_same(tmp_path: Path) -> None:
    js = write(tmp_path / "config.json", '{"run_timeout": 5, "agent": {"max_turns": 3}}')
    ym = write(tmp_path / "config.yaml", "run_timeout: 5\nagent:\n  max_turns: 3\n")
    a = load_config(js, env={}, sections=[AGENT])
    b = load_config(ym, env={}, sections=[AGENT])
    assert a.settings == b.settings and a.sections == b.sections
    assert a.section("agent", AgentConfig).max_turns == 3


def test_a_workspace_with_both_config_files_is_refused_naming_both(tmp_path: Path) -> None:
    write(tmp_path / "config.json", "{}")
    write(tmp_path / "config.yaml", "{}")
    with pytest.raises(ConfigError, match=r"config\.json and config\.yaml: keep one"):
        find_config_file(tmp_path)
    with pytest.raises(ConfigError, match="keep one config file"):
        Workspace.open(tmp_path, env={})


def test_a_bad_value_in_json_names_file_line_column_and_field(tmp_path: Path) -> None:
    cfg = write(
        tmp_path / "config.json",
        '{\n  /* a comment that must not shift columns */ "run_timeout": -1,\n'
        '  "agent": {"max_turns": "many"}\n}',
    )
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={}, sections=[AGENT])
    lines = str(info.value).splitlines()
    assert lines == [
        f"{cfg}:2:62: run_timeout: must be greater than 0, got -1",
        f'{cfg}:3:26: agent.max_turns: expected a whole number, got the string "many"',
    ]


def test_a_bad_value_in_yaml_names_file_line_column_and_field(tmp_path: Path) -> None:
    cfg = write(tmp_path / "config.yaml", "agent:\n  max_turns: [1]\nexecutor: subproces\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={}, sections=[AGENT])
    assert str(info.value).splitlines() == [
        f'{cfg}:3:11: executor: expected one of "subprocess", "inprocess", "sandbox", "ray", '
        'got the string "subproces" (did you mean "subprocess"?)',
        f"{cfg}:2:14: agent.max_turns: expected a whole number, got a list",
    ]


def test_broken_yaml_names_the_place(tmp_path: Path) -> None:
    cfg = write(tmp_path / "config.yaml", "agent:\n  max_turns: [1\n")
    with pytest.raises(ConfigError, match=re.escape(f"{cfg}:3:1: invalid YAML")):
        load_config(cfg, env={})


def test_errors_from_the_environment_and_arguments_name_them(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"environment variable LLM_PROVIDER: agent\.provider"):
        load_config(None, env={"LLM_PROVIDER": "[1]"}, sections=[AGENT])
    env = {"CODEMODE_AGENT_MAX_TURNS": "lots"}
    with pytest.raises(ConfigError, match="environment variable CODEMODE_AGENT_MAX_TURNS: agent"):
        load_config(None, env=env, sections=[AGENT])
    with pytest.raises(ConfigError, match="argument run_timeout: run_timeout: expected a number"):
        load_config(None, env={}, overrides={"run_timeout": "soon"})
    with pytest.raises(ConfigError, match=r"argument agent\.max_turns: agent\.max_turns"):
        load_config(None, env={}, sections=[AGENT], overrides={"agent": {"max_turns": "x"}})
    with pytest.raises(ConfigError, match="argument run_timout: not a setting"):
        load_config(None, env={}, overrides={"run_timout": 1})


def test_sections_read_file_then_env_then_aliases_then_arguments(tmp_path: Path) -> None:
    cfg = write(tmp_path / "config.json", '{"agent": {"provider": "file", "max_turns": 1}}')
    env = {"OPENAI_API_KEY": "sk-alias", "CODEMODE_AGENT_MAX_TURNS": "2", "LLM_PROVIDER": "env"}
    agent = load_config(cfg, env=env, sections=[AGENT]).section("agent", AgentConfig)
    assert (agent.provider, agent.api_key, agent.max_turns) == ("env", "sk-alias", 2)
    env["CODEMODE_AGENT_PROVIDER"] = "primary"  # the CODEMODE_ name wins over an alias
    over = {"agent": {"max_turns": 9}}
    agent = load_config(cfg, env=env, sections=[AGENT], overrides=over).section(
        "agent", AgentConfig
    )
    assert (agent.provider, agent.max_turns) == ("primary", 9)


def test_the_memory_section_keeps_its_old_top_level_keys_and_variables(tmp_path: Path) -> None:
    write(tmp_path / "config.json", '{"deps": ["six==1.17.0"], "memory": {"install_deps": true}}')
    env = {"CODEMODE_ALLOW_RUNTIME_DEPS": "false", "CODEMODE_MEMORY_QUOTA_MB": "64"}
    memory = Workspace.open(tmp_path, env=env).section(MEMORY)
    assert memory == MemoryConfig(
        deps=("six==1.17.0",),
        install_deps=True,
        allow_runtime_deps=False,
        quota_mb=64,
    )
    # Source builds are gone: asking for them is an error that names where it was asked.
    with pytest.raises(ConfigError, match=r"CODEMODE_ALLOW_SOURCE_BUILDS: memory\.allow_source"):
        Workspace.open(tmp_path, env={"CODEMODE_ALLOW_SOURCE_BUILDS": "1"})


def test_lists_from_the_environment_are_json_or_comma_separated(tmp_path: Path) -> None:
    for raw in ('["six", "tomli==2.0.2"]', "six, tomli==2.0.2"):
        ws = Workspace.open(tmp_path, env={"CODEMODE_MEMORY_DEPS": raw})
        assert ws.section(MEMORY).deps == ("six", "tomli==2.0.2")


def test_unknown_keys_warn_with_a_did_you_mean_and_fail_when_strict(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cfg = write(tmp_path / "config.json", '{"run_timout": 5,\n "memory": {"dep": ["six"]}}')
    with caplog.at_level(logging.WARNING, logger="codemode.config"):
        ws = Workspace.open(tmp_path, env={})
    assert ws.warnings == [
        f"{cfg}:1:2: unknown setting 'run_timout' (did you mean 'run_timeout'?); it is ignored",
        f"{cfg}:2:13: unknown setting of the memory section 'dep' (did you mean 'deps'?); "
        "it is ignored",
    ]
    assert ws.warnings[0] in caplog.text
    with pytest.raises(ConfigError) as info:
        Workspace.open(tmp_path, env={}, strict=True)
    assert str(info.value).splitlines() == [
        *(w.removesuffix("; it is ignored") for w in ws.warnings),
        "(strict mode: unknown keys are errors, not warnings)",
    ]
    with pytest.raises(ConfigError):
        Workspace.open(tmp_path, env={"CODEMODE_STRICT": "1"})


def test_unknown_keys_of_a_strict_keys_section_are_errors_even_when_not_strict(
    tmp_path: Path,
) -> None:
    cfg = write(tmp_path / "config.json", '{"agent": {"max_turn": 3}, "run_timout": 5}')
    lenient = load_config(cfg, env={}, sections=[AGENT])
    assert len(lenient.warnings) == 2
    guarded = Section("agent", AgentConfig, strict_keys=True)
    with pytest.raises(ConfigError) as info:
        load_config(cfg, env={}, sections=[guarded])
    assert str(info.value) == (
        f"{cfg}:1:12: unknown setting of the agent section 'max_turn' (did you mean 'max_turns'?)"
    )


def test_a_section_must_be_an_object(tmp_path: Path) -> None:
    cfg = write(tmp_path / "config.json", '{"memory": ["six"]}')
    with pytest.raises(ConfigError, match=re.escape(f"{cfg}:1:12: memory: expected an object")):
        Workspace.open(tmp_path, env={})


def test_two_sections_cannot_claim_one_name() -> None:
    twin = Section("other", AgentConfig, env_aliases={"provider": ("LLM_PROVIDER",)})
    with pytest.raises(ValueError, match="environment variable LLM_PROVIDER is claimed"):
        load_config(None, env={}, sections=[AGENT, twin])
    clash = Capability(name="run_timeout", config=AgentConfig)
    with pytest.raises(ValueError, match="key run_timeout is claimed"):
        load_config(None, env={}, sections=[clash.section])


def test_every_setting_and_its_variables_are_documented() -> None:
    doc = (REPO / "docs" / "configuration.md").read_text()
    schema = [CORE, *(cap.section for cap in assembly.installed())]
    for section in schema:
        for name in section.model.model_fields:
            assert f"`{section.dotted(name)}`" in doc, section.dotted(name)
            for var in section.env_names(name):
                assert f"`{var}`" in doc, var
        for key in section.key_aliases:
            assert f"`{key}`" in doc, key


def test_every_key_of_other_clients_is_documented_with_what_codemode_does() -> None:
    from codemode.config.servers import FOREIGN_SERVER_KEYS

    doc = (REPO / "docs" / "configuration.md").read_text()
    rows = [line for line in doc.splitlines() if line.startswith("| `")]
    for key, (_, advice) in FOREIGN_SERVER_KEYS.items():
        [row] = [r for r in rows if f"`{key}`" in r.split("|")[1]]
        assert (advice.split()[0] in row) if advice else "ignored" in row, key
