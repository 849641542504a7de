"""``execute_task`` on a real ``codemode serve`` process, driven by the official MCP client:
with the client's own model through its sampling callback (both protocol generations),
with the server's configured model, and with neither."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import mcp_types as t
import pytest
from mcp import Client, StdioServerParameters

from codemode.agent.testing import Answer, Code, FakeLLMServer

from .conftest import KEY

pytestmark = pytest.mark.anyio

SCRIPT = ["x = 6 * 7\nprint(x)", "print(x + 1)"]


def _env(**extra: str) -> dict[str, str]:
    keep = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI", "ANTHROPIC", "AZURE", "LLM_", "CODEMODE_LLM"))
    }
    return keep | extra


class ClientModel:
    """The client's model, as its sampling callback: runs SCRIPT, then answers."""

    def __init__(self) -> None:
        self.requests: list[t.CreateMessageRequestParams] = []

    async def __call__(self, ctx: Any, params: t.CreateMessageRequestParams) -> Any:
        self.requests.append(params)
        n = sum(1 for m in params.messages if m.role == "assistant")
        if n >= len(SCRIPT):
            return t.CreateMessageResult(
                role="assistant", content=t.TextContent(type="text", text="x is 42"), model="cm"
            )
        code = SCRIPT[n]
        if params.tools:
            use = t.ToolUseContent(id=f"u{n}", name="run_code", input={"code": code})
            return t.CreateMessageResultWithTools(role="assistant", content=[use], model="cm")
        text = t.TextContent(type="text", text=f"```python\n{code}\n```")
        return t.CreateMessageResult(role="assistant", content=text, model="cm")


@asynccontextmanager
async def serve(
    base: Path, env: dict[str, str], mode: Any = "auto", **client: Any
) -> AsyncIterator[Client]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "--base", str(base), "--executor", "subprocess"],
        env=env,
    )
    async with Client(params, mode=mode, read_timeout_seconds=60, **client) as c:
        yield c


@pytest.mark.parametrize(
    ("mode", "with_tools"), [("legacy", True), ("legacy", False), ("auto", True), ("auto", False)]
)
async def test_execute_task_uses_the_clients_model_through_sampling(
    base: Path, mode: str, with_tools: bool
) -> None:
    model = ClientModel()
    caps = t.SamplingCapability(tools=t.SamplingToolsCapability()) if with_tools else None
    updates: list[tuple[float, float | None, str | None]] = []

    # parameter names follow the SDK's ProgressFnT protocol
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        updates.append((progress, total, message))

    async with serve(base, _env(), mode, sampling_callback=model, sampling_capabilities=caps) as c:
        r = await c.call_tool("execute_task", {"task": "compute x"}, progress_callback=on_progress)
    assert not r.is_error, r.content
    data = r.structured_content
    assert data is not None and data["success"] and data["result"] == "x is 42"
    assert [[run["output"] for run in s["runs"]] for s in data["steps"]] == [["42"], ["43"], []]
    assert data["provider"] == "sampling"
    assert len(model.requests) == 3
    first = model.requests[0]
    assert first.system_prompt is not None and "skills.search" in first.system_prompt
    assert [tool.name for tool in first.tools or []] == (["run_code"] if with_tools else [])
    assert [m for _, _, m in updates][:3] == [f"step {i}: asking the model" for i in (1, 2, 3)]
    assert updates[-1][2] == "step 3: answered"


async def test_execute_task_uses_the_servers_configured_model(base: Path) -> None:
    with FakeLLMServer([Code("print(sum(range(10)))"), Answer("45")], api_key=KEY) as llm:
        env = _env(LLM_PROVIDER="openai", OPENAI_API_KEY=KEY, OPENAI_BASE_URL=llm.openai_url)
        async with serve(base, env, sampling_callback=ClientModel()) as c:
            r = await c.call_tool("execute_task", {"task": "sum 0..9"})
        assert len(llm.requests) == 2
    assert r.structured_content is not None and r.structured_content["result"] == "45"
    assert r.structured_content["provider"] == "openai"


async def test_without_any_model_execute_task_fails_with_how_to_configure_one(base: Path) -> None:
    async with serve(base, _env()) as c:
        r = await c.call_tool("execute_task", {"task": "book a flight"})
    assert r.is_error
    text = r.content[0].text  # type: ignore[union-attr]
    assert "no LLM is configured" in text and "does not offer MCP sampling" in text


async def test_a_clients_max_steps_cannot_raise_the_servers_llm_max_steps(base: Path) -> None:
    """The operator's llm.max_steps (2) is the ceiling: a client asking for 50 gets a task
    stopped after 2 model turns, and the reply says its request was cut."""
    with FakeLLMServer([Code("print(1)"), Code("print(2)"), Answer("3 turns")], api_key=KEY) as llm:
        env = _env(
            LLM_PROVIDER="openai",
            OPENAI_API_KEY=KEY,
            OPENAI_BASE_URL=llm.openai_url,
            CODEMODE_LLM_MAX_STEPS="2",
        )
        async with serve(base, env) as c:
            listed = {tool.name: tool for tool in (await c.list_tools()).tools}
            r = await c.call_tool("execute_task", {"task": "count", "max_steps": 50})
        assert len(llm.requests) == 2
    data = r.structured_content
    assert data is not None and data["stop_reason"] == "max_steps" and len(data["steps"]) == 2
    assert data["notes"] == [
        "max_steps=50 asked; the configured ceiling is 2 (llm.max_steps): ran with 2"
    ]
    assert "Note: max_steps=50 asked" in r.content[0].text  # type: ignore[union-attr]
    assert "At most 2 model turns." in (listed["execute_task"].description or "")


def _reply(code: str) -> t.CreateMessageResult:
    text = t.TextContent(type="text", text=f"```python\n{code}\n```")
    return t.CreateMessageResult(role="assistant", content=text, model="cm")


async def test_a_task_state_sent_again_is_refused_so_a_step_never_runs_twice(base: Path) -> None:
    """On 2026-07-28 the task's state travels through the client: each state continues the
    task once. Sent again with another reply, it would run more code and more model turns
    than the server's ``llm.max_steps`` allows (the state resets the count)."""
    env = _env(CODEMODE_LLM_MAX_STEPS="2")
    ran = base / "ran.txt"

    def write(mark: str) -> t.CreateMessageResult:
        return _reply(f"open({str(ran)!r}, 'a').write({mark!r})")

    async with serve(base, env, sampling_callback=ClientModel()) as c:

        async def turn(state: str | None = None, reply: Any = None) -> Any:
            return await c.session.call_tool(
                "execute_task",
                {"task": "count"},
                input_responses=None if reply is None else {"step1": reply},
                request_state=state,
                allow_input_required=True,
            )

        first = await turn()
        assert isinstance(first, t.InputRequiredResult) and first.request_state
        second = await turn(first.request_state, write("1"))
        assert isinstance(second, t.InputRequiredResult) and second.request_state
        again = [await turn(first.request_state, write("2")) for _ in range(3)]
    assert all(isinstance(r, t.CallToolResult) and r.is_error for r in again), again
    said = again[0].content[0].text
    assert "already used" in said and "without it to start the task over" in said
    assert ran.read_text() == "1"
