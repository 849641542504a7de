"""Config mistakes as a user meets them: every command, one clean error, exit status 2.

Each test runs the real ``codemode`` CLI in a subprocess and asserts on the exit status
and the exact lines on stderr: file:line:column, the field, what is allowed, a
did-you-mean for misspelt keys, a caret under broken JSON, never a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "codemode"]
RUN = ["run", "--executor", "subprocess", "-c", "print(1)"]


def codemode(
    *args: str, base: Path, env: dict[str, str] | None = None, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("CODEMODE_")}
    environ["CODEMODE_BASE"] = str(base)
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=180,
        input=stdin,
        env={**environ, **(env or {})},
    )


def workspace(tmp_path: Path, **files: str) -> Path:
    base = tmp_path / "ws"
    base.mkdir()
    for name, text in files.items():
        (base / name.replace("_", ".")).write_text(text)
    return base


BROKEN_MCP_JSON = '{\n  "mcpServers": {\n    "x": {"command": "echo",}\n  }\n}\n'


@pytest.mark.parametrize(
    "command",
    [RUN, ["tools", "servers"], ["serve", "--executor", "subprocess"], ["state", "list"],
     ["skills", "list"], ["doctor"]],
    ids=lambda c: " ".join(c[:2]),
)  # fmt: skip
def test_every_command_reports_broken_json_once_with_line_caret_and_exit_2(
    tmp_path: Path, command: list[str]
) -> None:
    base = workspace(tmp_path, mcp_json=BROKEN_MCP_JSON)
    done = codemode(*command, base=base)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.splitlines()[-3:] == [
        f"Error: {base}/mcp.json:3:29: invalid JSON: Expecting property name enclosed in double"
        " quotes (a comma before a closing bracket: JSON allows no trailing comma)",
        '  3 |     "x": {"command": "echo",}',
        "    |                             ^",
    ]


def test_an_invalid_executor_names_the_place_what_is_allowed_and_the_closest(
    tmp_path: Path,
) -> None:
    base = workspace(tmp_path, config_json='{"run_timout": 5,\n "executor": "subproces"}\n')
    done = codemode("run", "-c", "print(1)", base=base)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"warning: {base}/config.json:1:2: unknown setting 'run_timout' (did you mean "
        "'run_timeout'?); it is ignored",
        f'Error: {base}/config.json:2:14: executor: expected one of "subprocess", "inprocess", '
        '"sandbox", "ray", got the string "subproces" (did you mean "subprocess"?)',
    ]


def test_a_bogus_executor_in_the_environment_names_the_variable(tmp_path: Path) -> None:
    base = workspace(tmp_path)
    done = codemode("run", "-c", "print(1)", base=base, env={"CODEMODE_EXECUTOR": "bogus"})
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == (
        "Error: environment variable CODEMODE_EXECUTOR: executor: expected one of "
        '"subprocess", "inprocess", "sandbox", "ray", got the string "bogus"'
    )
    assert "Traceback" not in done.stderr


def test_args_as_a_string_asks_for_a_list_of_strings_beside_the_other_mistakes(
    tmp_path: Path,
) -> None:
    mcp = '{"mcpServers": {"x": {"command": "echo", "args": "x", "timout": 5}}}'
    base = workspace(tmp_path, mcp_json=mcp, config_json='{"run_timeout": 0}')
    done = codemode(*RUN, base=base)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"warning: {base}/mcp.json:1:55: mcpServers.x: unknown key 'timout' (did you mean "
        "'timeout'?); it is ignored",
        f"Error: {base}/mcp.json:1:50: mcpServers.x.args: expected a list of strings, "
        'got the string "x"',
        f"{base}/config.json:1:17: run_timeout: must be greater than 0, got 0",
    ]


def test_a_yaml_config_error_shows_the_line_with_a_caret(tmp_path: Path) -> None:
    base = workspace(tmp_path, config_yaml="run_timeout: 5\n  executor: subprocess\n")
    done = codemode(*RUN, base=base)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: {base}/config.yaml:2:11: invalid YAML: mapping values are not allowed here",
        "  2 |   executor: subprocess",
        "    |           ^",
    ]


MISSPELT = {
    "mcpServers": {
        "ghost": {"command": "/nonexistent/ghost", "timout": 5, "enable": False},
    }
}


def test_misspelt_server_keys_warn_with_a_did_you_mean_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    base = workspace(tmp_path, mcp_json=json.dumps(MISSPELT, indent=1))
    done = codemode(*RUN, base=base)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1\n"
    where = f"{base}/mcp.json"
    assert done.stderr.splitlines()[:2] == [
        f"warning: {where}:5:4: mcpServers.ghost: unknown key 'timout' (did you mean "
        "'timeout'?); it is ignored",
        f"warning: {where}:6:4: mcpServers.ghost: unknown key 'enable' (did you mean "
        "'enabled'?); it is ignored",
    ]


@pytest.mark.parametrize("how", ["--strict", "CODEMODE_STRICT=1"])
def test_strict_makes_unknown_keys_errors_for_run_and_serve(tmp_path: Path, how: str) -> None:
    base = workspace(tmp_path, mcp_json=json.dumps(MISSPELT, indent=1))
    flag, env = ([how], None) if how == "--strict" else ([], {"CODEMODE_STRICT": "1"})
    for command in (RUN, ["serve", "--executor", "subprocess"]):
        done = codemode(*flag, *command, base=base, env=env)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [
            f"Error: {base}/mcp.json:5:4: mcpServers.ghost: unknown key 'timout' (did you mean "
            "'timeout'?)",
            f"{base}/mcp.json:6:4: mcpServers.ghost: unknown key 'enable' (did you mean "
            "'enabled'?)",
            "(strict mode: unknown keys are errors, not warnings)",
        ]


def test_unknown_keys_are_checked_against_every_registered_section(tmp_path: Path) -> None:
    config = '{"memory": {"dep": ["six"]},\n "llm": {"max_step": 3}}'
    mcp = '{"mcpServer": {},\n "run_timeout": 5}'
    base = workspace(tmp_path, config_json=config, mcp_json=mcp)
    done = codemode("state", "list", base=base)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stderr.splitlines()) == sorted(
        [
            f"warning: {base}/config.json:1:13: unknown setting of the memory section 'dep' "
            "(did you mean 'deps'?); it is ignored",
            f"warning: {base}/config.json:2:10: unknown setting of the llm section 'max_step' "
            "(did you mean 'max_steps'?); it is ignored",
            f"warning: {base}/mcp.json:1:2: unknown key 'mcpServer' (did you mean "
            "'mcpServers'?); it is ignored",
            f"warning: {base}/mcp.json:2:2: 'run_timeout' belongs in config.json, not mcp.json;"
            " it is ignored",
        ]
    )


def test_keys_other_clients_write_pass_or_say_what_codemode_reads(tmp_path: Path) -> None:
    entry = {"command": "/nonexistent/x", "autoApprove": [], "disabled": True,
             "excludeTools": ["rm"]}  # fmt: skip
    base = workspace(tmp_path, mcp_json=json.dumps({"mcpServers": {"x": entry}}, indent=1))
    done = codemode("--strict", "state", "list", base=base)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: {base}/mcp.json:7:4: mcpServers.x: 'excludeTools' (Gemini CLI) is not read by "
        'codemode: write "exclude"',
        "(strict mode: unknown keys are errors, not warnings)",
    ]


def test_doctor_shows_the_config_warnings_and_exits_2_when_it_is_invalid(
    tmp_path: Path,
) -> None:
    base = workspace(tmp_path, mcp_json=json.dumps(MISSPELT, indent=1))
    done = codemode("doctor", "--base", str(base), base=base)
    assert "Traceback" not in done.stderr
    config = [line for line in done.stdout.splitlines() if "config" in line or "warning" in line]
    assert config[0].split(None, 2)[:2] == ["WARNING", "config"]
    assert "unknown key 'timout' (did you mean 'timeout'?)" in config[1]
    (base / "config.json").write_text('{"executor": "vm"}')
    done = codemode("doctor", "--base", str(base), base=base)
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f'Error: {base}/config.json:1:14: executor: expected one of "subprocess", '
        '"inprocess", "sandbox", "ray", got the string "vm"'
    )
