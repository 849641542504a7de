"""The agent loop: the model writes code, the session runs it, the output goes back.

``TaskRun`` is the state of one task, advanced one model reply at a time. It knows no
provider and no transport: ``run_task`` drives it with a ``Model`` in one go, and the
MCP server's ``execute_task`` can drive it one round per client request (the
2026-07-28 protocol's ``InputRequiredResult``), saving it with ``to_state`` in between.
"""

from __future__ import annotations

import inspect
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import anyio

from codemode.errors import LLMError

from .messages import (
    RUN_CODE,
    Message,
    Model,
    ModelReply,
    ModelRequest,
    ToolCallRequest,
    Usage,
    extract_code_blocks,
    prompt_text,
    run_code_tool,
)
from .result import CodeRun, Step, StopReason, TaskResult

Mode = Literal["tools", "fenced"]

OUT_OF_TIME = "not run: the task is out of time (max_seconds)"
EMPTY_NUDGE = "Your reply was empty. Run code, or reply with the final answer."


@dataclass(frozen=True, slots=True)
class Limits:
    """When a task stops, and how much each model reply and code run may take."""

    max_steps: int = 12
    max_total_tokens: int | None = None
    max_seconds: float = 600.0
    run_timeout: float = 60.0
    max_tokens: int = 2000
    temperature: float | None = None
    output_limit: int = 8000
    """Characters of one run's output sent back to the model (head and tail kept)."""

    def tightened(self, **asked: Any) -> tuple[Limits, list[str]]:
        """These limits (the configured ones) with what a caller asked for one task. The
        configured bounds are a ceiling: a caller may lower them, never raise them; a
        larger value is cut to the ceiling, and a note says so (shown with the result).
        ``None`` asks for the configured value."""
        values: dict[str, Any] = {}
        notes: list[str] = []
        for name, value in asked.items():
            if value is None:
                continue
            ceiling = getattr(self, name)
            # ``not <=``: NaN compares false both ways and would lift the bound
            if name in CEILINGS and ceiling is not None and not value <= ceiling:
                notes.append(
                    f"{name}={value} asked; the configured ceiling is {ceiling} "
                    f"(llm.{name}): ran with {ceiling}"
                )
                value = ceiling
            values[name] = value
        return replace(self, **values), notes


CEILINGS = frozenset({"max_steps", "max_total_tokens", "max_seconds", "run_timeout", "max_tokens"})
"""The limits a task's caller can lower but not raise past the configuration."""


@dataclass(frozen=True, slots=True)
class AgentEvent:
    """Progress of a task, for live displays and MCP progress notifications."""

    kind: Literal["model", "code", "output", "answer", "stopped"]
    step: int
    max_steps: int
    text: str = ""
    ok: bool = True


EventHandler = Callable[[AgentEvent], Awaitable[None] | None]


async def emit(handler: EventHandler | None, event: AgentEvent) -> None:
    if handler is None:
        return
    out = handler(event)
    if inspect.isawaitable(out):
        await out


def system_prompt(mode: Mode) -> str:
    """The system prompt: byte-stable for a mode (no tool catalog, no dates)."""
    tail = prompt_text("tools_mode.md" if mode == "tools" else "fenced_mode.md")
    return f"{prompt_text('system.md')}\n\n{tail}"


# --------------------------------------------------------------------------- tool calls


MAX_RECORDED = 5_000
"""Tool calls one task lists (``TaskResult.tool_calls``); past it they are counted only."""
MAX_NAME = 200
"""Characters of a server or tool name a listed call keeps (the code chose the names)."""


