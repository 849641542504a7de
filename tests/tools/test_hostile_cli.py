"""What upstream servers say (tool names, descriptions, schemas, stderr) reaches the
operator's terminal as visible escapes, never as control sequences."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemode.cli import cli

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"
CONTROL = "\x1b[2K\r\x1b[31mFAKE\x1b[0m\x9b2J\u202e"
# C0 controls but the line breaks codemode prints itself, C1 controls, bidi overrides.
UNSAFE = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
DYING = (
    "import sys; sys.stderr.write('starting\\n\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b[2J\\n');"
    " sys.exit(1)"
)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    servers = {
        "hostile": {"command": sys.executable, "args": [str(HOSTILE)]},
        "dying": {"command": sys.executable, "args": ["-c", DYING]},
    }
    (tmp_path / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return tmp_path


def _run(*args: str, stdout: bool = False) -> tuple[int, str]:
    # color=True: click would strip some escape sequences itself for a non-terminal.
    result = CliRunner().invoke(cli, ["tools", *args], catch_exceptions=False, color=True)
    return result.exit_code, result.stdout + ("" if stdout else result.stderr)


@pytest.mark.parametrize(
    "args",
    [
        ("list",),
        ("list", "--detail", "full"),
        ("search", "desc"),
        ("describe", "hostile.evil_2K_31mFAKE_0m_2J"),
        ("servers",),
    ],
)
def test_a_server_s_words_never_reach_the_terminal_as_control_characters(
    base: Path, args: tuple[str, ...]
) -> None:
    code, out = _run(*args, "--base", str(base))
    assert code == 0, out
    assert "FAKE" in out or args == ("servers",)
    assert not UNSAFE.findall(out), out


def test_json_output_keeps_the_server_s_exact_words(base: Path) -> None:
    code, out = _run("list", "--json", "--base", str(base), stdout=True)
    assert code == 0 and not UNSAFE.findall(out)
    rows = json.loads(out)
    assert "hostile.evil" + CONTROL in [row.get("original") for row in rows]


def test_a_failed_server_s_stderr_is_shown_escaped(base: Path) -> None:
    _, out = _run("list", "--server", "dying", "--base", str(base))
    assert "starting" in out and "]52;c;" in out
    assert not UNSAFE.findall(out), out


def test_codemode_run_shows_a_tool_s_error_and_the_warnings_escaped(base: Path) -> None:
    code = "tools.search('evil')\ntools.hostile.fail_loudly()"
    args = ["run", "--executor", "subprocess", "--base", str(base), "-c", code]
    result = CliRunner().invoke(cli, args, catch_exceptions=False, color=True)
    out = result.stdout + result.stderr
    assert result.exit_code == 1, out
    assert "failed" in out and "warning: server 'dying'" in out
    assert not UNSAFE.findall(out), out


# Ordinary output keeps its tabs, line breaks and carriage returns (progress bars).
DRIVES_TERMINAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@pytest.mark.parametrize("live", [False, True])
def test_codemode_run_never_passes_the_codes_output_to_the_terminal_as_control_sequences(
    tmp_path: Path, live: bool
) -> None:
    # the sandboxed code prints what it handled (a web page, a tool's result): an OSC 52
    # there would set the operator's clipboard, a title or screen clear rewrite the terminal
    code = (
        "import os, sys\n"
        "print('ok\\tFAKE\\x1b]52;c;cm0gLXJmIH4=\\x07\\x1b]0;T\\x07\\x9b2J\\x1bP+q\\x1b\\\\')\n"
        "sys.stderr.write('err\\x1b[2J\\x00\\n')\n"
        "os.write(1, b'raw\\x1b]8;;http://x\\x07\\r\\n')\n"
        "class V:\n    def __repr__(self):\n        return 'value\\x1b]2;T\\x07'\n"
        "V()"
    )
    args = ["run", "--executor", "sandbox", "--base", str(tmp_path), "-c", code]
    args += ["--live"] if live else []
    result = CliRunner().invoke(cli, args, catch_exceptions=False, color=True)
    out = result.stdout + result.stderr
    assert result.exit_code == 0, out
    assert "ok\tFAKE" in out and "err" in out and "raw" in out and "value" in out
    assert "]52;c;" in out  # shown, as a visible escape
    assert not DRIVES_TERMINAL.findall(out), repr(out)


def test_codemode_run_out_file_keeps_the_codes_exact_output(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    args = ["run", "--executor", "sandbox", "--base", str(tmp_path), "--out", str(target)]
    result = CliRunner().invoke(cli, [*args, "-c", "print('a\\x1b[31mb')"])
    assert result.exit_code == 0, result.stdout + result.stderr
    assert target.read_text() == "a\x1b[31mb\n"


def test_codemode_run_json_is_the_exact_output_spelt_without_control_characters(
    tmp_path: Path,
) -> None:
    code = "print('a\\x9b2J\\x1b[31m\\u202eb')"
    args = ["run", "--executor", "sandbox", "--base", str(tmp_path), "--json", "-c", code]
    result = CliRunner().invoke(cli, args, catch_exceptions=False, color=True)
    assert result.exit_code == 0, result.stdout + result.stderr
    assert not UNSAFE.findall(result.stdout), repr(result.stdout)
    assert json.loads(result.stdout)["stdout"] == "a\x9b2J\x1b[31m\u202eb\n"
