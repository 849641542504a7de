"""Workflows run against the real memory and filesystem MCP servers."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode import Session, SubprocessExecutor, Workspace
from codemode.workflows import (
    StepEvent,
    aresume_workflow,
    arun_workflow,
    list_runs,
    run_workflow,
    scripted_asker,
)

from .conftest import Space

pytestmark = pytest.mark.anyio

CHAIN = """
name: notes-to-memory
inputs:
  root: {type: string}
  kind: {type: string, default: note}
steps:
  - id: files
    tool: fs.list_directory
    args: {path: "${inputs.root}"}
    output: listing
  - code: |
      lines = listing["content"].splitlines()
      names = sorted(l.split()[-1] for l in lines if l.startswith("[FILE]"))
      names
    output: names
  - id: read
    foreach: "${names}"
    as: name
    concurrency: 2
    do:
      - tool: fs.read_text_file
        args: {path: "${inputs.root + '/' + name}"}
    output: texts
  - id: remember
    tool: memory.create_entities
    args:
      entities:
        - {name: "${names[0]}", entityType: "${inputs.kind}", observations: ["${texts[0].content}"]}
        - {name: "${names[1]}", entityType: "${inputs.kind}", observations: ["${texts[1].content}"]}
  - if: "${len(texts) == 2}"
    then: [{set: {verdict: both}}]
    else: [{set: {verdict: some}}]
result: "${{'names': names, 'verdict': verdict}}"
"""


async def test_a_workflow_chains_tools_code_foreach_and_if_on_real_servers(space: Space) -> None:
    path = space.write("chain.yaml", CHAIN)
    events: list[StepEvent] = []
    result = await arun_workflow(
        path, base=space.base, inputs={"root": str(space.files)}, on_event=events.append
    )
    assert result.status == "succeeded", result.error
    assert result.result == {"names": ["a.txt", "b.txt"], "verdict": "both"}
    assert sorted(space.entities()) == ["a.txt", "b.txt"]
    done = [e.step for e in events if e.kind == "done"]
    assert done[:2] == ["files", "step2"] and "read" in done and "remember" in done
    runs = await list_runs(base=space.base)
    assert [(r["run_id"], r["status"]) for r in runs] == [(result.run_id, "succeeded")]


async def test_retry_with_backoff_then_success(tmp_path: Path) -> None:
    calls: list[float] = []

    def flaky() -> str:
        calls.append(time.monotonic())
        if len(calls) < 3:
            raise RuntimeError("not yet")
        return "ok"

    wf = {"steps": [{"tool": "local.flaky", "retry": {"attempts": 3, "backoff": 0.2}}]}
    async with Session(executor=SubprocessExecutor()) as s:
        s.register_tool(flaky)
        result = await arun_workflow(wf, base=tmp_path, session=s)
    assert result.status == "succeeded" and result.result == "ok"
    assert len(calls) == 3
    assert calls[2] - calls[1] >= calls[1] - calls[0] >= 0.19  # 0.2 s, then 0.4 s


async def test_a_step_past_its_timeout_fails_the_run(tmp_path: Path) -> None:
    wf = {"steps": [{"code": "import time\ntime.sleep(30)", "timeout": 1}, {"code": "2"}]}
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
    assert result.status == "failed" and result.step == "step1"
    assert "timed out" in (result.error or "")


async def test_an_expression_that_overflows_fails_the_run_saying_so(tmp_path: Path) -> None:
    wf = {"steps": [{"code": "1", "output": "n"}], "result": "${int(float('inf')) + n}"}
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
    assert result.status == "failed" and "OverflowError" in (result.error or "")
    [listed] = await list_runs(base=tmp_path)
    assert listed["status"] == "failed"


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"code": "1 / 0"}, "failed"),
        ({"set": {"x": "${1 / 0}"}}, "failed"),
        ({"ask": "Go on?"}, "waiting"),
    ],
)
async def test_a_step_that_fails_or_waits_inside_a_loop_ends_the_run_with_that_status(
    tmp_path: Path, body: dict[str, Any], status: str
) -> None:
    """An iteration's error left the loop as an exception group, which escaped the run:
    its status was never written and it was listed as interrupted."""
    wf = {"steps": [{"foreach": "${[1, 2]}", "as": "i", "concurrency": 2, "do": [body]}]}
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
    assert result.status == status, result
    [listed] = await list_runs(base=tmp_path)
    assert listed["status"] == status


async def test_a_run_cannot_grow_its_journal_past_the_configured_size(tmp_path: Path) -> None:
    """Journals are files outside the memory quota: a loop journaling a large output per
    iteration fails its run once the journal would pass ``workflows.max_journal_mb``,
    instead of filling the disk; the run's status is still recorded."""
    (tmp_path / "config.json").write_text('{"workflows": {"max_journal_mb": 0.5}}')
    wf = {
        "steps": [
            {
                "foreach": "${range(100)}",
                "as": "i",
                "do": [{"set": {"big": "${'x' * 100000}"}}],
                "output": "all",
            }
        ]
    }
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
    assert result.status == "failed" and "max_journal_mb" in (result.error or ""), result
    [journal] = (tmp_path / "workflows" / "runs").glob("*.jsonl")
    assert journal.stat().st_size < 2 << 20
    [listed] = await list_runs(base=tmp_path)
    assert listed["status"] == "failed"


async def test_workflow_list_shows_control_characters_of_a_sent_workflow_as_escapes(
    tmp_path: Path,
) -> None:
    """A client of ``serve`` names its workflow and steps; an operator lists the runs."""
    sneaky = "ok\x1b[2K\r\x1b[1Afine\u202e"
    wf = {"name": sneaky, "steps": [{"id": "boom", "code": "raise ValueError(1)"}]}
    await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
    env = {**os.environ, "CODEMODE_BASE": str(tmp_path), "CODEMODE_EXECUTOR": "subprocess"}
    argv = [sys.executable, "-m", "codemode", "workflow", "list"]
    listed = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "\\u001b[2K" in listed.stdout
    assert not set("\x1b\r\u202e") & set(listed.stdout)