@dataclass
class CallRecorder:
    """Records the MCP tool calls a session's code makes (server, tool, ok, time), until
    the task takes them (``take``): the code decides how many calls it makes and what
    names they carry, so what waits here is bounded in count and size."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    step: int = 0
    dropped: int = 0

    def add(self, call: dict[str, Any]) -> None:
        if len(self.calls) < MAX_RECORDED:
            self.calls.append(call)
        else:
            self.dropped += 1

    def take(self) -> tuple[list[dict[str, Any]], int]:
        """The calls recorded since the last ``take`` and how many were not listed."""
        calls, dropped = self.calls, self.dropped
        self.calls, self.dropped = [], 0
        return calls, dropped


def _name(value: Any) -> str:
    """A name as the code sent it, cut: not a reference to a string of any size."""
    text = value if isinstance(value, str) else ""
    return text[:MAX_NAME] + "..." if len(text) > MAX_NAME else text


def record_tool_calls(session: Any) -> CallRecorder | None:
    """Wrap the session's ``tools.call`` handler once; None when it has no tools."""
    recorder: CallRecorder | None = getattr(session, "_agent_recorder", None)
    if recorder is not None:
        return recorder
    host = getattr(session, "host", None)
    if host is None:
        return None
    original = host.handler("tools.call")
    if original is None:
        return None
    rec = CallRecorder()

    async def recorded(params: dict[str, Any]) -> Any:
        t0 = time.perf_counter()
        ok = False
        try:
            value = await original(params)
            ok = True
            return value
        finally:
            rec.add(
                {
                    "server": _name(params.get("server")),
                    "tool": _name(params.get("tool")),
                    "ok": ok,
                    "duration_ms": round((time.perf_counter() - t0) * 1000, 3),
                    "step": rec.step,
                }
            )

    host.register("tools.call", recorded)
    session._agent_recorder = rec
    return rec


# --------------------------------------------------------------------------- the task


