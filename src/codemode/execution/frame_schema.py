"""The shapes of the worker's frames (pydantic, strict): see :mod:`.frames`.

A module of its own so that importing codemode (``Session``) loads no pydantic: it is
imported with the first worker, off the event loop (:func:`load`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

MAX_ID = 2**53
_STRICT = ConfigDict(strict=True, extra="forbid")
Id = Annotated[int, Field(ge=1, le=MAX_ID)]
Line = Annotated[int, Field(ge=0, le=2**31)]


@with_config(_STRICT)
class WireError(TypedDict):
    type: Annotated[str, Field(max_length=512)]
    message: str
    traceback: str
    lineno: Line | None
    offset: Line | None


@with_config(_STRICT)
class RunUsage(TypedDict):
    cpu_s: NotRequired[Annotated[float, Field(ge=0, allow_inf_nan=False)]]
    peak_rss_bytes: NotRequired[Annotated[int, Field(ge=0, le=2**63)]]


@with_config(_STRICT)
class RunPayload(TypedDict):
    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    error: WireError | None
    duration_ms: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    has_value: bool
    value: Any
    value_is_repr: bool
    value_truncated: bool
    usage: NotRequired[RunUsage]  # the worker's resource use (codemode.result reads it)


@with_config(_STRICT)
class ReadyFrame(TypedDict):
    op: Literal["ready"]
    pid: Annotated[int, Field(ge=1, le=2**32)]
    protocol: NotRequired[int | str | None]  # checked by check_protocol, which names it


@with_config(_STRICT)
class CallFrame(TypedDict):
    op: Literal["call"]
    id: Id
    method: Annotated[str, Field(min_length=1, max_length=200)]
    params: Any  # any JSON: the method's row validates it (codemode.rpc)


@with_config(_STRICT)
class DoneFrame(TypedDict):
    op: Literal["done"]
    id: Id
    result: RunPayload | None


Frame = ReadyFrame | CallFrame | DoneFrame
_FRAME: TypeAdapter[Frame] = TypeAdapter(
    Annotated[ReadyFrame | CallFrame | DoneFrame, Field(discriminator="op")]
)


def validate(msg: Any) -> Frame:
    """``msg`` as a typed frame, or :class:`FrameError` saying what is wrong (never the data)."""
    try:
        return _FRAME.validate_python(msg)
    except ValidationError as exc:
        from .frames import FrameError  # frames loads this module: no import circle

        first = exc.errors(include_url=False, include_input=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "frame"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise FrameError(f"{where}: {first['msg']}{more}"[:300]) from None


__all__ = [
    "MAX_ID",
    "CallFrame",
    "DoneFrame",
    "Frame",
    "ReadyFrame",
    "RunPayload",
    "WireError",
    "validate",
]
