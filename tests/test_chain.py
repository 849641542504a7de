"""The two chains: layers run in the order of their stages, and every call knows whose it is."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from codemode import CallContext, ExecutionResult, Session, SubprocessExecutor
from codemode.chain import AROUND, RUN_STAGES, TOOL_STAGES, NextRun, RunEvent, Watch
from codemode.errors import ConfigError, ToolArgumentError
from codemode.result import ErrorInfo
from codemode.tools import ToolCall, ToolRegistry
from codemode.tools.registry import NextCall

pytestmark = pytest.mark.anyio


def double(n: int) -> int:
    """Twice n."""
    return 2 * n


def recording_registry(seen: list[str]) -> ToolRegistry:
    reg = ToolRegistry()
    reg.register(double, server="math")

    def layer(stage: str) -> Any:
        async def record(call: ToolCall, call_next: NextCall) -> Any:
            seen.append(stage)
            if stage == "privacy":
                # Tokens in, values out: validation must see the restored argument.
                call.args = {k: 21 if v == "<NUMBER_1>" else v for k, v in call.args.items()}
                return f"<RESULT_OF {await call_next(call)}>"
            return await call_next(call)

        return record

    stages = [s for s in TOOL_STAGES if s != "validate"]
    for stage in random.Random(7).sample(stages, len(stages)):  # registered out of order
        reg.use(layer(stage), stage=stage)
    return reg


async def test_tool_layers_run_in_stage_order_whatever_order_they_were_added() -> None:
    seen: list[str] = []
    reg = recording_registry(seen)
    assert await reg.call("math", "double", {"n": "<NUMBER_1>"}) == "<RESULT_OF 42>"
    assert seen == ["observe", "audit", "policy", "approval", "budget", "custom", "privacy"]
    assert [stage for stage, _ in reg.layers()] == [*seen, "validate"]


async def test_validation_sees_the_arguments_after_every_rewrite() -> None:
    reg = recording_registry([])
    # The token alone would fail the schema (n is an integer): validation is innermost.
    assert await reg.call("math", "double", {"n": "<NUMBER_1>"}) == "<RESULT_OF 42>"

    async def breaks_args(call: ToolCall, call_next: NextCall) -> Any:
        call.args["n"] = "not a number"
        return await call_next(call)

    reg.use(breaks_args, stage="policy")
    with pytest.raises(ToolArgumentError, match="argument 'n': expected integer"):
        await reg.call("math", "double", {"n": 1})


async def test_layers_of_one_stage_keep_the_order_they_were_added_in() -> None:
    reg = ToolRegistry()
    reg.register(double, server="math")
    seen: list[str] = []
    for name in ("first", "second"):

        async def layer(call: ToolCall, call_next: NextCall, name: str = name) -> Any:
            seen.append(name)
            return await call_next(call)

        reg.use(layer, stage="audit")
    await reg.call("math", "double", {"n": 1})
    assert seen == ["first", "second"]


class Seen(Watch[ToolCall, Any]):
    """Notes what it sees; ``around`` for calls with ``n`` 0."""

    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    def start(self, call: ToolCall) -> Any:
        self.seen.append("start")
        return AROUND if call.args.get("n") == 0 else call.args

    def returned(self, state: Any, call: ToolCall, result: Any) -> None:
        self.seen.append(f"returned {result} for {state}")

    def raised(self, state: Any, call: ToolCall, exc: BaseException) -> None:
        self.seen.append(f"raised {type(exc).__name__}")

    def around(self, call: ToolCall, call_next: NextCall) -> Any:
        self.seen.append("around")
        return call_next(call)


@pytest.mark.parametrize("outermost", [True, False])
async def test_a_watch_sees_each_call_and_refusal_whether_outermost_or_not(
    outermost: bool,
) -> None:
    seen: list[str] = []
    reg = ToolRegistry()
    reg.register(double, server="math")

    async def policy(call: ToolCall, call_next: NextCall) -> Any:
        seen.append("policy")
        if call.args.get("n") == 13:
            raise ToolArgumentError("unlucky", server="math", tool="double")
        return await call_next(call)

    reg.use(policy, stage="policy")
    reg.use(Seen(seen), stage="observe" if outermost else "budget")
    assert await reg.call("math", "double", {"n": 2}) == 4
    with pytest.raises(ToolArgumentError):
        await reg.call("math", "double", {"n": "two"})  # refused by validation
    assert await reg.call("math", "double", {"n": 0}) == 0
    inner = ["start", "policy"] if outermost else ["policy", "start"]
    around = ["start", "around", "policy"] if outermost else ["policy", "start", "around"]
    assert seen == [
        *inner, "returned 4 for {'n': 2}",
        *inner, "raised ToolArgumentError",
        *around,
    ]  # fmt: skip
    seen.clear()
    with pytest.raises(ToolArgumentError):
        await reg.call("math", "double", {"n": 13})
    assert seen == (["start", "policy", "raised ToolArgumentError"] if outermost else ["policy"])


def test_an_unknown_stage_is_refused_with_the_list_of_stages() -> None:
    async def layer(call: ToolCall, call_next: NextCall) -> Any:
        return await call_next(call)

    with pytest.raises(ConfigError, match=r"unknown tool-call stage 'pii'.*observe, audit"):
        ToolRegistry().use(layer, stage="pii")


def recording_contexts(reg: ToolRegistry) -> list[CallContext]:
    reg.register(double, server="math")
    contexts: list[CallContext] = []

    async def record(call: ToolCall, call_next: NextCall) -> Any:
        contexts.append(call.context)
        return await call_next(call)

    reg.use(record, stage="audit")
    return contexts


async def test_a_direct_sdk_call_carries_the_context_it_is_given() -> None:
    reg = ToolRegistry()
    contexts = recording_contexts(reg)
    await reg.call("math", "double", {"n": 1})
    await reg.call("math", "double", {"n": 1}, context=CallContext(tenant="acme", client="cli"))
    assert contexts[0] == CallContext()
    assert (contexts[1].tenant, contexts[1].client) == ("acme", "cli")


async def test_tool_calls_from_the_code_carry_the_session_and_run_identity() -> None:
    reg = ToolRegistry()
    contexts = recording_contexts(reg)
    who = CallContext(tenant="acme", workspace="/srv/acme", client="agent-7")
    async with Session(SubprocessExecutor(), tools=reg, context=who) as s:
        await s.run("tools.math.double(n=1)")
        r = await s.run(
            "import asyncio\n"
            "await asyncio.gather(tools.math.double.aio(n=2), tools.math.double.aio(n=3))"
        )
        assert r.value == [4, 6]
    first, *second = contexts
    assert s.context.session_id and first.session_id == s.context.session_id
    assert (first.tenant, first.workspace, first.client) == ("acme", "/srv/acme", "agent-7")
    assert first.run_id and len(second) == 2 and {c.run_id for c in second} == {second[0].run_id}
    assert second[0].run_id != first.run_id


def run_hook(stage: str, seen: list[str]) -> Any:
    async def hook(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        seen.append(stage)
        return await call_next(event)

    return hook


async def test_run_hooks_run_in_stage_order_around_the_worker() -> None:
    seen: list[str] = []
    async with Session(SubprocessExecutor()) as s:
        for stage in reversed(RUN_STAGES):
            s.use(run_hook(stage, seen), stage=stage)
        assert (await s.run("1 + 1")).value == 2
    assert seen == list(RUN_STAGES)


async def test_a_run_hook_can_refuse_replace_and_post_process_a_run() -> None:
    events: list[RunEvent] = []

    async def checks(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        events.append(event)
        if "forbidden" in event.code:
            return ExecutionResult(error=ErrorInfo("RunRefused", "no forbidden code here"))
        event.code = event.code.replace("41", "42")
        return await call_next(event)

    async def redact(event: RunEvent, call_next: NextRun) -> ExecutionResult:
        result = await call_next(event)
        return ExecutionResult(value=result.value, has_value=True, stdout="[redacted]")

    async with Session(SubprocessExecutor()) as s:
        s.use(redact, stage="privacy")
        s.use(checks, stage="checks")
        refused = await s.run("forbidden = 1")
        assert refused.error is not None and refused.error.type == "RunRefused"
        assert not (await s.run("'forbidden' in globals()")).value
        r = await s.run("print('secret')\n41")
    assert (r.value, r.stdout) == (42, "[redacted]")
    assert events[0].timeout == s.default_timeout
    assert events[0].context.session_id == s.context.session_id
    assert len({e.context.run_id for e in events}) == 3


def test_the_documented_order_is_the_order_in_the_code() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    assert " -> ".join(TOOL_STAGES) + " -> upstream" in doc
    assert " -> ".join(RUN_STAGES) + " -> the worker runs the code" in doc
