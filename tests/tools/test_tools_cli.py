"""``codemode tools list|search|describe|servers|generate`` against a workspace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemode.cli import cli

EDGE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"


@pytest.fixture
def base(tmp_path: Path) -> Path:
    servers = {
        "edge": {"command": sys.executable, "args": [str(EDGE_SERVER)], "exclude": ["crash"]},
        "ghost": {"command": "/nonexistent/ghost-server"},
    }
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return tmp_path


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["tools", *args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_list_shows_signatures_and_original_names(base: Path) -> None:
    code, out, _ = _run("list", "--server", "edge", "--base", str(base))
    assert code == 0
    assert "edge.get_weather(city: str" in out and "[edge.get-weather]" in out
    assert "crash" not in out  # excluded in mcp.json


def test_list_json_is_machine_readable(base: Path) -> None:
    code, out, _ = _run("list", "-s", "edge", "--detail", "name", "--json", "--base", str(base))
    assert code == 0 and {"name": "edge.echo"} in json.loads(out)


def test_search_ranks_the_matching_tool_first(base: Path) -> None:
    code, out, err = _run(
        "search", "weather for a city", "--limit", "2", "--json", "--base", str(base)
    )
    assert code == 0
    assert json.loads(out)[0]["name"] == "edge.get_weather"
    assert "ghost" in err  # the unreachable server is reported, not fatal


def test_describe_shows_parameters_and_schemas(base: Path) -> None:
    code, out, _ = _run("describe", "edge.get_weather", "--base", str(base))
    assert code == 0
    assert "original name: edge.get-weather" in out and "city: str  [required]" in out
    assert "output_schema:" in out


def test_describe_unknown_tool_fails_with_suggestions(base: Path) -> None:
    code, _, err = _run("describe", "edge.get_wether", "--base", str(base))
    assert code == 1 and "edge.get_weather" in err


def test_servers_reports_status_per_server(base: Path) -> None:
    code, out, _ = _run("servers", "--json", "--base", str(base))
    rows = {r["name"]: r for r in json.loads(out)}
    assert code == 0 and rows["edge"]["tools"] == 11 and rows["edge"]["status"] == "ok"
    assert "command not found" in rows["ghost"]["status"]


def test_generate_writes_an_importable_stub_tree(base: Path, tmp_path: Path) -> None:
    out_dir = tmp_path / "stubs"
    code, out, _ = _run("generate", "--out", str(out_dir), "--base", str(base))
    assert code == 0 and "wrote" in out
    weather = out_dir / "servers" / "edge" / "get_weather.py"
    source = weather.read_text()
    compile(source, str(weather), "exec")
    assert "def get_weather(city: str" in source


def test_invalid_workspace_config_is_a_clean_error(tmp_path: Path) -> None:
    (tmp_path / "mcp.json").write_text('{"mcpServers": {"x": {"args": []}}}')
    code, _, err = _run("list", "--base", str(tmp_path))
    assert code == 2 and "mcpServers.x" in err and "Traceback" not in err
