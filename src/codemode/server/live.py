"""Live output of ``run_code`` to the MCP client that asked for it; the request's ``_meta``.

Each chunk a cell prints goes out on the ``run_code`` request, before its result, as a
progress notification: ``progress`` counts the characters sent so far, ``message`` is the
chunk; at most the server's ``output_limit`` characters in all, like the result. A client
asks for it by sending a progress token with the call (the official client does when
given ``progress_callback``). Log notifications are not used: the logging capability is
deprecated from protocol 2026-07-28 (SEP-2577).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.server.mcpserver import Context

from ..live import OnOutput

if TYPE_CHECKING:
    from .toolset import Call


def mcp_listener(call: Call, limit: int | None = None) -> OnOutput | None:
    """An ``on_output`` sending each chunk to the client of ``call`` (None: no request,
    or no progress token), at most ``limit`` characters in all (the ``output_limit`` of
    the result). Chunks go through ``Call.report_progress``, so the reply layers see
    them (privacy also scans the stream itself, across chunks, in its run hook)."""
    meta = request_meta(call.mcp)
    if meta.get("progress_token") is None and meta.get("progressToken") is None:
        return None  # nobody asked: the worker stops sending after its first chunk
    sent = 0

    async def on_output(stream: str, text: str) -> bool:
        nonlocal sent
        if limit is not None:
            text = text[: max(0, limit - sent)]
        if text:
            sent += len(text)
            await call.report_progress(sent, None, text)
        return limit is None or sent < limit

    return on_output


def request_meta(ctx: Context[Any, Any] | None) -> dict[str, Any]:
    """The ``_meta`` of the MCP request of ``ctx`` (empty when there is none)."""
    if ctx is None:
        return {}
    try:
        meta = ctx.request_context.meta
    except ValueError:
        return {}
    return dict(meta) if meta else {}


__all__ = ["mcp_listener", "request_meta"]
