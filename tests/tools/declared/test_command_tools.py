"""Command-line tools from YAML: argv templates, no shell, the sandbox by default."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from codemode import ConfigError, Workspace
from codemode.tools.declared import load_file
from codemode.tools.declared.command import build_argv

from .conftest import open_session, write_tools

pytestmark = pytest.mark.anyio
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap missing")

TEXT_TOOLS = """
name: text
description: Text utilities
tools:
  - name: word_count
    description: Count the words of a file in the workspace.
    command: [wc, -w, "{path}"]
    parameters:
      path: {type: string, description: A path under the workspace}
    annotations: {read_only: true, destructive: false}
  - name: echo
    description: Print words.
    command: [echo, [-n, "{no_newline}"], "{words}"]
    parameters:
      words: {type: array, items: {type: string}}
      no_newline: {type: boolean, default: false}
  - name: whoami
    description: The uid the tool runs as.
    command: [id, -u]
  - name: ls
    description: List a directory.
    command: [ls, "{path}"]
    parameters:
      path: {type: string}
  - name: nap
    description: Sleep.
    command: [sleep, "{seconds}"]
    timeout: 1
    parameters:
      seconds: {type: number}
  - name: count_lines
    command: [wc, -l]
    stdin: "{text}"
    parameters:
      text: {type: string}
  - name: to_json
    command:
      [python3, -c, "import json,sys; print(json.dumps({{'n': len(sys.argv) - 1}}))",
       "{a}", "{b}"]
    output: json
    parameters:
      a: {type: string}
      b: {type: integer}
"""

HOST_TOOLS = """
name: hosty
tools:
  - name: whoami
    description: The uid the tool runs as.
    command: [id, -u]
    host: true
"""


@needs_bwrap
async def test_a_yaml_command_tool_runs_in_the_sandbox_on_workspace_files(
    tmp_path: Path,
) -> None:
    write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "poem.txt").write_text("one two three four\n")
    async with open_session(tmp_path) as s:
        r = await s.run("tools.text.word_count(path='poem.txt')")
        assert r.is_ok, r.error
        assert r.value.split() == ["4", "poem.txt"]
        r = await s.run("tools.text.whoami().strip()")
        expected = "65534" if os.geteuid() == 0 else str(os.geteuid())
        assert r.value == expected
        r = await s.run("tools.text.ls(path='/root')")  # the host's /root is not there
        assert not r.is_ok and "No such file" in r.error.message


@needs_bwrap
async def test_arguments_are_argv_items_never_shell_text(tmp_path: Path) -> None:
    write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    canary = tmp_path / "files" / "pwned"
    async with open_session(tmp_path) as s:
        r = await s.run("tools.text.echo(words=['a; touch pwned', '$(id)', '`id`'])")
        assert r.value == "a; touch pwned $(id) `id`\n"
        assert not canary.exists()
        r = await s.run("tools.text.echo(words=['x', 'y'], no_newline=True)")
        assert r.value == "x y"
        r = await s.run("tools.text.count_lines(text='a\\nb\\nc\\n').strip()")
        assert r.value == "3"
        r = await s.run("tools.text.to_json(a='p q', b=7)")
        assert r.value == {"n": 2}


async def test_a_value_that_would_become_an_option_is_refused(tmp_path: Path) -> None:
    path = write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    tool = load_file(path, files_dir=tmp_path, sandbox=lambda: None).definition.tools[0]
    with pytest.raises(Exception, match="could be read as an option"):
        build_argv(tool, {"path": "--files0-from=/etc/passwd"})
    assert build_argv(tool, {"path": "a-b"}) == ["wc", "-w", "a-b"]


@needs_bwrap
async def test_a_command_past_its_timeout_is_killed(tmp_path: Path) -> None:
    write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    async with open_session(tmp_path) as s:
        r = await s.run("tools.text.nap(seconds=30)", timeout=20)
        assert not r.is_ok and r.error.type == "ToolTimeout"
        assert r.duration_ms < 15_000


async def test_a_host_tool_runs_on_the_host_and_says_so_loudly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_tools(tmp_path, "hosty.yaml", HOST_TOOLS)
    with caplog.at_level(logging.WARNING, "codemode.tools.declared"):
        async with open_session(tmp_path) as s:
            r = await s.run("tools.hosty.whoami().strip()")
            assert r.value == str(os.geteuid())
            r = await s.run("tools.describe('hosty.whoami')['description']")
            assert r.value.startswith("[runs on the host]")
    assert any("runs on the HOST" in rec.getMessage() for rec in caplog.records)


async def test_declared_tools_have_stubs_search_and_schema_checks_like_mcp_tools(
    tmp_path: Path,
) -> None:
    write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    async with open_session(tmp_path) as s:
        r = await s.run("[t['name'] for t in tools.search('count words of a file')][:1]")
        assert r.value == ["text.word_count"]
        r = await s.run("from servers.text import word_count\nimport inspect\n"
                        "str(inspect.signature(word_count))")  # fmt: skip
        assert r.value.startswith("(path: str")
        r = await s.run("tools.text.word_count(path=3)")
        assert not r.is_ok and r.error.type == "ToolArgumentError"
        r = await s.run("tools.describe('text.word_count')['annotations']['readOnlyHint']")
        assert r.value is True


async def test_a_broken_definition_names_file_line_and_field(tmp_path: Path) -> None:
    path = write_tools(
        tmp_path,
        "bad.yaml",
        """
        tools:
          - name: ok
            command: [echo, "{who}"]
          - name: bad
            command: [echo]
            timeout: -1
        """,
    )
    with pytest.raises(ConfigError) as info:
        load_file(path, files_dir=tmp_path, sandbox=lambda: None)
    text = str(info.value)
    assert f"{path}:3:" in text and "tools[0]: Value error, placeholders name undeclared" in text
    assert f"{path}:7:14: tools[1].timeout: Input should be greater than 0" in text


async def test_a_broken_file_does_not_take_the_workspaces_other_tools_down(
    tmp_path: Path,
) -> None:
    write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    write_tools(tmp_path, "bad.yaml", "tools: 3\n")
    ws = Workspace.open(tmp_path)
    rows = await ws.registry().servers(connect=False)
    assert [r["name"] for r in rows] == ["text"]
    await ws.registry().aclose()


async def test_the_sandbox_refuses_rather_than_run_a_tool_unsandboxed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEMODE_BWRAP", str(tmp_path / "no-bwrap"))
    write_tools(tmp_path, "text.yaml", TEXT_TOOLS)
    async with open_session(tmp_path) as s:
        r = await s.run("tools.text.whoami()")
        assert not r.is_ok and "sandbox" in r.error.message.lower()