class TaskRun:
    """One task's conversation, steps, usage and limits."""

    def __init__(
        self,
        task: str,
        *,
        mode: Mode,
        limits: Limits,
        provider: str = "",
        model: str = "",
    ) -> None:
        self.task = task
        self.mode: Mode = mode
        self.limits = limits
        self.provider = provider
        self.model = model
        self.messages: list[Message] = [Message("user", task)]
        self.steps: list[Step] = []
        self.usage = Usage()
        self.tool_calls: list[dict[str, Any]] = []
        self.unlisted_calls = 0
        """Tool calls past ``MAX_RECORDED``: counted, not listed."""
        self.outputs: list[str] = []
        self.started = time.time()
        self.id = secrets.token_hex(16)
        """Names the task in its states: whoever continues it can tell a state sent again."""
        self.answer: str | None = None
        self.stop_reason: StopReason | None = None
        self.error: str | None = None

    # -- state -----------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def remaining(self) -> float:
        return self.limits.max_seconds - (time.time() - self.started)

    def stop(self, reason: StopReason, error: str | None = None) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.error = error

    def check_budget(self) -> bool:
        """Stop (and return False) when no further model turn is allowed."""
        if self.done:
            return False
        n = len(self.steps)
        if n >= self.limits.max_steps:
            self.stop(
                "max_steps",
                f"stopped after {n} steps without a final answer (max_steps={n}): "
                "raise max_steps or split the task",
            )
        elif (
            self.limits.max_total_tokens is not None
            and self.usage.total_tokens >= self.limits.max_total_tokens
        ):
            self.stop(
                "max_tokens",
                f"stopped after {self.usage.total_tokens} tokens without a final answer "
                f"(max_total_tokens={self.limits.max_total_tokens})",
            )
        elif self.remaining <= 0:
            self.stop(
                "max_seconds",
                f"stopped after {self.limits.max_seconds:g} s without a final answer (max_seconds)",
            )
        return not self.done

    def request(self) -> ModelRequest:
        return ModelRequest(
            system=system_prompt(self.mode),
            messages=tuple(self.messages),
            tools=(run_code_tool(),) if self.mode == "tools" else (),
            max_tokens=self.limits.max_tokens,
            temperature=self.limits.temperature,
        )

    # -- one model reply -------------------------------------------------------------
    async def advance(
        self,
        reply: ModelReply,
        session: Any,
        *,
        model_ms: float = 0.0,
        recorder: CallRecorder | None = None,
        on_event: EventHandler | None = None,
    ) -> None:
        """Take the model's reply: run its code and feed the output back, or finish."""
        index = len(self.steps) + 1
        self.usage.add(reply.usage)
        if reply.model and not self.model:
            self.model = reply.model
        step = Step(index, "code", reply.text, model_ms=model_ms, usage=reply.usage)
        self.steps.append(step)
        calls = list(reply.tool_calls) if self.mode == "tools" else []
        blocks = extract_code_blocks(reply.text) if self.mode == "fenced" else []
        if not calls and not blocks:
            if reply.text.strip():
                step.kind = "answer"
                self.answer = reply.text.strip()
                self.messages.append(Message("assistant", reply.text))
                await emit(
                    on_event, AgentEvent("answer", index, self.limits.max_steps, self.answer)
                )
                self.stop("answer")
            else:
                step.kind = "empty"
                self.messages.append(Message("assistant", ""))
                self.messages.append(Message("user", EMPTY_NUDGE))
            return
        self.messages.append(Message("assistant", reply.text, tool_calls=tuple(calls)))
        if recorder is not None:
            recorder.take()  # calls made between tasks (a thread left running) are not this step's
            recorder.step = index
        # The task's time bounds every run of the reply, however many it asks for: a reply
        # of a hundred quick runs past ``max_seconds`` would otherwise each get 0.1 s.
        if calls:
            for call in calls:
                if self.remaining <= 0:
                    text, ok = OUT_OF_TIME, False
                else:
                    text, ok = await self._run_call(call, session, step, on_event)
                self.messages.append(Message("tool", text, tool_call_id=call.id, is_error=not ok))
        else:
            parts = []
            for i, code in enumerate(blocks, 1):
                if self.remaining <= 0:
                    parts.append(f"(blocks {i}-{len(blocks)} were not run: {OUT_OF_TIME})")
                    break
                text, ok = await self._run(code, session, step, on_event)
                label = f"Output of block {i} of {len(blocks)}" if len(blocks) > 1 else "Output"
                parts.append(f"{label}:\n{text}")
                if not ok:
                    if i < len(blocks):
                        parts.append(f"(blocks {i + 1}-{len(blocks)} were not run)")
                    break
            self.messages.append(Message("user", "\n\n".join(parts)))
        if recorder is not None:
            self._note_calls(*recorder.take())

    def _note_calls(self, calls: list[dict[str, Any]], dropped: int) -> None:
        room = max(MAX_RECORDED - len(self.tool_calls), 0)
        self.tool_calls.extend(calls[:room])
        self.unlisted_calls += dropped + max(len(calls) - room, 0)

    async def _run_call(
        self, call: ToolCallRequest, session: Any, step: Step, on_event: EventHandler | None
    ) -> tuple[str, bool]:
        if call.name != RUN_CODE:
            return f"Unknown tool {call.name!r}: the only tool is run_code(code).", False
        code = call.arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            got = call.raw_arguments[:200] or repr(call.arguments)[:200]
            return f"run_code needs a `code` string argument (got {got}).", False
        return await self._run(code, session, step, on_event)

    async def _run(
        self, code: str, session: Any, step: Step, on_event: EventHandler | None
    ) -> tuple[str, bool]:
        n = self.limits.max_steps
        await emit(on_event, AgentEvent("code", step.index, n, code))
        timeout = max(0.1, min(self.limits.run_timeout, self.remaining))
        result = await session.run(code, timeout=timeout)
        text = result.to_text(self.limits.output_limit)
        if result.stdout:
            self.outputs.append(result.stdout)
        step.runs.append(
            CodeRun(code, text, result.is_ok, round(result.duration_ms, 3), result.timed_out)
        )
        await emit(on_event, AgentEvent("output", step.index, n, text, ok=result.is_ok))
        return text, result.is_ok

    # -- the outcome -----------------------------------------------------------------
    def result(self) -> TaskResult:
        reason = self.stop_reason or "max_steps"
        return TaskResult(
            task=self.task,
            success=reason == "answer",
            result=self.answer,
            output="".join(self.outputs),
            error=self.error if reason != "answer" else None,
            stop_reason=reason,
            steps=list(self.steps),
            usage=replace(self.usage),
            tool_calls=list(self.tool_calls),
            duration_ms=(time.time() - self.started) * 1000,
            provider=self.provider,
            model=self.model,
            notes=[
                f"{self.unlisted_calls} more tool calls were made than tool_calls lists "
                f"(it keeps the first {MAX_RECORDED})"
            ]
            if self.unlisted_calls
            else [],
        )

    def to_state(self) -> dict[str, Any]:
        """Everything needed to continue this task later (plain JSON data). The limits are
        not in it: whoever continues the task applies its own (``from_state``)."""
        return {
            "task": self.task,
            "mode": self.mode,
            "provider": self.provider,
            "model": self.model,
            "messages": [_message_dict(m) for m in self.messages],
            "steps": [s.to_dict() for s in self.steps],
            "usage": self.usage.to_dict(),
            "tool_calls": self.tool_calls,
            "unlisted_calls": self.unlisted_calls,
            "outputs": self.outputs,
            "started": self.started,
            "id": self.id,
        }

    @classmethod
    def from_state(cls, state: Any, *, limits: Limits) -> TaskRun:
        """The task ``to_state`` described, under ``limits`` (the caller's: a state that
        travelled through a client is not trusted to set its own timeouts or budgets).

        Raises ``BadTaskState`` for anything ``to_state`` could not have written."""
        try:
            if not isinstance(state, dict):
                raise TypeError(f"expected an object, got {type(state).__name__}")
            mode = state["mode"]
            if mode not in ("tools", "fenced"):
                raise ValueError(f"unknown mode {mode!r}")
            task_id = state["id"]
            if not isinstance(task_id, str) or not task_id:
                raise ValueError("its id is not a name")
            started = float(state["started"])
            if not math.isfinite(started):
                raise ValueError(f"started is {started}, not a time")
            if started > time.time() + 5:
                raise ValueError("it starts in the future")
            run = cls(
                str(state["task"]),
                mode=mode,
                limits=limits,
                provider=str(state.get("provider", "")),
                model=str(state.get("model", "")),
            )
            run.messages = [_message_from(m) for m in state["messages"]]
            run.steps = [Step.from_dict(s) for s in state["steps"]]
            usage = state.get("usage") or {}
            run.usage = Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0)))
            run.tool_calls = list(state.get("tool_calls", []))[:MAX_RECORDED]
            run.unlisted_calls = max(int(state.get("unlisted_calls", 0)), 0)
            run.outputs = [str(o) for o in state.get("outputs", [])]
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            detail = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise BadTaskState(f"not a task state this server wrote ({detail})") from None
        run.started = started
        run.id = task_id
        return run


