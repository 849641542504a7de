"""The spans of a run, from plain values: what a run's calls note while it is live, and
how the spans are built from it after the run, in the server (``Tracing``'s emitter
thread) or in the export process (``readable_spans``). No SDK object is touched while a
run is live; these functions are where OpenTelemetry spans get made.

Attributes follow the GenAI semantic conventions where they apply; code, arguments and
results never go into a span: their SHA-256 and sizes do.
"""

from __future__ import annotations

import hmac
import random
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .metrics import output_size, run_outcome
from .sizes import canonical, size_of

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import Span, Status, Tracer

    from ..context import CallContext
    from ..result import ExecutionResult

Record = tuple[Any, ...]
"""A finished run (or a call outside any run) as plain values (``Tracing._record``):
trace id, span id, parent span id (0: a root), parent is remote, parent's trace flags,
parent's tracestate header, start and end (ns), ``"run"`` or ``"op"``, the run's
``(code, attributes, error type)`` or the call's ``op_fields``, and the fields of the
run's calls."""


DIGEST_KEY = secrets.token_bytes(32)
"""This process's key; its span export process is handed it as the first frame on its
stdin (``export_process``), never in its environment or argv, which other processes of
the user (or, for argv, other users) can read."""


def digest(text: str) -> str:
    """HMAC-SHA256 of ``text`` under a key of this server process (shared with its export
    process): equal arguments (or code) match across its spans, but a tracing backend
    cannot confirm a guessed value (a card number, an id) by hashing candidates, as it
    could with a plain SHA-256."""
    return hmac.digest(DIGEST_KEY, text.encode("utf-8", "surrogatepass"), "sha256").hex()


@dataclass(slots=True)
class Op:
    """A tool call (``method`` None) or memory operation of a run, noted cheaply: only
    immutable values, so the emitter thread can read them later."""

    server: str
    tool: str
    method: str | None
    run_id: str | None
    start: int
    args_text: Any = ""
    """A tool call's arguments as canonical JSON (hashed later), or the arguments as they
    arrived (a dict: layers replace ``ToolCall.args``, never change it), encoded off the
    run's path by ``texts`` or ``attributes``."""
    params_bytes: int = 0
    result_bytes: int | None = None
    end: int = 0
    error: str | None = None

    def name(self) -> str:
        if self.method is None:
            return f"execute_tool {self.server}.{self.tool}"
        return f"codemode.memory {self.method}"

    def attributes(self) -> dict[str, Any]:
        if self.method is None:
            text = self.args_text
            if type(text) is not str:
                text = canonical(text)
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": f"{self.server}.{self.tool}",
                "gen_ai.tool.type": "function",
                "codemode.tool.server": self.server,
                "codemode.tool.arguments.bytes": size_of(text),
                "codemode.tool.arguments.hmac": digest(text),
            }
            if self.result_bytes is not None:
                attrs["codemode.tool.result.bytes"] = self.result_bytes
        else:
            attrs = {
                "codemode.memory.method": self.method,
                "codemode.memory.area": self.method.partition(".")[0],
                "codemode.memory.params.bytes": self.params_bytes,
            }
            if self.result_bytes is not None:
                attrs["codemode.memory.result.bytes"] = self.result_bytes
        if self.run_id:
            attrs["codemode.run.id"] = self.run_id
        return attrs


OpFields = tuple[Any, ...]
"""An ``Op`` as its fields in order (``Op(*fields)`` rebuilds it): what the calls of a
run note, one tuple each (no object to build and fill in while the run is live)."""


def op_fields(op: Op) -> OpFields:
    """``Op(*fields)`` rebuilds it in the export process."""
    return (op.server, op.tool, op.method, op.run_id, op.start, op.args_text,
            op.params_bytes, op.result_bytes, op.end, op.error)  # fmt: skip


CallNote = tuple[Any, ...]
"""What a returned call of a traced run notes while the run is live (``observe.CallWatch``):
``(call, args, start, end, result bytes)``, times on ``perf_counter_ns``'s clock. ``texts``
makes it the call's ``OpFields`` after the run (the span's times: plus ``_Run.offset``);
the tally's fold reads it as it is (``Tally._ops``). Five values taken on the event loop,
the rest read off the call later: its server, tool and context stay as they were."""


def texts(ops: list[Any], offset: int = 0) -> list[OpFields]:
    """``ops`` as ``OpFields`` (``CallNote``s made so, their times plus ``offset``) with
    each tool call's arguments as canonical JSON, in place (what the export process is
    handed, plain strings hashed there; the tally's fold then measures them without
    encoding them again, ``Tally._ops``)."""
    for i, fields in enumerate(ops):
        if len(fields) == 5:  # a CallNote
            call, args, start, end, received = fields
            if type(args) is not str:
                args = canonical(args)
            ops[i] = (call.server, call.tool, None, call.context.run_id, offset + start,
                      args, 0, received, offset + end, None)  # fmt: skip
            continue
        args = fields[5]
        if type(args) is not str:
            ops[i] = (*fields[:5], canonical(args), *fields[6:])
    return ops


def failed(span: Span, error_type: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR))  # no description: it may quote values


