"""Turning privacy on: config.json (true or an object), CODEMODE_PRIVACY, serve --privacy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemode.cli import cli as main
from codemode.errors import ConfigError
from codemode.privacy.config import PrivacyConfig
from codemode.workspace import Workspace


def privacy_of(base: Path, env: dict[str, str] | None = None, **kw: object) -> PrivacyConfig:
    cfg = Workspace.open(base, env=env or {}, strict=True, **kw).sections["privacy"]  # type: ignore[arg-type]
    assert isinstance(cfg, PrivacyConfig)
    return cfg


def write(base: Path, doc: object) -> Path:
    base.mkdir(exist_ok=True)
    (base / "config.json").write_text(json.dumps(doc))
    return base


def test_privacy_is_off_unless_turned_on(tmp_path: Path) -> None:
    assert privacy_of(tmp_path).enabled is False


def test_true_in_config_json_turns_it_on_with_defaults(tmp_path: Path) -> None:
    cfg = privacy_of(write(tmp_path, {"privacy": True}))
    assert cfg.enabled and cfg.action == "tokenize" and "EMAIL" in cfg.entities


def test_an_object_sets_options_and_the_environment_overrides_them(tmp_path: Path) -> None:
    base = write(tmp_path, {"privacy": {"action": "redact", "exclude": ["IP_ADDRESS"]}})
    assert privacy_of(base).enabled is False
    cfg = privacy_of(base, {"CODEMODE_PRIVACY": "1", "CODEMODE_PRIVACY_ACTION": "block"})
    assert (cfg.enabled, cfg.action, cfg.exclude) == (True, "block", ("IP_ADDRESS",))
    assert (
        privacy_of(write(tmp_path, {"privacy": True}), {"CODEMODE_PRIVACY": "0"}).enabled is False
    )


def test_an_argument_override_wins_like_serve_privacy(tmp_path: Path) -> None:
    base = write(tmp_path, {"privacy": {"action": "redact"}})
    cfg = privacy_of(base, {"CODEMODE_PRIVACY": "0"}, privacy=True)
    assert cfg.enabled and cfg.action == "redact"


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"privacy": "sometimes"}, "expected an object"),
        ({"privacy": {"action": "shout"}}, "privacy.action"),
        ({"privacy": {"entitys": []}}, "entitys"),
        ({"privacy": {"phone_regions": ["ZZ"]}}, "unknown phone region"),
        ({"privacy": {"vault": {"ttl": -5}}}, r"privacy.vault\['ttl'\]: must be positive"),
    ],
)
def test_bad_privacy_settings_name_the_field(tmp_path: Path, doc: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        privacy_of(write(tmp_path, doc))


def test_serve_has_a_privacy_flag_and_the_cli_a_privacy_group(tmp_path: Path) -> None:
    runner = CliRunner()
    assert "--privacy" in runner.invoke(main, ["serve", "--help"]).output
    base = write(tmp_path / "ws", {"privacy": True})
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    status = runner.invoke(main, ["privacy", "status", "--base", str(base)], env=env)
    assert status.exit_code == 0, status.output
    assert "privacy: on" in status.output and str(tmp_path / "xdg") in status.output
    scanned = runner.invoke(
        main, ["privacy", "scan", "--base", str(base)], input="mail alice@example.com\n", env=env
    )
    assert scanned.output.startswith("mail [EMAIL]")
    key = runner.invoke(main, ["privacy", "keygen"]).output.strip()
    assert len(key) == 44


def test_a_server_rule_holds_for_no_other_server_whose_name_begins_like_it() -> None:
    """``acme.crm`` is a server of its own: ``acme``'s ``"scan": false`` (an internal server
    trusted to return nothing personal) must not leave ``acme.crm``'s results unscanned,
    nor ``acme``'s tool rules name ``acme.crm``'s tools."""
    config = PrivacyConfig.model_validate(
        {
            "enabled": True,
            "servers": {"acme": {"scan": False, "tools": {"crm.*": {"sink": False}}}},
        }
    )
    names = ("acme.crm.send", "acme_crm.send")  # ToolSpec("acme.crm", "send").names
    assert config.policy("acme.crm", "send", *names) == (None, None)
    assert config.policy("acme", "crm.send", "acme.crm.send", "acme.crm_send") == (False, False)
    assert config.policy("acme_crm", "x") == (None, None)


def test_a_server_given_the_workspace_by_a_bare_relative_path_is_not_a_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``"args": ["files"]`` names the workspace's files as surely as ``./files`` does: a
    real value that server writes would come back into the sandbox."""
    from codemode.config.servers import StdioServerConfig
    from codemode.privacy.sinks import touches_workspace

    ws = tmp_path / "ws"
    (ws / "files" / "out").mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def server(*args: str, cwd: str | None = None) -> StdioServerConfig:
        return StdioServerConfig(command="node", args=args, cwd=cwd)

    assert touches_workspace(server("index.js", "files", cwd=str(ws)), ws)
    assert touches_workspace(server("--root", "files/out", cwd=str(ws)), ws)
    assert touches_workspace(server("--root=files", cwd=str(ws)), ws)
    assert not touches_workspace(server("stdio", "--port", "files", cwd=str(elsewhere)), ws)
    monkeypatch.chdir(ws)  # no cwd: the server starts where codemode runs
    assert touches_workspace(server("index.js", "files"), ws)
    assert not touches_workspace(server("index.js", "stdio", "--verbose"), ws)


