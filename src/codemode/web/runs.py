"""Recent runs for the console: a run hook and a tool-call layer at the ``observe`` stage.

Each run is recorded when it starts (so the console shows it running) and completed when
it ends, with its tool calls as a timeline (offset from the run's start, duration,
outcome). It keeps what the model saw: the run hook sits outside privacy, so values the
privacy stage tokenized stay tokens here. Code and output are cut at ``MAX_TEXT`` chars;
session ids are shown as a short digest, never as themselves (they let a client resume).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Any

from ..chain import NextRun, RunEvent
from ..observability.metrics import run_outcome
from ..result import ExecutionResult
from ..tools.registry import NextCall, ToolCall

MAX_TEXT = 4000
MAX_STEPS = 200


def short_id(value: str | None) -> str:
    """A stable 10-hex-digit digest of an id, safe to show."""
    if not value:
        return ""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:10]


def clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[:limit] + f"\n... ({len(text) - limit} more)"


@dataclass(slots=True)
class Step:
    """One tool call of a run, for the timeline."""

    tool: str
    offset_ms: float
    duration_ms: float | None = None
    outcome: str = "running"


@dataclass(slots=True)
class RunRecord:
    id: str
    session: str
    tenant: str
    started: float
    code: str
    outcome: str = "running"
    duration_ms: float | None = None
    output: str = ""
    error: str = ""
    steps: list[Step] = field(default_factory=list)
    dropped_steps: int = 0


class RunLog:
    """The last ``keep`` runs of each tenant of this process, newest last (one busy
    tenant never pushes another's runs out)."""

    def __init__(self, keep: int = 50) -> None:
        self.keep = keep
        self._tenants: dict[str, OrderedDict[str, RunRecord]] = {}
        self._runs: dict[str, RunRecord] = {}  # every kept run, by id (for tool calls)
        self._lock = threading.Lock()
        self._seq = 0

    def snapshot(self, tenant: str | None = None) -> list[dict[str, Any]]:
        """The runs (of ``tenant`` only, when given) as plain data, newest first."""
        with self._lock:
            if tenant is not None:
                runs = list(self._tenants.get(tenant, {}).values())
            else:
                runs = sorted(self._runs.values(), key=lambda r: r.started)
        return [asdict(r) for r in reversed(runs)]

    async def run_hook(self, event: RunEvent, call_next: NextRun) -> ExecutionResult:
        ctx = event.context
        with self._lock:
            self._seq += 1
            key = ctx.run_id or f"run-{self._seq}"
            record = RunRecord(
                key, short_id(ctx.session_id), ctx.tenant, time.time(), clip(event.code)
            )
            kept = self._tenants.setdefault(ctx.tenant, OrderedDict())
            kept[key] = record
            self._runs[key] = record
            while len(kept) > self.keep:
                old, _ = kept.popitem(last=False)
                self._runs.pop(old, None)
        began = time.perf_counter()
        try:
            result = await call_next(event)
        except BaseException as exc:
            record.outcome = "cancelled" if _cancelled(exc) else "refused"
            record.error = type(exc).__name__
            raise
        finally:
            record.duration_ms = (time.perf_counter() - began) * 1000
        record.output = clip(result.stdout + result.stderr)
        if result.error is not None:
            record.error = clip(f"{result.error.type}: {result.error.message}")
        record.outcome = run_outcome(result)
        return result

    async def tool_layer(self, call: ToolCall, call_next: NextCall) -> Any:
        run_id = call.context.run_id
        record = self._runs.get(run_id) if run_id else None
        if record is None:
            return await call_next(call)
        began = time.perf_counter()
        step = Step(f"{call.server}.{call.tool}", (time.time() - record.started) * 1000)
        if len(record.steps) < MAX_STEPS:
            record.steps.append(step)
        else:
            record.dropped_steps += 1
        try:
            result = await call_next(call)
            step.outcome = "ok"
            return result
        except BaseException as exc:
            step.outcome = "cancelled" if _cancelled(exc) else type(exc).__name__
            raise
        finally:
            step.duration_ms = (time.perf_counter() - began) * 1000


def _cancelled(exc: BaseException) -> bool:
    return any(c.__name__ == "CancelledError" for c in type(exc).__mro__)


_logs: dict[int, RunLog] = {}
_logs_lock = threading.Lock()


def run_log(keep: int = 50) -> RunLog:
    """The process's run log (one per ``keep`` setting; a server has one)."""
    with _logs_lock:
        got = _logs.get(keep)
        if got is None:
            got = _logs[keep] = RunLog(keep)
        return got


__all__ = ["MAX_TEXT", "RunLog", "RunRecord", "Step", "clip", "run_log", "short_id"]
