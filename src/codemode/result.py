"""What one run returns: the agent's value, output and error, as plain data."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An error of the agent's code (or of the run itself: timeout, crash)."""

    type: str
    message: str
    traceback: str = ""
    lineno: int | None = None
    offset: int | None = None

    def __str__(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type

    @classmethod
    def from_dict(cls, d: Any) -> ErrorInfo:
        """From the wire: a field of the wrong shape is described or dropped, never raised."""
        if not isinstance(d, Mapping):
            return cls("WorkerError", f"the worker reported an error as a {type(d).__name__}")
        return cls(
            type=_text(d.get("type")) or "Error",
            message=_text(d.get("message")),
            traceback=_text(d.get("traceback")),
            lineno=_line(d.get("lineno")),
            offset=_line(d.get("offset")),
        )


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """Result of ``Session.run``.

    ``value`` is the last expression's value: JSON-safe values come back as Python
    values; anything else as its ``repr`` with ``value_is_repr`` set. Nothing from the
    worker is ever unpickled.
    """

    value: Any = None
    value_is_repr: bool = False
    value_truncated: bool = False
    has_value: bool = False
    stdout: str = ""
    stderr: str = ""
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    error: ErrorInfo | None = None
    duration_ms: float = 0.0
    timed_out: bool = False
    state_lost: bool = False
    warnings: tuple[str, ...] = field(default_factory=tuple)
    cpu_seconds: float | None = None
    """CPU time the worker spent on this run (all its threads), when the executor knows."""
    peak_memory_bytes: int | None = None
    """The worker process's peak resident memory so far, when the executor knows."""

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any], duration_ms: float) -> ExecutionResult:
        """Build a result from the worker's answer (plain JSON; never unpickled)."""
        err = payload.get("error")
        usage = payload.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        cpu, peak = usage.get("cpu_s"), usage.get("peak_rss_bytes")
        return cls(
            value=payload.get("value"),
            value_is_repr=bool(payload.get("value_is_repr")),
            value_truncated=bool(payload.get("value_truncated")),
            has_value=bool(payload.get("has_value")),
            stdout=str(payload.get("stdout", "")),
            stderr=str(payload.get("stderr", "")),
            stdout_truncated=bool(payload.get("stdout_truncated")),
            stderr_truncated=bool(payload.get("stderr_truncated")),
            error=ErrorInfo.from_dict(err) if err else None,
            duration_ms=duration_ms,
            cpu_seconds=float(cpu) if isinstance(cpu, int | float) and cpu >= 0 else None,
            peak_memory_bytes=int(peak) if isinstance(peak, int | float) and peak > 0 else None,
        )

    @property
    def is_ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["is_ok"] = self.is_ok
        d["warnings"] = list(self.warnings)
        return d

    def to_text(self, limit: int | None = 20_000) -> str:
        """Compact text for a model: output, then the value or the error, within ``limit``
        characters (``None``: everything); cuts are marked with the real original size."""
        from .output import view_run

        return view_run(self, limit).text


def timeout_error(
    timeout: float, *, traceback: str = "", lineno: int | None = None, state_lost: bool = False
) -> ErrorInfo:
    """The error of a run stopped by its timeout (the interrupt's traceback, renamed)."""
    msg = f"the run was stopped after its {timeout:g} s timeout"
    if state_lost:
        msg += (
            "; it ignored the interrupt, so its worker was stopped and the session's state was lost"
        )
    if traceback:
        head, sep, _ = traceback.rstrip("\n").rpartition("\n")
        traceback = f"{head}{sep}Timeout: {msg}\n"
    return ErrorInfo("Timeout", msg, traceback=traceback, lineno=lineno)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _line(value: Any) -> int | None:
    return value if type(value) is int and 0 <= value < 2**31 else None
