"""What a provider answers is checked before the loop uses it: a compatible server, a
proxy or a web page at the base URL can send negative token counts (which would lift
``max_total_tokens``), NaN, a number as the reply's text, or HTML. Each is an
``llm_error`` result naming the problem, never a crash and never a budget escaped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codemode.agent.testing import FakeLLMServer, Raw

from .conftest import make_agent

PROVIDERS = ["openai", "anthropic"]


def reply(provider: str, *, text: Any = "```python\nprint(1)\n```", usage: str = "") -> Raw:
    """A whole provider answer whose usage JSON (``usage``) is written as is (NaN...)."""
    if provider == "openai":
        usage = usage or '{"prompt_tokens": 5, "completion_tokens": 5}'
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        head = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m"}
        body = json.dumps({**head, "choices": [choice]})
    else:
        usage = (
            usage.replace("prompt_tokens", "input_tokens").replace(
                "completion_tokens", "output_tokens"
            )
            or '{"input_tokens": 5, "output_tokens": 5}'
        )
        block = {"type": "text", "text": text}
        head = {"id": "m1", "type": "message", "role": "assistant", "model": "m"}
        body = json.dumps({**head, "content": [block], "stop_reason": "end_turn"})
    return Raw(body[:-1] + f', "usage": {usage}}}')


@pytest.mark.parametrize("provider", PROVIDERS)
def test_negative_token_counts_do_not_lift_the_token_budget(
    llm: FakeLLMServer, base: Path, provider: str
) -> None:
    llm.add(*[reply(provider, usage='{"prompt_tokens": -1000000, "completion_tokens": 1}')] * 4)
    with make_agent(llm, base, provider, mode="fenced", max_total_tokens=100, max_steps=4) as a:
        r = a.execute_task("count")
    assert not r.success and r.stop_reason == "llm_error"
    assert "prompt_tokens" in (r.error or "") or "input_tokens" in (r.error or "")
    assert len(llm.requests) == 1  # nothing ran on the strength of a negative count


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("usage", ["NaN", "Infinity", '"many"', "1.5"])
def test_a_token_count_that_is_not_a_whole_number_is_an_llm_error(
    llm: FakeLLMServer, base: Path, provider: str, usage: str
) -> None:
    llm.add(reply(provider, usage=f'{{"prompt_tokens": {usage}, "completion_tokens": 1}}'))
    with make_agent(llm, base, provider, mode="fenced") as agent:
        r = agent.execute_task("count")
    assert r.stop_reason == "llm_error" and "not a token count" in (r.error or "")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("text", [123, ["a"], {"b": 1}])
def test_a_reply_whose_text_is_not_a_string_is_an_llm_error(
    llm: FakeLLMServer, base: Path, provider: str, text: Any
) -> None:
    llm.add(reply(provider, text=text))
    with make_agent(llm, base, provider) as agent:
        r = agent.execute_task("say hi")
    assert r.stop_reason == "llm_error" and "not text" in (r.error or "")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_web_page_at_the_base_url_is_an_llm_error_that_says_so(
    llm: FakeLLMServer, base: Path, provider: str
) -> None:
    llm.add(Raw("<html><body>Sign in to the proxy</body></html>"))
    with make_agent(llm, base, provider) as agent:
        r = agent.execute_task("say hi")
    assert r.stop_reason == "llm_error" and "not JSON" in (r.error or "")
    assert "base URL" in (r.error or "")


def test_an_openai_reply_of_the_wrong_shape_is_an_llm_error(llm: FakeLLMServer, base: Path) -> None:
    head = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m"}
    llm.add(Raw(json.dumps({**head, "choices": "nothing"})))
    with make_agent(llm, base) as agent:
        r = agent.execute_task("say hi")
    assert r.stop_reason == "llm_error" and "not a chat completion" in (r.error or "")
