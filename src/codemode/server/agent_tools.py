"""``execute_task`` on ``codemode serve``: the agent loop, with the server's model or the
connected client's own model through MCP sampling.

Which model: the workspace's ``llm`` section when it names a provider with its key; else,
when the client declares the ``sampling`` capability, the client's model (no key on the
server); else the rule-based fallback (a matching saved skill, or a clear failure).

Sampling travels two ways, as the protocol negotiated: on handshake-era connections
(2025-11-25) each model turn is a ``sampling/createMessage`` request sent mid-call, with a
progress notification per step; on 2026-07-28 connections, which have no back-channel,
each model turn is one round of the multi-round-trip flow: the tool answers
``InputRequiredResult`` with the sampling request and the task's state (sealed by the
SDK), and the client retries with the model's reply. The client's
``input_required_max_rounds`` (10 by default in the Python SDK) then caps the steps. The
state carries the conversation, never the limits: each round applies the server's (a
client cannot lengthen its task's time or budgets by editing the state), and a state this
server did not write is refused with a clear error. Each state continues its task once
(:class:`Continued`): sent again, it would run its step's code again and give the task
more model turns and tokens than its limits, so it is refused.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Annotated, Any

from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp_types import (
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    InputRequiredResult,
    SamplingMessage,
    TextContent,
    Tool,
    ToolResultContent,
    ToolUseContent,
)
from pydantic import Field

from codemode.agent.config import resolve_llm_config
from codemode.agent.fallback import NO_LLM, rule_based
from codemode.agent.loop import (
    AgentEvent,
    BadTaskState,
    Limits,
    TaskRun,
    record_tool_calls,
    run_task,
)
from codemode.agent.messages import (
    Message,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
    Usage,
)
from codemode.agent.result import TaskResult
from codemode.errors import ConfigError, LLMError

from .toolset import Call, Reply, ServerContext, Toolset, is_modern

logger = logging.getLogger(__name__)

NO_MODEL_HERE = NO_LLM.replace(
    "Inside `codemode serve`, a client that supports MCP sampling lends its own model.",
    "This client does not offer MCP sampling, so its own model cannot be used either.",
)

DESCRIPTION = (
    "Complete a task end to end: a model writes Python that runs in your session (tools, "
    "skills, artifacts and state in scope) until it can answer. Uses the server's "
    "configured model, or yours through MCP sampling. Returns the answer, what the code "
    "printed, and each step."
)


# --------------------------------------------------------------------------- sampling model


def to_sampling_messages(messages: tuple[Message, ...]) -> list[SamplingMessage]:
    """The conversation as MCP sampling messages (tool results grouped, as SEP-1577 wants)."""
    out: list[SamplingMessage] = []
    pending: list[ToolResultContent] = []

    def flush() -> None:
        if pending:
            out.append(SamplingMessage(role="user", content=list(pending)))
            pending.clear()

    for m in messages:
        if m.role == "tool":
            pending.append(
                ToolResultContent(
                    tool_use_id=m.tool_call_id,
                    content=[TextContent(type="text", text=m.text)],
                    is_error=m.is_error or None,
                )
            )
            continue
        flush()
        if m.role == "assistant" and m.tool_calls:
            blocks: list[Any] = [TextContent(type="text", text=m.text)] if m.text else []
            blocks += [
                ToolUseContent(id=c.id, name=c.name, input=c.arguments) for c in m.tool_calls
            ]
            out.append(SamplingMessage(role="assistant", content=blocks))
        else:
            text = TextContent(type="text", text=m.text)
            if m.role == "assistant":
                out.append(SamplingMessage(role="assistant", content=text))
            else:
                out.append(SamplingMessage(role="user", content=text))
    flush()
    return out


def sampling_params(request: ModelRequest) -> CreateMessageRequestParams:
    tools = [
        Tool(name=t.name, description=t.description, input_schema=t.input_schema)
        for t in request.tools
    ]
    return CreateMessageRequestParams(
        messages=to_sampling_messages(request.messages),
        system_prompt=request.system,
        max_tokens=request.max_tokens,
        temperature=request.temperature,
        tools=tools or None,
    )


def from_sampling_result(result: Any) -> ModelReply:
    blocks = result.content if isinstance(result.content, list) else [result.content]
    texts: list[str] = []
    calls: list[ToolCallRequest] = []
    for block in blocks:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            calls.append(ToolCallRequest(block.id, block.name, dict(block.input or {})))
    return ModelReply(
        text="\n".join(texts),
        tool_calls=calls,
        usage=Usage(),  # MCP sampling reports no token counts
        stop_reason=str(getattr(result, "stop_reason", "") or ""),
        model=str(getattr(result, "model", "") or ""),
    )


class SamplingModel:
    """The connected client's model, asked mid-call (handshake-era protocol)."""

    provider = "sampling"

    def __init__(self, mcp_ctx: Any, *, tools: bool) -> None:
        self._ctx = mcp_ctx
        self.supports_tools = tools
        self.model = "client"

    async def complete(self, request: ModelRequest) -> ModelReply:
        # The request ``session.create_message`` would send, sent directly: that method
        # warns that sampling is deprecated in the 2026-07-28 protocol, which this path
        # (handshake-era connections) does not use.
        params = sampling_params(request)
        kind = CreateMessageResultWithTools if params.tools else CreateMessageResult
        try:
            result: Any = await self._ctx.session.send_request(
                CreateMessageRequest(params=params),
                kind,
                metadata=ServerMessageMetadata(related_request_id=self._ctx.request_id),
            )
        except MCPError as exc:
            raise LLMError(f"the client's model failed: {exc}", provider="sampling") from None
        return from_sampling_result(result)

    async def aclose(self) -> None:
        return None