async def test_foreach_keeps_to_its_concurrency(tmp_path: Path) -> None:
    running, peak = 0, 0

    async def slow(n: int) -> int:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.05)
        running -= 1
        return n * n

    wf = {"steps": [{"foreach": "${range(8)}", "concurrency": 3,
                     "do": [{"tool": "local.slow", "args": {"n": "${item}"}}]}]}  # fmt: skip
    async with Session(executor=SubprocessExecutor()) as s:
        s.register_tool(slow)
        result = await arun_workflow(wf, base=tmp_path, session=s)
    assert result.result == [n * n for n in range(8)]
    assert peak == 3


async def test_code_steps_share_one_session_and_see_bound_outputs(tmp_path: Path) -> None:
    wf = {"steps": [
        {"set": {"start": 40}},
        {"code": "total = start + 1\ntotal", "output": "t"},
        {"code": "total + 1"},
        {"skill": "twice", "args": {"n": "${t}"}},
    ]}  # fmt: skip
    ws = Workspace.open(tmp_path)
    async with Session.for_workspace(ws, executor=SubprocessExecutor()) as s:
        await s.run("skills.create('twice', 'def run(n):\\n    return 2 * n', description='x')")
        result = await arun_workflow(wf, workspace=ws, session=s)
    assert result.status == "succeeded", result.error
    assert result.result == 82


async def test_a_declined_question_stops_and_resume_asks_again(tmp_path: Path) -> None:
    wf = {"steps": [
        {"code": "1", "output": "one"},
        {"ask": "Go on after ${one}?", "output": "answer"},
        {"ask": "Your name?", "schema": {"type": "object", "properties": {
            "name": {"type": "string", "minLength": 2}}, "required": ["name"]}, "output": "who"},
    ], "result": "${who.name}"}  # fmt: skip
    asker = scripted_asker([None])
    first = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor(), asker=asker)
    assert (first.status, first.step) == ("stopped", "step2")
    assert asker.asked == ["Go on after 1?"]  # type: ignore[attr-defined]
    # nobody to ask now: the run waits for the answer
    second = await aresume_workflow(first.run_id, base=tmp_path, executor=SubprocessExecutor(),
                                    asker=scripted_asker([{"confirm": True}]))  # fmt: skip
    assert (second.status, second.step) == ("waiting", "step3")
    third = await aresume_workflow(first.run_id, base=tmp_path, executor=SubprocessExecutor(),
                                   answers={"step3": {"name": "Ada"}})  # fmt: skip
    assert (third.status, third.result) == ("succeeded", "Ada")


async def test_an_answer_that_does_not_fit_the_schema_is_asked_again(tmp_path: Path) -> None:
    wf = {"steps": [{"ask": "n?", "schema": {"type": "object", "properties": {
        "n": {"type": "integer"}}, "required": ["n"]}}]}  # fmt: skip
    asker = scripted_asker([{"n": "x"}, {"n": 4}])
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor(), asker=asker)
    assert result.result == {"n": 4}
    assert "did not fit" in asker.asked[1]  # type: ignore[attr-defined]


def test_the_blocking_sdk_call_and_the_seeds_executor_module(space: Space) -> None:
    path = space.write("w.yaml", "steps:\n  - code: '6 * 7'\n")
    result = run_workflow(path, base=space.base)
    assert result.ok and result.result == 42
    out = space.codemode("workflow", "validate", str(path))
    assert out.returncode == 0 and "ok (workflow, 1 steps)" in out.stdout
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "codemode.workflows.executor", "--workflow", str(path),
         "--base", str(space.base), "-q"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "42"


async def test_a_plugin_step_type_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from codemode import plugins

    async def shout(args: Any, ctx: Any) -> str:
        return f"{args['text'].upper()} ({ctx.step})"

    loaded = plugins.load()
    monkeypatch.setitem(loaded.registries.step_types._entries, "shout",
                        plugins.Entry("shout", shout, "test"))  # fmt: skip
    wf = {"steps": [{"set": {"w": "hey"}}, {"shout": {"text": "${w}"}}]}
    result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
    assert result.result == "HEY (step2)"


async def test_a_task_step_runs_the_agent_in_the_runs_session(tmp_path: Path) -> None:
    from codemode.agent.testing import Answer, Code, FakeLLMServer

    script: list[Code | Answer] = [
        Code("print(sum(1 for e in expenses if e > 100))"),
        Answer("2 are over 100."),
    ]
    with FakeLLMServer(script, api_key="sk-test-000") as llm:
        (tmp_path / ".env").write_text(
            f"CODEMODE_LLM_PROVIDER=openai\nCODEMODE_LLM_BASE_URL={llm.openai_url}\n"
            "CODEMODE_LLM_API_KEY=sk-test-000\n"
        )
        wf = {"steps": [
            {"code": "expenses = [80, 120, 450]"},
            {"task": "How many expenses are over ${inputs.limit}?", "output": "answer"},
        ], "inputs": {"limit": {"type": "integer", "default": 100}}}  # fmt: skip
        result = await arun_workflow(wf, base=tmp_path, executor=SubprocessExecutor())
        asked = llm.requests[0].text
    assert result.status == "succeeded", result.error
    assert result.result["success"] is True and result.result["result"] == "2 are over 100."
    assert "2" in str(result.result["output"])  # the agent's code saw the run's `expenses`
    assert "How many expenses are over 100?" in asked
