"""Wire formats: Azure's deployment URLs and parameter names, Anthropic's content blocks,
and fenced-block mode for models without tool calling."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemode.agent.testing import Answer, Code, FakeLLMServer, Status, Text

from .conftest import KEY, make_agent


def test_azure_sends_to_the_deployment_url_with_api_version_and_api_key_header(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(Code("print(2 + 2)"), Answer("4"))
    with make_agent(llm, base, "azure") as agent:
        r = agent.execute_task("2+2")
    assert r.success and r.provider == "azure_openai"
    for req in llm.requests:
        assert req.path == "/openai/deployments/chat-dep/chat/completions"
        assert req.query == {"api-version": "2024-08-01-preview"}
        assert req.headers["api-key"] == KEY and "authorization" not in req.headers


def test_azure_switches_to_max_completion_tokens_when_the_model_refuses_max_tokens(
    base: Path,
) -> None:
    with FakeLLMServer([Code("print(1)"), Answer("done")], reject_max_tokens=True) as llm:
        with make_agent(llm, base, "azure", llm_max_tokens=321) as agent:
            r = agent.execute_task("one")
        assert r.success
        first, retried, second = (q.body for q in llm.requests)
    assert first["max_tokens"] == 321 and "max_completion_tokens" not in first
    assert retried["max_completion_tokens"] == 321 and "max_tokens" not in retried
    assert second["max_completion_tokens"] == 321  # remembered for the next turns


def test_a_token_parameter_set_explicitly_is_never_switched(base: Path) -> None:
    with (
        FakeLLMServer([Answer("x")], reject_max_tokens=True) as llm,
        make_agent(llm, base, "azure", llm_token_param="max_tokens") as agent,
    ):
        r = agent.execute_task("one")
    assert not r.success and "max_completion_tokens" in (r.error or "")
    assert "HTTP 400" in (r.error or "")


def test_reasoning_models_get_max_completion_tokens_from_the_start(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(Answer("hi"))
    with make_agent(llm, base, llm_model="o3-mini") as agent:
        agent.execute_task("hi")
    assert "max_completion_tokens" in llm.requests[0].body


def test_anthropic_gets_tool_results_as_user_content_blocks(llm: FakeLLMServer, base: Path) -> None:
    llm.add(Code("x = 5\nprint(x * 2)"), Code("print(x + 1)"), Answer("10 and 6"))
    with make_agent(llm, base, "anthropic") as agent:
        r = agent.execute_task("compute")
    assert r.success and r.result == "10 and 6"
    last = llm.requests[-1]
    assert last.path == "/v1/messages" and last.body["system"].startswith("You complete")
    assert [t["name"] for t in last.tools] == ["run_code"]
    roles = [m["role"] for m in last.messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    result_block = last.messages[2]["content"][0]
    assert result_block["type"] == "tool_result" and result_block["content"] == "10"
    assert result_block["tool_use_id"] == last.messages[1]["content"][0]["id"]


def test_anthropic_overload_is_retried_then_a_bad_key_is_reported(
    llm: FakeLLMServer, base: Path
) -> None:
    llm.add(Status(529, "overloaded", retry_after_ms=10), Answer("fine"))
    with make_agent(llm, base, "anthropic") as agent:
        assert agent.execute_task("hi").result == "fine"
    with make_agent(llm, base, "anthropic", llm_api_key="sk-ant-bad-0000") as agent:
        r = agent.execute_task("hi")
    assert r.stop_reason == "llm_error" and "ANTHROPIC_API_KEY" in (r.error or "")
    assert "sk-ant-bad-0000" not in (r.error or "")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_fenced_block_mode_runs_python_blocks_and_sends_their_output_back(
    llm: FakeLLMServer, base: Path, provider: str
) -> None:
    llm.add(
        Code("n = 21\nprint(n * 2)", text="Let me compute."),
        Text(
            'Two blocks:\n```python\nprint(n)\n```\n```json\n{"not": "code"}\n```\n'
            "```py\nprint(n + 1)\n```"
        ),
        Answer("```text\n42\n```\nThe answer is 42."),
    )
    with make_agent(llm, base, provider, mode="fenced") as agent:
        r = agent.execute_task("double 21")
    assert r.success and r.result.endswith("The answer is 42.")
    assert all(not q.tools for q in llm.requests)  # no tool calling in this mode
    assert "```python" in llm.requests[0].system
    assert llm.requests[1].last_tool_output() == "Output:\n42"
    assert llm.requests[2].last_tool_output() == (
        "Output of block 1 of 2:\n21\n\nOutput of block 2 of 2:\n22"
    )
    assert [len(s.runs) for s in r.steps] == [1, 2, 0]