# --------------------------------------------------------------------------- the tool


def _client_sampling(mcp_ctx: Any) -> tuple[bool, bool]:
    """(client offers sampling, and with tools)."""
    caps = getattr(mcp_ctx, "client_capabilities", None) if mcp_ctx is not None else None
    sampling = getattr(caps, "sampling", None)
    return sampling is not None, getattr(sampling, "tools", None) is not None


def render(result: TaskResult) -> Reply:
    parts = []
    if result.success:
        answer = result.result
        parts.append(answer if isinstance(answer, str) else json.dumps(answer, default=str))
    else:
        parts.append(f"Task not completed ({result.stop_reason}): {result.error}")
    u = result.usage
    tokens = f", {u.input_tokens} tokens in / {u.output_tokens} out" if u.total_tokens else ""
    parts.append(
        f"[{len(result.steps)} steps, {len(result.tool_calls)} tool calls{tokens}, "
        f"{result.duration_ms / 1000:.1f} s, model: {result.provider or 'none'}]"
    )
    parts += [f"Note: {note}" for note in result.notes]
    return Reply("\n\n".join(parts), result.to_dict(), is_error=not result.success)


def register(toolset: Toolset, ctx: ServerContext) -> None:
    """Add ``execute_task`` (called by ``app.build_server``)."""
    from codemode.agent.config import LLMConfig
    from codemode.agent.providers import make_model

    # A broken llm section must not stop `codemode serve`: execute_task reports it.
    problem: str | None = None
    cfg = LLMConfig.model_validate({})
    server_model = None
    try:
        # A tenant's model and key come from its own environment, never the server's:
        # each tenant would otherwise spend the key the server's environment holds.
        env = ctx.workspace.environment if ctx.workspace is not None else None
        cfg = resolve_llm_config(ctx.base, env=env).config
        if cfg.effective_provider in ("openai", "azure_openai", "anthropic"):
            server_model = make_model(cfg)
    except ConfigError as exc:
        problem = str(exc)
        logger.warning("execute_task is unavailable: %s", problem)
    ctx.extras["agent_model"] = server_model
    continued = Continued()

    def limits(max_steps: int | None) -> tuple[Limits, list[str]]:
        """The server's limits; a client's ``max_steps`` may lower llm.max_steps, never
        raise it (a larger one is cut, and the reply says so)."""
        configured = Limits(
            max_steps=cfg.max_steps,
            max_total_tokens=cfg.max_total_tokens,
            max_seconds=cfg.max_seconds,
            run_timeout=cfg.run_timeout or ctx.run_timeout,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
        )
        return configured.tightened(max_steps=max_steps)

    @toolset.tool(description=f"{DESCRIPTION} At most {cfg.max_steps} model turns.")
    async def execute_task(
        call: Call,
        task: Annotated[str, Field(description="What to do, in plain words.")],
        max_steps: Annotated[
            int | None,
            Field(
                description="Most model turns (default and ceiling: the server's "
                "llm.max_steps; more is cut to it).",
                ge=1,
                le=200,
            ),
        ] = None,
    ) -> Any:
        if problem is not None:
            return Reply(f"ConfigError: {problem}", None, is_error=True)
        mcp_ctx = call.mcp
        lim, notes = limits(max_steps)

        async def progress(event: AgentEvent) -> None:
            if mcp_ctx is None or event.kind not in ("model", "answer", "stopped"):
                return
            message = {
                "model": f"step {event.step}: asking the model",
                "answer": f"step {event.step}: answered",
                "stopped": f"stopped: {event.text}",
            }[event.kind]
            await call.report_progress(event.step, event.max_steps, message)

        model: Any = server_model
        sampling, with_tools = _client_sampling(mcp_ctx)
        wants_sampling = cfg.effective_provider in ("none", "sampling") and cfg.enabled
        if model is None and wants_sampling and sampling:
            mode = "fenced" if cfg.mode == "fenced" or not with_tools else "tools"
            if is_modern(mcp_ctx):
                return await _round(call, task, lim, mode, progress, notes, continued)
            model = SamplingModel(mcp_ctx, tools=mode == "tools")
        async with call.lease() as lease:
            if model is None:
                reason = (
                    NO_MODEL_HERE
                    if cfg.effective_provider != "sampling"
                    else ("llm provider is 'sampling' but this client does not offer MCP sampling")
                )
                result = await rule_based(task, lease.session, reason=reason)
            else:
                result = await run_task(
                    model, lease.session, task, limits=lim, mode=cfg.mode, on_event=progress
                )
        result.notes += notes
        return render(result)


