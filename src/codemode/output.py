"""What a client is shown: every reply bounded by one limit, with honest markers.

A run's output reaches people and models through several doors: ``run_code``'s text and
structured content, ``codemode run``'s terminal and ``--json``, the memory tools. Each goes
through this module, so each is cut the same way (``codemode_worker.bounds``: the marker
states the real original size, even when the worker already cut it) and each says how to
get everything on purpose (a saved artifact, ``--full``, ``_`` in the session).

``view_run`` shares one budget between a run's stdout, stderr and value or traceback: a
part smaller than its fair share keeps everything, the rest split what is left. The text
and every structured field are cut from the same pieces, so the structured content never
carries more than the text does.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codemode_worker.bounds import keep_ends, keep_head, marker, split_marker

if TYPE_CHECKING:
    from .result import ExecutionResult

__all__ = [
    "DEFAULT_LIMIT",
    "OUTPUT_ARTIFACT_PREFIX",
    "RunView",
    "bound_json",
    "bound_text",
    "full_text",
    "recut",
    "run_fields",
    "save_full_output",
    "view_run",
]

DEFAULT_LIMIT = 20_000
"""Characters of text (and of structured content) one reply may carry by default."""

OUTPUT_ARTIFACT_PREFIX = "run-output-"
KEEP_OUTPUT_ARTIFACTS = 20
"""Saved full outputs kept per workspace; older ones are deleted when a new one is saved."""

_MIN_PIECE = 200
_MAX_WARNINGS = 10
_MAX_WARNING = 500
_MAX_MESSAGE = 1_000


def bound_text(text: str, limit: int, *, hint: str = "") -> str:
    """``text`` cut in the middle so that, marker included, it fits in ``limit``."""
    if len(text) <= limit:
        return text
    room = limit - len(marker(len(text), len(text), hint=hint)) - 2
    return keep_ends(text, max(room, 0), hint=hint)


def recut(text: str, limit: int, *, middle: bool = True, hint: str = "") -> str:
    """Cut ``text`` that may already carry a marker: the new marker keeps the original size."""
    piece = _Piece.of("", text, True, middle=middle)
    return piece.render(limit, hint)


# --------------------------------------------------------------------------- runs


@dataclass(frozen=True, slots=True)
class _Piece:
    name: str
    raw: str  # as the worker sent it (with its own marker, if it cut)
    text: str  # the same without that marker
    total: int  # the original size (larger than len(text) when the worker cut it)
    middle: bool = True  # cut in the middle (output, tracebacks) or keep the head (values)
    hint: str = ""  # how to get everything, as the worker said
    flagged: bool = False  # said to be cut upstream, without a marker stating the size

    @classmethod
    def of(cls, name: str, raw: str, cut_upstream: bool, *, middle: bool = True) -> _Piece:
        if cut_upstream:
            kept, total, hint = split_marker(raw)
            if total is not None:
                return cls(name, raw, kept, total, middle, hint)
        return cls(name, raw, raw, len(raw), middle, flagged=cut_upstream and name != "traceback")

    @property
    def cut_upstream(self) -> bool:
        return self.total != len(self.text)

    def render(self, budget: int | None, hint: str) -> str:
        if budget is None or (not self.cut_upstream and len(self.text) <= budget):
            return self.raw
        cut = keep_ends if self.middle else keep_head
        hint = "; ".join(h for h in (self.hint, hint) if h)
        return cut(self.text, budget, total=self.total, hint=hint)


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as a client gets it: ``text`` for a model or a terminal, ``fields`` for
    structured content, ``truncated`` naming the parts that were cut."""

    text: str
    fields: dict[str, Any]
    truncated: list[str] = field(default_factory=list)
    sizes: dict[str, int] = field(default_factory=dict)
    parts: dict[str, str] = field(default_factory=dict)
    """Each part as shown in ``text`` (stdout, stderr, value, traceback)."""