class BadTaskState(ValueError):
    """A task state (``TaskRun.from_state``) that ``to_state`` did not write."""


def _message_dict(m: Message) -> dict[str, Any]:
    return {
        "role": m.role,
        "text": m.text,
        "tool_calls": [asdict(c) for c in m.tool_calls],
        "tool_call_id": m.tool_call_id,
        "is_error": m.is_error,
    }


def _message_from(d: dict[str, Any]) -> Message:
    return Message(
        d["role"],
        str(d.get("text", "")),
        tuple(ToolCallRequest(**c) for c in d.get("tool_calls", [])),
        str(d.get("tool_call_id", "")),
        bool(d.get("is_error", False)),
    )


async def run_task(
    model: Model,
    session: Any,
    task: str,
    *,
    limits: Limits,
    mode: Literal["auto", "tools", "fenced"] = "auto",
    on_event: EventHandler | None = None,
) -> TaskResult:
    """Drive ``model`` until it answers or a limit stops it; errors come back in the result."""
    chosen: Mode = ("tools" if model.supports_tools else "fenced") if mode == "auto" else mode
    run = TaskRun(task, mode=chosen, limits=limits, provider=model.provider, model=model.model)
    recorder = record_tool_calls(session)
    while run.check_budget():
        await emit(on_event, AgentEvent("model", len(run.steps) + 1, limits.max_steps))
        t0 = time.perf_counter()
        try:
            with anyio.fail_after(max(0.001, run.remaining)):
                reply = await model.complete(run.request())
        except LLMError as exc:
            run.stop("llm_error", str(exc))
            break
        except TimeoutError:
            run.check_budget()
            run.stop("max_seconds", f"stopped after {limits.max_seconds:g} s (max_seconds)")
            break
        model_ms = (time.perf_counter() - t0) * 1000
        await run.advance(reply, session, model_ms=model_ms, recorder=recorder, on_event=on_event)
    result = run.result()
    if not result.success:
        await emit(
            on_event, AgentEvent("stopped", len(run.steps), limits.max_steps, result.error or "")
        )
    return result
