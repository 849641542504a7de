"""What a task returns: the answer, what the code printed, the error, and how it went."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .messages import Usage

StopReason = Literal[
    "answer",  # the model gave its final answer
    "max_steps",
    "max_tokens",
    "max_seconds",
    "llm_error",  # the provider failed after its retries (or rejected the key)
    "no_llm",  # no model configured and no skill matched
    "skill",  # rule-based fallback: a skill ran
    "skill_error",  # rule-based fallback: the matching skill failed or lacks arguments
]


@dataclass(slots=True)
class CodeRun:
    """One piece of code the model ran, and what it got back."""

    code: str
    output: str
    ok: bool
    duration_ms: float
    timed_out: bool = False


@dataclass(slots=True)
class Step:
    """One model turn: what the model said or ran, and what it cost."""

    index: int
    kind: Literal["code", "answer", "empty"]
    text: str = ""
    runs: list[CodeRun] = field(default_factory=list)
    model_ms: float = 0.0
    usage: Usage = field(default_factory=Usage)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["usage"] = self.usage.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Step:
        usage = d.get("usage") or {}
        return cls(
            index=int(d["index"]),
            kind=d["kind"],
            text=str(d.get("text", "")),
            runs=[CodeRun(**r) for r in d.get("runs", [])],
            model_ms=float(d.get("model_ms", 0.0)),
            usage=Usage(int(usage.get("input_tokens", 0)), int(usage.get("output_tokens", 0))),
        )


@dataclass(slots=True)
class TaskResult:
    """The outcome of ``execute_task``.

    Unpacks as in the seeds: ``result, output, error = execute_task("...")``. ``result``
    is the model's final answer (or a skill's value in the rule-based fallback),
    ``output`` what the code printed across all steps, ``error`` why the task did not
    succeed (``None`` when it did).
    """

    task: str
    success: bool
    result: Any = None
    output: str = ""
    error: str | None = None
    stop_reason: StopReason = "answer"
    steps: list[Step] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float = 0.0
    provider: str = ""
    model: str = ""
    notes: list[str] = field(default_factory=list)
    """What the caller should know about how the task ran (e.g. a limit cut to the
    configured ceiling)."""

    def __iter__(self) -> Iterator[Any]:
        yield self.result
        yield self.output
        yield self.error

    def __bool__(self) -> bool:
        return self.success

    def to_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "success": self.success,
            "result": self.result,
            "output": self.output,
            "error": self.error,
            "stop_reason": self.stop_reason,
            "steps": [s.to_dict() for s in self.steps],
            "usage": self.usage.to_dict(),
            "tool_calls": list(self.tool_calls),
            "duration_ms": round(self.duration_ms, 3),
            "provider": self.provider,
            "model": self.model,
            "notes": list(self.notes),
        }