def _share(sizes: list[int], budget: int) -> list[int]:
    """Water-filling: small parts keep all, large ones split the rest evenly."""
    out = [0] * len(sizes)
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    left, remaining = budget, len(sizes)
    for i in order:
        fair = max(_MIN_PIECE, left // max(remaining, 1))
        out[i] = min(sizes[i], fair)
        left = max(0, left - out[i])
        remaining -= 1
    return out


def _value_text(result: ExecutionResult) -> str:
    if result.value_is_repr:
        return str(result.value)
    return result.value if isinstance(result.value, str) else repr(result.value)


def _warnings(warnings: tuple[str, ...]) -> list[str]:
    out = [keep_head(w, _MAX_WARNING) for w in warnings[:_MAX_WARNINGS]]
    if len(warnings) > _MAX_WARNINGS:
        out.append(marker(len(warnings) - _MAX_WARNINGS, len(warnings), "warnings"))
    return out


def view_run(
    result: ExecutionResult, limit: int | None = DEFAULT_LIMIT, *, hint: str = ""
) -> RunView:
    """The text and structured fields of ``result``, the text within ``limit`` characters
    (``None``: everything the host holds). ``hint`` says how to get what was cut."""
    if limit is None:
        return _view(result, None, hint)
    budget = limit
    for _ in range(4):  # markers and labels take room too: shrink until the text fits
        view = _view(result, budget, hint)
        over = len(view.text) - limit
        if over <= 0:
            return view
        budget = max(_MIN_PIECE, budget - over)
    return view


def _view(result: ExecutionResult, limit: int | None, hint: str) -> RunView:
    err = result.error
    pieces: list[_Piece] = []
    if result.stdout:
        pieces.append(_Piece.of("stdout", result.stdout, result.stdout_truncated))
    if result.stderr:
        pieces.append(_Piece.of("stderr", result.stderr, result.stderr_truncated))
    if err is not None:
        pieces.append(_Piece.of("traceback", err.traceback or str(err), True))
    elif result.has_value:
        shown = _value_text(result)
        pieces.append(_Piece.of("value", shown, result.value_truncated, middle=False))
    warnings = list(result.warnings) if limit is None else _warnings(result.warnings)
    budgets: list[int | None] = [None] * len(pieces)
    if limit is not None:
        room = max(_MIN_PIECE, limit - sum(len(w) + 11 for w in warnings))
        budgets = list(_share([len(p.text) for p in pieces], room))
    rendered: dict[str, str] = {}
    truncated: list[str] = []
    sizes: dict[str, int] = {}
    for p, budget in zip(pieces, budgets, strict=True):
        rendered[p.name] = p.render(budget, hint)
        sizes[p.name] = p.total
        if p.cut_upstream or p.flagged or rendered[p.name] != p.raw:
            truncated.append(p.name)
    if warnings != list(result.warnings):
        truncated.append("warnings")

    parts: list[str] = []
    if "stdout" in rendered:
        parts.append(rendered["stdout"].rstrip("\n"))
    if "stderr" in rendered:
        parts.append("[stderr]\n" + rendered["stderr"].rstrip("\n"))
    if err is not None:
        parts.append(rendered["traceback"].rstrip("\n"))
        if result.state_lost:
            parts.append("[the session's state was lost: variables and imports are gone]")
    elif "value" in rendered:
        parts.append(rendered["value"])
    parts += [f"[warning] {w}" for w in warnings]

    value: Any = None
    if err is None and result.has_value:
        value = result.value
        budget = budgets[-1]
        if "value" in truncated and budget is not None:
            value = rendered["value"] if isinstance(value, str) else bound_json(value, budget)
    fields: dict[str, Any] = {
        "stdout": rendered.get("stdout", ""),
        "stderr": rendered.get("stderr", ""),
        "value": value,
        "error": None
        if err is None
        else {
            "type": err.type,
            "message": err.message
            if limit is None
            else recut(err.message, _MAX_MESSAGE, middle=False),
            "traceback": rendered["traceback"] if err.traceback else "",
            "lineno": err.lineno,
            "offset": err.offset,
        },
        "warnings": warnings,
    }
    text = "\n".join(parts) if parts else "[no output]"
    return RunView(text, fields, truncated, sizes, rendered)


def run_fields(result: ExecutionResult, view: RunView) -> dict[str, Any]:
    """The structured form of a run (``run_code``'s structured content, ``run --json``)."""
    return {
        "ok": result.is_ok,
        "stdout": view.fields["stdout"],
        "stderr": view.fields["stderr"],
        "value": view.fields["value"],
        "has_value": result.has_value,
        "value_is_repr": result.value_is_repr,
        "error": view.fields["error"],
        "duration_ms": round(result.duration_ms, 3),
        "timed_out": result.timed_out,
        "state_lost": result.state_lost,
        "truncated": view.truncated,
        "sizes": view.sizes,
        "warnings": view.fields["warnings"],
    }


def full_text(result: ExecutionResult) -> str:
    """Everything the host holds of a run, as one text (what a saved full output holds)."""
    return view_run(result, None).text


async def save_full_output(artifacts: Any, text: str, *, keep: int = KEEP_OUTPUT_ARTIFACTS) -> str:
    """Save ``text`` as a ``run-output-...`` artifact; keep only the newest ``keep``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    name = f"{OUTPUT_ARTIFACT_PREFIX}{stamp}-{secrets.token_hex(3)}"
    await artifacts.save(name, text, description=f"full output of a run ({len(text):,} characters)")
    rows = [
        r
        for r in await artifacts.list()
        if str(r.get("name", "")).startswith(OUTPUT_ARTIFACT_PREFIX)
    ]
    rows.sort(key=lambda r: (str(r.get("created", "")), str(r["name"])))
    for old in rows[: max(0, len(rows) - keep)]:
        if old["name"] != name:
            await artifacts.delete(old["name"])
    return name


# --------------------------------------------------------------------------- JSON data


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def _shrink(value: Any, chars: int, items: int) -> Any:
    if isinstance(value, str):
        return keep_head(value, chars) if len(value) > chars else value
    if isinstance(value, list | tuple):
        out = [_shrink(v, chars, items) for v in value[:items]]
        if len(value) > items:
            out.append(marker(len(value) - items, len(value), "items"))
        return out
    if isinstance(value, dict):
        keys = list(value)[:items]
        shrunk = {k: _shrink(value[k], chars, items) for k in keys}
        if len(value) > items:
            shrunk["[truncated]"] = marker(len(value) - items, len(value), "keys")
        return shrunk
    return value


def bound_json(value: Any, limit: int) -> Any:
    """``value`` itself when its JSON fits in ``limit`` characters; otherwise a copy with
    long strings, lists and objects cut (each cut marked with its real size)."""
    size = _size(value)
    if size <= limit:
        return value
    chars, items = max(limit // 2, 64), 1000
    while True:
        shrunk = _shrink(value, chars, items)
        if _size(shrunk) <= limit:
            return shrunk
        if chars <= 64 and items <= 1:
            return marker(size, size, hint="too large to show here")
        chars, items = max(chars // 2, 64), max(items // 2, 1)
