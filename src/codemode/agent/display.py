"""One line (or a few) per agent event, for ``codemode task`` and ``verbose=True``.

The code is the model's and the output quotes what tools returned (a web page, a file, an
upstream server's error): every line goes through :func:`codemode.printable.printable`,
so neither can move the cursor, rewrite earlier lines or set the terminal's clipboard."""

from __future__ import annotations

from codemode_worker.bounds import keep_head

from ..printable import printable
from .loop import AgentEvent

PREVIEW_LINES = 6
PREVIEW_CHARS = 400


def _preview(text: str, prefix: str) -> str:
    text = text.rstrip("\n")
    if len(text) > PREVIEW_CHARS:
        text = keep_head(text, PREVIEW_CHARS).rstrip("\n")
    lines = text.splitlines() or [""]
    if len(lines) > PREVIEW_LINES:
        lines = [*lines[:PREVIEW_LINES], f"... ({len(lines) - PREVIEW_LINES} more lines)"]
    return "\n".join(prefix + printable(ln) for ln in lines)


def render_event(event: AgentEvent) -> str:
    head = f"[{event.step}/{event.max_steps}]"
    if event.kind == "model":
        return f"{head} asking the model..."
    if event.kind == "code":
        return f"{head} running code:\n{_preview(event.text, '    │ ')}"
    if event.kind == "output":
        mark = "output" if event.ok else "error"
        return f"{head} {mark}:\n{_preview(event.text, '    > ')}"
    if event.kind == "answer":
        return f"{head} answered."
    return f"{head} stopped: {printable(event.text)}"
