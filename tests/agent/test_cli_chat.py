"""``codemode task`` and the chat-backend helper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from codemode import Session, SubprocessExecutor
from codemode.agent import extract_code_blocks, run_code_blocks
from codemode.agent.testing import Answer, Code, FakeLLMServer
from codemode.cli import cli

from .conftest import KEY

NO_LLM_ENV = {
    "OPENAI_API_KEY": None,
    "OPENAI_BASE_URL": None,
    "ANTHROPIC_API_KEY": None,
    "AZURE_OPENAI_API_KEY": None,
    "AZURE_OPENAI_ENDPOINT": None,
    "LLM_PROVIDER": None,
}


def test_codemode_task_shows_each_step_and_prints_the_answer(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(
        Code("print('working on it')\nprint(undefined_name)"),
        Code("print(2 ** 10)"),
        Answer("1024"),
    )
    env = NO_LLM_ENV | {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_url}
    args = ["task", "--base", str(base), "--executor", "subprocess", "2 to the 10th"]
    result = CliRunner().invoke(cli, args, env=env)
    assert result.exit_code == 0, result.output
    assert result.stdout == "1024\n"
    err = result.stderr
    for expected in (
        "[1/12] running code:",
        "NameError",
        "[2/12] output:",
        "    > 1024",
        "answered",
    ):
        assert expected in err
    assert "3 steps" in err


def test_codemode_task_json_and_failure_exit_status(base: Path) -> None:
    args = ["task", "--base", str(base), "--executor", "subprocess", "--json", "-q", "anything"]
    result = CliRunner().invoke(cli, args, env=NO_LLM_ENV)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["success"] is False and data["stop_reason"] == "no_llm"


def test_codemode_task_bad_settings_are_usage_errors(base: Path) -> None:
    args = ["task", "--base", str(base), "--provider", "openai", "hi"]
    result = CliRunner().invoke(cli, args, env=NO_LLM_ENV)
    assert result.exit_code == 2 and "needs an API key" in result.output


REPLY = """Let me check.

```python
rows = [{"amount": a} for a in (50, 150, 250)]
big = [r for r in rows if r["amount"] > 100]
print(len(big), "expenses over $100")
```

```bash
rm -rf /
```

    ~~~py
    print("total:", sum(r["amount"] for r in big))
    ~~~
"""


def test_extract_code_blocks_keeps_python_blocks_only_in_order() -> None:
    blocks = extract_code_blocks(REPLY)
    assert len(blocks) == 2
    assert (
        blocks[0].startswith("rows = ")
        and blocks[1] == 'print("total:", sum(r["amount"] for r in big))'
    )
    assert extract_code_blocks("```\nx = 1\n```") == []
    assert extract_code_blocks("```\nx = 1\n```", untagged=True) == ["x = 1"]
    assert extract_code_blocks("no code here") == []


@pytest.mark.anyio
async def test_run_code_blocks_runs_a_reply_and_builds_the_follow_up_message() -> None:
    async with Session(SubprocessExecutor()) as s:
        ran = await run_code_blocks(REPLY, s)
        assert ran.has_code and ran.ok
        assert ran.output == "[block 1]\n2 expenses over $100\n\n[block 2]\ntotal: 400"
        assert ran.follow_up().startswith("Code execution output:\n[block 1]")
        failed = await run_code_blocks("```python\n1/0\n```\n```python\nprint('later')\n```", s)
        assert not failed.ok and "ZeroDivisionError" in failed.output
        assert "1 later block(s) not run" in failed.output
        none = await run_code_blocks("Just words.", s)
        assert not none.has_code and none.output == ""


def test_codemode_task_prints_the_answer_without_control_sequences(
    llm: FakeLLMServer, base: Path
) -> None:
    # the answer quotes what the code handled (a page, a tool's result): an OSC 52 in it
    # would set the operator's clipboard
    llm.add(Answer("done\tok\x1b]52;c;cm0gLXJmIH4=\x07\x9b2J"))
    env = NO_LLM_ENV | {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_url}
    args = ["task", "--base", str(base), "--executor", "subprocess", "-q", "anything"]
    result = CliRunner().invoke(cli, args, env=env, color=True)
    assert result.exit_code == 0, result.output
    assert result.stdout == "done\tok\\u001b]52;c;cm0gLXJmIH4=\\u0007\\u009b2J\n"


def test_codemode_task_json_spells_control_characters_as_escapes(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(Answer("done\x9b2J\u202e"))
    env = NO_LLM_ENV | {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": llm.openai_url}
    args = ["task", "--base", str(base), "--executor", "subprocess", "-q", "--json", "x"]
    result = CliRunner().invoke(cli, args, env=env, color=True)
    assert result.exit_code == 0, result.output
    assert "\x9b" not in result.stdout and "\u202e" not in result.stdout
    assert json.loads(result.stdout)["result"] == "done\x9b2J\u202e"
