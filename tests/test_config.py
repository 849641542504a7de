"""Settings precedence and the mcpServers format users already have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode.config import (
    RemoteServerConfig,
    StdioServerConfig,
    expand_vars,
    load_json_file,
    load_servers,
    load_settings,
    parse_servers,
    strip_json_comments,
)
from codemode.errors import ConfigError

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {
            "command": "npx",
            "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"],
        },
        "github": {
            "command": "docker",
            "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
            "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "${GITHUB_TOKEN}"},
        },
    }
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


# ---------------------------------------------------------------------------- servers


def test_claude_desktop_config_parses_as_stdio_servers() -> None:
    servers = parse_servers(CLAUDE_DESKTOP, env={"GITHUB_TOKEN": "t0k"})
    fs, gh = servers["filesystem"], servers["github"]
    assert isinstance(fs, StdioServerConfig) and fs.command == "npx" and fs.args[0] == "-y"
    assert isinstance(gh, StdioServerConfig)
    assert gh.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "t0k"}
    assert fs.name == "filesystem" and fs.enabled and fs.timeout is None


@pytest.mark.parametrize(
    ("raw", "transport"),
    [
        ({"url": "http://127.0.0.1:8000/mcp"}, "streamable-http"),
        ({"type": "http", "url": "http://h/mcp"}, "streamable-http"),
        ({"type": "streamable-http", "url": "http://h/mcp"}, "streamable-http"),
        ({"type": "streamableHttp", "url": "http://h/mcp"}, "streamable-http"),
        ({"transport": "sse", "url": "http://h/sse"}, "sse"),
        ({"type": "stdio", "command": "x"}, "stdio"),
    ],
)
def test_remote_and_stdio_transports_are_recognised_in_every_spelling(
    raw: dict[str, str], transport: str
) -> None:
    assert parse_servers({"mcpServers": {"s": raw}}, env={})["s"].transport == transport


def test_remote_server_keeps_headers_with_expanded_secrets() -> None:
    raw = {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}
    cfg = parse_servers({"mcpServers": {"api": raw}}, env={"TOKEN": "abc"})["api"]
    assert isinstance(cfg, RemoteServerConfig)
    assert cfg.headers == {"Authorization": "Bearer abc"}


def test_vscode_servers_key_is_accepted() -> None:
    assert "x" in parse_servers({"servers": {"x": {"command": "run-x"}}}, env={})


def test_per_server_timeout_enabled_include_exclude_are_read() -> None:
    raw = {
        "command": "x",
        "timeout": 5,
        "enabled": False,
        "include": "get_*",
        "exclude": ["get_secret"],
    }
    cfg = parse_servers({"mcpServers": {"s": raw}}, env={})["s"]
    assert cfg.timeout == 5 and not cfg.enabled
    assert cfg.allows("get_weather") and not cfg.allows("get_secret") and not cfg.allows("put")


def test_cline_disabled_flag_means_not_enabled() -> None:
    cfg = parse_servers({"mcpServers": {"s": {"command": "x", "disabled": True}}}, env={})["s"]
    assert not cfg.enabled


def test_unknown_keys_that_clients_add_are_ignored() -> None:
    raw = {"command": "x", "autoApprove": ["a"], "alwaysAllow": [], "description": "mine"}
    assert parse_servers({"mcpServers": {"s": raw}}, env={})["s"].command == "x"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- ${VAR}


def test_var_expansion_with_defaults_and_escape() -> None:
    env = {"HOME": "/home/u", "EMPTY": ""}
    assert expand_vars("${HOME}/x", env) == "/home/u/x"
    assert expand_vars("${NOPE:-fallback}", env) == "fallback"
    assert expand_vars("${EMPTY:-used}", env) == "used"
    assert expand_vars("${EMPTY}", env) == ""
    assert expand_vars("$${HOME} stays", env) == "${HOME} stays"
    assert expand_vars("no vars $HOME", env) == "no vars $HOME"


def test_missing_variable_names_the_file_the_field_and_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        parse_servers(CLAUDE_DESKTOP, source="/etc/mcp.json", env={})
    msg = str(info.value)
    assert "/etc/mcp.json" in msg and "mcpServers.github.env.GITHUB_PERSONAL_ACCESS_TOKEN" in msg
    assert "GITHUB_TOKEN is not set" in msg


def test_disabled_server_does_not_need_its_variables() -> None:
    raw = {"command": "x", "enabled": False, "env": {"K": "${UNSET_VAR}"}}
    assert not parse_servers({"mcpServers": {"s": raw}}, env={})["s"].enabled


def test_args_cwd_and_url_are_expanded() -> None:
    env = {"ROOT": "/srv", "PORT": "9000"}
    stdio = parse_servers(
        {"mcpServers": {"s": {"command": "x", "args": ["${ROOT}/a"], "cwd": "${ROOT}"}}}, env=env
    )
    assert stdio["s"].args == ("/srv/a",) and stdio["s"].cwd == "/srv"  # type: ignore[union-attr]
    remote = parse_servers({"mcpServers": {"r": {"url": "http://127.0.0.1:${PORT}/mcp"}}}, env=env)
    assert remote["r"].url == "http://127.0.0.1:9000/mcp"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- invalid config


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"args": ["x"]}, "mcpServers.s: needs 'command'"),
        ({"command": "x", "url": "http://h"}, "not both"),
        ({"command": "x", "timeout": -1}, "mcpServers.s.timeout"),
        ({"command": "x", "args": "not-a-list"}, "mcpServers.s.args"),
        ({"url": "ftp://h/x"}, "mcpServers.s.url"),
        ({"type": "websocket", "url": "ws://h"}, "mcpServers.s.type"),
        ({"command": ""}, "mcpServers.s.command"),
        ({"command": "x", "disabled": "yes"}, "mcpServers.s.disabled"),
    ],
)
def test_invalid_server_entries_name_the_file_and_the_field(raw: object, field: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_servers({"mcpServers": {"s": raw}}, source="my.json", env={})
    assert str(info.value).startswith("my.json: ") and field in str(info.value)


def test_server_block_must_be_an_object() -> None:
    with pytest.raises(ConfigError, match="mcpServers: expected an object"):
        parse_servers({"mcpServers": ["a"]}, source="f.json", env={})


def test_broken_json_reports_the_line(tmp_path: Path) -> None:
    path = _write(tmp_path / "mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x",}\n  }\n}')
    with pytest.raises(ConfigError) as info:
        load_json_file(path)
    assert str(info.value).startswith(f"{path}:3:") and "invalid JSON" in str(info.value)


# ---------------------------------------------------------------------------- comments


def test_comments_are_stripped_outside_strings_only() -> None:
    text = '{"url": "http://h/x//y", /* block\n */ "a": 1, // tail\n "b": "/* kept */"}'
    assert json.loads(strip_json_comments(text)) == {
        "url": "http://h/x//y",
        "a": 1,
        "b": "/* kept */",
    }


def test_dollar_comment_keys_are_ignored(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "mcp.json",
        '{"$comment": "top", "mcpServers": {"a": {"$comment": "why", "command": "x"}}}',
    )
    assert load_servers(path, env={})["a"].command == "x"  # type: ignore[union-attr]


# ---------------------------------------------------------------------------- settings


def test_settings_precedence_is_defaults_file_env_arguments(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "config.json", '{"tool_timeout": 10, "connect_timeout": 11, "run_timeout": 12}'
    )
    env = {"CODEMODE_CONNECT_TIMEOUT": "21", "CODEMODE_RUN_TIMEOUT": "22"}
    s = load_settings(cfg, env=env, run_timeout=32.0, executor=None)
    assert (s.tool_timeout, s.connect_timeout, s.run_timeout) == (10, 21, 32)
    assert s.executor == "sandbox"  # a None argument leaves the default alone


def test_defaults_apply_without_file_or_env(tmp_path: Path) -> None:
    s = load_settings(tmp_path / "absent.json", env={})
    assert s.tool_timeout == 60 and s.protocol == "auto" and s.storage == "file"


def test_unknown_setting_in_the_file_is_refused_with_its_name_when_strict(tmp_path: Path) -> None:
    cfg = _write(tmp_path / "config.json", '{"tool_timout": 10}')
    with pytest.raises(ConfigError) as info:
        load_settings(cfg, env={}, strict=True)
    assert str(cfg) in str(info.value) and "tool_timout" in str(info.value)
    assert load_settings(cfg, env={}).tool_timeout == 60  # otherwise ignored, with a warning


def test_bad_environment_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, env={"CODEMODE_TOOL_TIMEOUT": "soon"})
    assert "environment" in str(info.value) and "CODEMODE_TOOL_TIMEOUT" in str(info.value)


def test_servers_in_config_json_are_overridden_by_mcp_json(tmp_path: Path) -> None:
    cfg = _write(
        tmp_path / "config.json",
        '{"tool_timeout": 5, "mcpServers": {"a": {"command": "old"}, "b": {"command": "b"}}}',
    )
    mcp = _write(tmp_path / "mcp.json", '{"mcpServers": {"a": {"command": "new"}}}')
    servers = load_servers(cfg, mcp, env={})
    assert servers["a"].command == "new" and servers["b"].command == "b"  # type: ignore[union-attr]
    assert load_settings(cfg, env={}).tool_timeout == 5  # mcpServers is not a setting