def children(tracer: Tracer, span: Span, ops: list[OpFields]) -> None:
    if not ops:
        return
    from opentelemetry import trace

    parent = trace.set_span_in_context(span)
    for fields in ops:
        op = Op(*fields)
        child = tracer.start_span(
            op.name(),
            context=parent,
            attributes=op.attributes(),
            start_time=op.start,
            record_exception=False,
            set_status_on_exception=False,
        )
        if op.error is not None:
            failed(child, op.error)
        child.end(end_time=op.end)


def readable_spans(record: Record, resource: Any, scope: Any) -> list[ReadableSpan]:
    """In the export process: the finished spans of one record, made directly with the
    identity, parent and times the server decided. They are what the SDK's spans would
    be once ended, at a tenth of the CPU (measured 1.1 vs 10.8 µs a span): no live span,
    lock or limits to check on attributes codemode made itself."""
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.trace import SpanContext, TraceFlags, TraceState

    trace_id, span_id, parent_id, remote, flags, state, start, end, kind, body, ops = record
    trace_state = TraceState.from_header([state]) if state else None
    sampled = TraceFlags(TraceFlags.SAMPLED)
    context = SpanContext(trace_id, span_id, False, sampled, trace_state)
    parent = (
        SpanContext(trace_id, parent_id, remote, TraceFlags(flags), trace_state)
        if parent_id
        else None
    )
    if kind == "run":
        code, attrs, error = body
        if type(attrs) is not dict:  # run_summary's values (Tracing._record)
            attrs = summary_attrs(tuple(attrs))
        name = "codemode.run"
        attrs["codemode.code.hmac"] = digest(code)
    else:
        op = Op(*body)
        name, attrs, error = op.name(), op.attributes(), op.error

    def span(
        name: str, ctx: SpanContext, up: SpanContext | None, attrs: dict[str, Any],
        error: str | None, start: int, end: int,
    ) -> ReadableSpan:  # fmt: skip
        if error is not None:
            attrs["error.type"] = error
        return ReadableSpan(
            name, ctx, up, resource, attrs, status=_status(error), start_time=start,
            end_time=end, instrumentation_scope=scope,
        )  # fmt: skip

    spans = [span(name, context, parent, attrs, error, start, end)]
    for fields in ops:
        op = Op(*fields)
        child = SpanContext(trace_id, random_id(64), False, sampled, trace_state)
        spans.append(span(op.name(), child, context, op.attributes(), op.error, op.start, op.end))
    return spans


def _status(error: str | None) -> Status:
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.UNSET if error is None else StatusCode.ERROR)


def random_id(bits: int) -> int:
    """A trace (128) or span (64) id as the SDK's ``RandomIdGenerator`` makes it."""
    while not (got := random.getrandbits(bits)):
        pass
    return got


def run_attrs(
    code: str, timeout: float, ctx: CallContext, result: ExecutionResult | None
) -> dict[str, Any]:
    """The run span's attributes (``result`` None: the run raised, e.g. a refusal)."""
    if result is None:
        return summary_attrs(run_summary(code, timeout, ctx))
    return summary_attrs(run_summary(code, timeout, ctx, run_outcome(result), output_size(result),
                                     result.cpu_seconds, result.peak_memory_bytes))  # fmt: skip


RunSummary = tuple[Any, ...]
"""A finished run's span attributes as a flat tuple of immutable values
(``run_summary``): what the export process is handed instead of a dict."""


def run_summary(
    code: str,
    timeout: float,
    ctx: CallContext,
    outcome: str | None = None,
    out: int = 0,
    cpu: float | None = None,
    peak: int | None = None,
) -> RunSummary:
    """``run_attrs``'s values (``outcome`` None: the run raised). ``observe.Observe``
    keeps these arguments (immutable) while the run is live and the emitter calls this,
    with the outcome and output size the metrics layer already measured: no encoding
    twice, and nothing of it on the run's path."""
    head = (ctx.run_id or "", ctx.session_id or "", ctx.tenant, size_of(code), timeout)
    if outcome is None:
        return head
    return (*head, outcome, out, cpu, peak)


def summary_attrs(summary: RunSummary) -> dict[str, Any]:
    """The run span's attributes from ``run_summary``."""
    attrs: dict[str, Any] = {
        "codemode.run.id": summary[0],
        "codemode.session.id": summary[1],
        "codemode.tenant": summary[2],
        "codemode.code.bytes": summary[3],
        "codemode.run.timeout_s": summary[4],
    }
    if len(summary) == 5:
        return attrs
    _, _, _, _, _, outcome, out, cpu, peak = summary
    attrs["codemode.run.outcome"] = outcome
    attrs["codemode.output.bytes"] = out
    if cpu is not None:
        attrs["codemode.run.cpu_s"] = cpu
    if peak is not None:
        attrs["codemode.worker.peak_memory_bytes"] = peak
    return attrs


__all__ = [
    "CallNote",
    "Op",
    "OpFields",
    "Record",
    "RunSummary",
    "children",
    "digest",
    "failed",
    "op_fields",
    "random_id",
    "readable_spans",
    "run_attrs",
    "run_summary",
    "summary_attrs",
    "texts",
]
