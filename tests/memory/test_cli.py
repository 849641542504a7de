"""``codemode skills|artifacts|state|deps`` work on the workspace the sessions use."""

from __future__ import annotations

import asyncio
from pathlib import Path

from click.testing import CliRunner

from codemode.cli import cli
from codemode.memory import Memory

SKILL_MD = """---
name: greet
description: Say hello to someone
parameters:
  - name: who
    description: the person to greet
tags: [demo]
---
Use for greetings.
"""


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def make_skill_folder(root: Path) -> Path:
    folder = root / "greet"
    folder.mkdir()
    (folder / "SKILL.md").write_text(SKILL_MD)
    (folder / "run.py").write_text('def run(who):\n    return "hi " + who\n')
    return folder


def test_skills_add_list_search_show_and_rm(tmp_path: Path) -> None:
    base = str(tmp_path / "ws")
    code, out = invoke("skills", "add", str(make_skill_folder(tmp_path)), "--base", base)
    assert code == 0 and "saved skill greet v1: run(who)" in out
    code, out = invoke("skills", "list", "--base", base)
    assert out.split() == ["greet", "v1", "Say", "hello", "to", "someone"]
    code, out = invoke("skills", "search", "hello", "--base", base)
    assert out.startswith("greet")
    code, out = invoke("skills", "show", "greet", "--base", base)
    assert "description: the person to greet" in out and 'return "hi " + who' in out
    code, out = invoke("skills", "rm", "greet", "--base", base)
    assert code == 0
    code, out = invoke("skills", "list", "--base", base)
    assert out.strip() == "(no skills)"


def test_skills_add_from_a_py_file_and_refusals(tmp_path: Path) -> None:
    base = str(tmp_path / "ws")
    py = tmp_path / "double_it.py"
    py.write_text('def run(x):\n    """Double a number."""\n    return 2 * x\n')
    code, out = invoke("skills", "add", str(py), "--base", base)
    assert code == 0 and "double_it v1" in out
    code, out = invoke("skills", "add", str(py), "--base", base)
    assert code == 1 and "already exists" in out
    code, out = invoke("skills", "add", str(py), "--base", base, "--replace")
    assert "double_it v2" in out
    bad = tmp_path / "bad.py"
    bad.write_text("def run(:\n")
    code, out = invoke("skills", "add", str(bad), "--base", base)
    assert code == 1 and "syntax error" in out


def test_artifacts_list_show_and_rm(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    memory = Memory.from_workspace(base)
    asyncio.run(memory.artifacts.save("notes", "remember this", description="a note"))
    asyncio.run(memory.artifacts.save("blob", b"\x00\x01"))
    code, out = invoke("artifacts", "list", "--base", str(base))
    assert "notes  text   13" in out and "a note" in out
    code, out = invoke("artifacts", "show", "notes", "--base", str(base))
    assert out == "remember this\n"
    target = tmp_path / "blob.bin"
    code, out = invoke("artifacts", "show", "blob", "--out", str(target), "--base", str(base))
    assert target.read_bytes() == b"\x00\x01"
    code, out = invoke("artifacts", "rm", "notes", "--base", str(base))
    assert code == 0
    code, out = invoke("artifacts", "rm", "notes", "--base", str(base))
    assert code == 1 and "no artifact named 'notes'" in out


def test_deps_add_list_rm(tmp_path: Path) -> None:
    base = str(tmp_path / "ws")
    code, out = invoke("deps", "add", "tomli==2.0.1", "--base", base)
    assert code == 0 and "installed tomli 2.0.1" in out
    code, out = invoke("deps", "list", "--base", base)
    assert out.split() == ["tomli==2.0.1", "2.0.1"]
    code, out = invoke("deps", "add", "--index-url=http://x", "--base", base)
    assert code != 0
    code, out = invoke("deps", "rm", "tomli", "--base", base)
    assert "removed tomli" in out
    assert not list((tmp_path / "ws" / "deps").glob("tomli*"))


def test_state_set_get_list_and_rm_share_the_sessions_state(tmp_path: Path) -> None:
    base = str(tmp_path / "ws")
    assert invoke("state", "set", "cursor", "42", "--base", base) == (0, "set cursor\n")
    assert invoke("state", "set", "who", "ada", "--string", "--base", base)[0] == 0
    assert invoke("state", "get", "cursor", "--base", base) == (0, "42\n")
    code, out = invoke("state", "list", "--base", base)
    assert code == 0 and out.split() == ["cursor", "42", "who", '"ada"']
    seen = asyncio.run(_state_of(tmp_path / "ws"))
    assert seen == {"cursor": 42, "who": "ada"}
    assert invoke("state", "rm", "cursor", "--base", base)[0] == 0
    code, out = invoke("state", "get", "cursor", "--base", base)
    assert code == 1 and "no key 'cursor'" in out


def test_state_set_refuses_a_value_that_is_not_json_as_a_usage_error(tmp_path: Path) -> None:
    code, out = invoke("state", "set", "k", "not json", "--base", str(tmp_path / "ws"))
    assert code == 2 and "--string" in out


async def _state_of(base: Path) -> object:
    memory = Memory.from_workspace(base)
    try:
        return await memory.state.get()
    finally:
        await memory.aclose()


def test_a_description_the_code_wrote_cannot_redraw_the_listing(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    memory = Memory.from_workspace(base)
    sneaky = "fine\x1b[1A\x1b[2K\rsecrets-exported\u202e"
    asyncio.run(memory.artifacts.save("notes", "x", description=sneaky))
    code, out = invoke("artifacts", "list", "--base", str(base))
    assert code == 0
    assert out.rstrip("\n").isprintable() and "\\u001b[1A" in out