class Continued:
    """The task states this process has continued from, as (task id, steps in it): each
    state is a ticket for one round. A task is remembered until its ``max_seconds`` are
    over (then none of its code can run any more)."""

    MAX_TASKS = 100_000
    """Tasks remembered at once; past this (after dropping ended ones) a continuation is
    refused rather than a task forgotten (forgetting one would let its states replay)."""

    def __init__(self) -> None:
        self._tasks: dict[str, tuple[int, float]] = {}
        """task id -> (steps in the latest state continued, when to forget it)"""

    def claim(self, run: TaskRun) -> str | None:
        """Why ``run``'s state may not be continued (None: it may, once)."""
        now = time.time()
        seen = self._tasks.get(run.id)
        if seen is not None and len(run.steps) <= seen[0]:
            return (
                "a state that was already used (each continues the task once; sent again "
                "it would run its step's code again)"
            )
        if seen is None and len(self._tasks) >= self.MAX_TASKS:
            self._tasks = {k: v for k, v in self._tasks.items() if v[1] > now}
            if len(self._tasks) >= self.MAX_TASKS:
                return f"from one of more than {self.MAX_TASKS} tasks in progress at once"
        self._tasks[run.id] = (len(run.steps), run.started + run.limits.max_seconds + 60)
        return None


async def _round(
    call: Call,
    task: str,
    lim: Limits,
    mode: Any,
    progress: Any,
    notes: list[str],
    continued: Continued,
) -> Any:
    """One model turn of the 2026-07-28 multi-round-trip flow."""
    mcp_ctx = call.mcp
    state = getattr(mcp_ctx, "request_state", None)
    responses = getattr(mcp_ctx, "input_responses", None) or {}
    if state is None:
        run = TaskRun(task, mode=mode, limits=lim, provider="sampling", model="client")
    else:
        try:  # the server's limits, whatever the state says: the client carried it
            run = TaskRun.from_state(json.loads(state), limits=lim)
            used = continued.claim(run)
            if used is not None:
                raise BadTaskState(used)
        except (ValueError, BadTaskState) as exc:
            return Reply(
                f"execute_task: the request_state sent back is {exc}; call execute_task "
                "again without it to start the task over",
                None,
                is_error=True,
            )
        key = f"step{len(run.steps) + 1}"
        answer = responses.get(key)
        if not isinstance(answer, CreateMessageResult | CreateMessageResultWithTools):
            run.stop("llm_error", f"the client did not return the model's reply ({key})")
        else:
            async with call.lease() as lease:
                recorder = record_tool_calls(lease.session)
                await run.advance(from_sampling_result(answer), lease.session, recorder=recorder)
    if run.check_budget():
        step = len(run.steps) + 1
        await progress(AgentEvent("model", step, lim.max_steps))
        request = CreateMessageRequest(params=sampling_params(run.request()))
        return InputRequiredResult(
            input_requests={f"step{step}": request},
            request_state=json.dumps(run.to_state(), ensure_ascii=False),
        )
    result = run.result()
    await progress(
        AgentEvent(
            "answer" if result.success else "stopped",
            len(run.steps),
            lim.max_steps,
            result.error or "",
        )
    )
    result.notes += notes
    return render(result)
