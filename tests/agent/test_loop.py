"""The agent loop against the scripted model, through the real OpenAI SDK (and the others
where the wire format matters), with real sessions and a real upstream MCP server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from codemode.agent import execute_task
from codemode.agent.testing import (
    Answer,
    Code,
    FakeLLMServer,
    RecordedRequest,
    Status,
    Text,
    ToolCall,
)

from .conftest import make_agent, provider_args


def test_a_multi_step_task_discovers_and_calls_a_real_mcp_server_from_sandboxed_code(
    llm: FakeLLMServer, fs_base: Path
) -> None:
    notes = fs_base.parent / "notes"

    def read_after_search(req: RecordedRequest) -> Code:
        assert "fs.read_text_file" in req.last_tool_output()  # found through code
        return Code(
            f"text = tools.fs.read_text_file(path={str(notes / 'paris.txt')!r})\nprint(text)"
        )

    llm.add(
        Code(
            "hits = tools.search('read a text file', detail='name')\n"
            "print([h['name'] for h in hits])"
        ),
        read_after_search,
        Answer("Paris in May: the Louvre, then Lyon."),
    )
    with make_agent(llm, fs_base, executor=None) as agent:  # the workspace default: sandbox
        r = agent.execute_task("What did I plan for Paris?")
    assert r.success and r.stop_reason == "answer"
    assert r.result == "Paris in May: the Louvre, then Lyon."
    assert [s.kind for s in r.steps] == ["code", "code", "answer"]
    first, _, third = llm.requests
    assert first.tool_names == ["run_code"]
    for tool in ("read_text_file", "list_directory", "write_file", "search_files"):
        assert tool not in first.text  # the prompt carries no tool catalog
    assert "Louvre" in third.last_tool_output()
    assert {"server": "fs", "tool": "read_text_file", "ok": True, "step": 2}.items() <= (
        r.tool_calls[-1].items()
    )
    assert "Louvre" in r.output


def test_a_code_error_goes_back_to_the_model_which_then_fixes_it(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(
        Code("total = sum(prices)"),
        lambda req: (
            Code("prices = [3, 4]\ntotal = sum(prices)\nprint(total)")
            if "NameError: name 'prices' is not defined" in req.last_tool_output()
            else Answer("the error never reached me")
        ),
        Answer("7"),
    )
    with make_agent(llm, base) as agent:
        r = agent.execute_task("add the prices")
    assert r.success and r.result == "7"
    assert not r.steps[0].runs[0].ok and r.steps[1].runs[0].ok
    tool_msg = llm.requests[1].messages[-1]
    assert tool_msg["role"] == "tool" and "NameError" in tool_msg["content"]


def test_the_loop_stops_at_max_steps_and_reports_failure_not_success(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(*[Code(f"print({i})") for i in range(5)])
    with make_agent(llm, base, max_steps=3) as agent:
        r = agent.execute_task("never finishes")
    assert not r.success and r.stop_reason == "max_steps"
    assert r.result is None and "max_steps=3" in (r.error or "")
    assert len(llm.requests) == 3 and len(r.steps) == 3
    result, output, error = r
    assert (result, output, error) == (None, "0\n1\n2\n", r.error)


def test_a_task_may_lower_the_configured_step_limit_but_not_raise_it(
    llm: FakeLLMServer, base: Path
) -> None:
    """llm.max_steps is the ceiling: a task asking for more runs with the configured
    bound and its result says so; asking for less is honoured as it is."""
    llm.add(*[Code(f"print({i})") for i in range(6)])
    with make_agent(llm, base, max_steps=3) as agent:
        more = agent.execute_task("never finishes", max_steps=50)
        less = agent.execute_task("never finishes", max_steps=2)
    assert more.stop_reason == "max_steps" and len(more.steps) == 3
    assert more.notes == [
        "max_steps=50 asked; the configured ceiling is 3 (llm.max_steps): ran with 3"
    ]
    assert more.to_dict()["notes"] == more.notes
    assert len(less.steps) == 2 and less.notes == []
    assert len(llm.requests) == 5


def test_a_limit_that_is_not_a_number_is_cut_to_the_ceiling_not_let_through(
    llm: FakeLLMServer, base: Path
) -> None:
    """NaN is neither above nor below a bound: asked for as max_steps, it must not make a
    task run past llm.max_steps (``n >= nan`` never holds)."""
    llm.add(*[Code(f"print({i})") for i in range(5)])
    with make_agent(llm, base, max_steps=3) as agent:
        r = agent.execute_task("never finishes", max_steps=float("nan"))
    assert r.stop_reason == "max_steps" and len(r.steps) == 3
    assert r.notes and r.notes[0].startswith("max_steps=nan asked")


def test_a_429_is_retried_by_the_sdk_with_backoff_then_succeeds(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(
        Status(429, "slow down", retry_after_ms=20), Status(503, retry_after_ms=20), Answer("ok")
    )
    with make_agent(llm, base) as agent:
        r = agent.execute_task("say ok")
    assert r.success and r.result == "ok"
    assert [q.headers.get("x-stainless-retry-count") for q in llm.requests] == ["0", "1", "2"]


def test_rate_limits_that_outlast_the_retries_become_a_clear_llm_error(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(*[Status(429, "rate limited", retry_after_ms=5)] * 3)
    with make_agent(llm, base, llm_max_retries=2) as agent:
        r = agent.execute_task("say ok")
    assert not r.success and r.stop_reason == "llm_error"
    assert "429" in (r.error or "") and len(llm.requests) == 3


def test_a_bad_key_is_a_clear_error_that_names_the_setting_and_hides_the_key(
    llm: FakeLLMServer, base: Path
) -> None:
    args = provider_args(llm, "openai") | {"llm_api_key": "sk-wrong-key-123456"}
    r = execute_task("anything", base=base, executor="subprocess", env={}, **args)
    assert not r.success and r.stop_reason == "llm_error"
    assert "rejected the credentials (HTTP 401)" in (r.error or "")
    assert "OPENAI_API_KEY" in (r.error or "")
    assert "sk-wrong-key-123456" not in (r.error or "")
    assert len(llm.requests) == 1  # a 401 is not retried


def test_an_agent_keeps_its_session_across_tasks(llm: FakeLLMServer, base: Path) -> None:
    llm.add(Code("memo = 41"), Answer("stored"), Code("print(memo + 1)"), Answer("42"))
    with make_agent(llm, base) as agent:
        assert agent.execute_task("store 41").success
        r = agent.execute_task("add one to what you stored")
    assert r.result == "42" and r.output == "42\n"


def test_usage_is_the_providers_reported_token_counts(llm: FakeLLMServer, base: Path) -> None:
    llm.add(Code("print(1)"), Answer("done"))
    with make_agent(llm, base) as agent:
        r = agent.execute_task("count")
    reported = [s.usage.input_tokens for s in r.steps]
    assert reported == [max(1, len(q.text) // 4) for q in llm.requests]  # the fake's formula
    assert r.usage.input_tokens == sum(reported) and r.usage.output_tokens > 0


def test_a_token_budget_stops_the_task(llm: FakeLLMServer, base: Path) -> None:
    llm.add(Code("print(1)"), Code("print(2)"), Answer("never asked"))
    with make_agent(llm, base, max_total_tokens=10) as agent:
        r = agent.execute_task("count")
    assert not r.success and r.stop_reason == "max_tokens" and len(llm.requests) == 1


def test_wall_time_limit_stops_a_slow_model(base: Path) -> None:
    with FakeLLMServer([Answer("late")], delay=5.0) as slow:
        args = provider_args(slow, "openai") | {"llm_api_key": "k"}
        r = execute_task("hurry", base=base, executor="subprocess", env={}, max_seconds=0.5, **args)
    assert not r.success and r.stop_reason == "max_seconds"


def test_a_call_of_an_unknown_tool_is_answered_with_an_error_the_model_can_read(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(
        ToolCall("read_file", {"path": "x"}), ToolCall("run_code", "not json"), Answer("gave up")
    )
    with make_agent(llm, base) as agent:
        r = agent.execute_task("read x")
    assert r.success
    assert "the only tool is run_code" in llm.requests[1].last_tool_output()
    assert "needs a `code` string" in llm.requests[2].last_tool_output()


def test_module_level_execute_task_unpacks_as_in_the_seeds(llm: FakeLLMServer, base: Path) -> None:
    llm.add(Code("print('hi')\n6 * 7"), Answer("42"))
    result, output, error = execute_task(
        "6 times 7", base=base, executor="subprocess", env={}, **provider_args(llm, "openai")
    )
    assert (result, output, error) == ("42", "hi\n", None)
    assert "42" in llm.requests[1].last_tool_output()  # the last expression's value


@pytest.mark.anyio
async def test_aexecute_task_runs_inside_an_existing_event_loop(
    llm: FakeLLMServer, base: Path
) -> None:
    from codemode.agent import aexecute_task

    llm.add(Answer("async ok"))
    r = await aexecute_task(
        "hi", base=base, executor="subprocess", env={}, **provider_args(llm, "openai")
    )
    assert r.success and r.to_dict()["result"] == "async ok"


def test_a_reply_asking_for_many_runs_gets_none_once_the_task_is_out_of_time(
    llm: FakeLLMServer, base: Path
) -> None:
    block = "```python\nimport time\ntime.sleep(0.05)\nprint('ran')\n```"
    llm.add(Text("\n".join([block] * 200)), Answer("never asked"))
    began = time.monotonic()
    with make_agent(llm, base, mode="fenced", max_seconds=1.0) as agent:
        r = agent.execute_task("keep busy")
    took = time.monotonic() - began
    assert not r.success and r.stop_reason == "max_seconds"
    assert 0 < r.output.count("ran") < 200
    assert took < 8, f"the runs went on for {took:.1f} s past a 1 s task"
    assert len(llm.requests) == 1


def test_the_calls_a_task_lists_are_bounded_in_number_and_in_the_size_of_their_names(
    llm: FakeLLMServer, fs_base: Path
) -> None:
    """The code chooses how many calls it makes and the names they carry: a 4 MB server
    name is not kept whole, and calls past ``MAX_RECORDED`` are counted, not listed."""
    from codemode.agent.loop import MAX_NAME, MAX_RECORDED

    llm.add(
        Code(
            "from codemode_worker import bridge\n"
            "big = 'x' * (4 << 20)\n"
            f"for i in range({MAX_RECORDED + 7}):\n"
            "    try:\n"
            "        bridge.call('tools.call', {'server': big if i < 3 else 'nope', 'tool': 't'})\n"
            "    except Exception:\n"
            "        pass\n"
            "print('done')"
        ),
        Answer("done"),
        Code("print(1)"),
        Answer("again"),
    )
    with make_agent(llm, fs_base) as agent:
        r = agent.execute_task("make many calls")
        again = agent.execute_task("nothing")
    assert r.success, r.error
    assert len(r.tool_calls) == MAX_RECORDED
    assert all(len(c["server"]) <= MAX_NAME + 3 for c in r.tool_calls)
    assert r.tool_calls[0]["server"] == "x" * MAX_NAME + "..."
    assert any("7 more tool calls were made" in n for n in r.notes), r.notes
    assert again.success and again.tool_calls == [] and again.notes == []