def test_a_server_given_the_workspace_files_through_a_symlink_or_not_yet_made_is_not_a_sink(
    tmp_path: Path,
) -> None:
    """The sandbox sees where ``files`` leads: a server given that place (by the symlink or
    by its target) writes into the sandbox's view. And a directory the server makes at
    start (``files/exports``) lies in the workspace before it exists."""
    from codemode.config.servers import StdioServerConfig
    from codemode.privacy.sinks import touches_workspace

    ws, data = tmp_path / "ws", tmp_path / "data"
    ws.mkdir()
    data.mkdir()
    (ws / "files").symlink_to(data)

    def server(*args: str, cwd: str | None = None) -> StdioServerConfig:
        return StdioServerConfig(command="node", args=args, cwd=cwd)

    assert touches_workspace(server("index.js", str(ws / "files")), ws)
    assert touches_workspace(server("index.js", str(data / "in")), ws)
    assert touches_workspace(server("index.js", "files/exports/new", cwd=str(ws)), ws)
    assert not touches_workspace(server("index.js", str(tmp_path / "other")), ws)
    (tmp_path / "elsewhere").mkdir()
    assert not touches_workspace(server("stdio/x", cwd=str(tmp_path / "elsewhere")), ws)


def test_a_workspace_path_inside_a_list_or_json_argument_still_counts(tmp_path: Path) -> None:
    """``--roots=/a,<ws>/files`` or ``{"root": "<ws>/files"}`` hands the server the
    workspace as surely as a path of its own does."""
    from codemode.config.servers import StdioServerConfig
    from codemode.privacy.sinks import touches_workspace

    ws = tmp_path / "ws"
    (ws / "files").mkdir(parents=True)
    files = str(ws / "files")

    def server(*args: str) -> StdioServerConfig:
        return StdioServerConfig(command="node", args=args)

    assert touches_workspace(server(f"--roots=/srv,{files}"), ws)
    assert touches_workspace(server("--roots", f"/srv;{files}"), ws)
    assert touches_workspace(server(json.dumps({"root": files})), ws)
    assert touches_workspace(server(f"--root='{files}'"), ws)
    assert not touches_workspace(server("--roots=/srv,/opt", json.dumps({"root": "/srv"})), ws)


def test_a_server_started_in_the_workspace_by_a_relative_cwd_is_not_a_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``"cwd": "files"`` is relative to where codemode runs, not to itself: the server
    then writes its relative paths into the sandbox's view."""
    from codemode.config.servers import StdioServerConfig
    from codemode.privacy.sinks import touches_workspace

    ws = tmp_path / "ws"
    (ws / "files").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(ws)
    assert touches_workspace(StdioServerConfig(command="node", cwd="files"), ws)
    monkeypatch.chdir(tmp_path / "elsewhere")
    assert not touches_workspace(StdioServerConfig(command="node", cwd="files"), ws)
