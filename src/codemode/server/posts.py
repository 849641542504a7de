"""What a ``POST /mcp`` body must be before the SDK sees it: one message whose id can be
answered.

Why: the SDK's streamable HTTP transport answered three kinds of body badly, where the
stdio wire (:mod:`.stdio_wire`) already answers them clearly:

- a request whose id MCP does not allow (``null``, ``1.5``, an object) was read as a
  notification: ``202`` and no answer, while its sender waits for one;
- a batch (a JSON array) got ``-32602`` (invalid *params*) and a dump of pydantic's
  validation errors;
- a request reusing the id of one still in progress in the same MCP session (``5`` and
  ``"5"`` are one id to the SDK) took over that request's answer stream: the first
  request's answer was dropped and its ``POST`` stayed open for ever, kept alive by the
  stream's pings.

Each is now answered ``400`` with a JSON-RPC ``-32600`` (invalid request) and ``id:
null`` (the id of a request still running would hand the client's waiter for that one
this error). A request whose progress token is over :data:`MAX_PROGRESS_TOKEN` is
answered ``-32602`` with its id (the stdio wire refuses it too). Anything else goes to
the SDK unchanged, which answers the rest (parse errors, a body over its 4 MiB limit:
``413``); a body over that limit is not parsed here.
This module knows JSON-RPC, ASGI and ``_meta.progressToken``, not MCP's methods.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types as types
import pydantic_core
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.types import Message, Receive

__all__ = [
    "BAD_ID",
    "MAX_PROGRESS_TOKEN",
    "BodyCheck",
    "InFlightIds",
    "long_progress_token",
    "read_body",
]

MAX_PROGRESS_TOKEN = 1024
"""The longest progress token taken, in characters. Every progress notification of a
call repeats its token: a 3 MB one made the server hold ~27 MB per call for a client
that did not read its stream (a few copies waiting in the SDK's buffers), and serialize
3 MB per printed chunk for one that did."""

_BATCH = (
    "Invalid Request: a batch (a JSON array of messages) is not accepted: MCP removed "
    "JSON-RPC batches (protocol 2025-06-18); POST one message at a time"
)
BAD_ID = "Invalid Request: an id must be a string or an integer (MCP: never null)"
"""The answer to a request whose id MCP does not allow (HTTP here, and the stdio wire)."""


def long_progress_token(params: Any) -> str | None:
    """Why a request's ``params`` cannot be taken (a progress token over the limit), or None."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    token = meta.get("progressToken") if isinstance(meta, dict) else None
    if not isinstance(token, str) or len(token) <= MAX_PROGRESS_TOKEN:
        return None
    return (
        f"Invalid params: a progressToken of {len(token):,} characters; this server takes at "
        f"most {MAX_PROGRESS_TOKEN:,} (every progress notification repeats it)"
    )


def _reused(key: str) -> str:
    return (
        f"Invalid Request: the id {key!r} names a request of this session still in progress "
        "(MCP: an id is never reused within a session); send this request with a new id"
    )


class InFlightIds:
    """The request ids in progress in each MCP session, as the SDK keys them (``str(id)``)."""

    def __init__(self) -> None:
        self._ids: dict[str, set[str]] = {}

    def __len__(self) -> int:
        return sum(len(ids) for ids in self._ids.values())

    @contextmanager
    def hold(self, sid: str, key: str) -> Iterator[bool]:
        """Yield whether ``key`` was free in ``sid``; it is held until the block ends."""
        ids = self._ids.setdefault(sid, set())
        if key in ids:
            yield False
            return
        ids.add(key)
        try:
            yield True
        finally:
            ids.discard(key)
            if not ids:
                self._ids.pop(sid, None)


async def read_body(receive: Receive, limit: int) -> tuple[bytes | None, Receive]:
    """The whole body (None once it passes ``limit`` bytes) and a ``receive`` that hands
    the app every message read here, then the rest."""
    read: list[Message] = []
    size = 0
    whole = True
    while True:
        message = await receive()
        read.append(message)
        if message["type"] != "http.request":
            whole = False  # a disconnect: the app sees it as it would have
            break
        size += len(message.get("body", b""))
        if size > limit:
            whole = False
            break
        if not message.get("more_body", False):
            break
    body = b"".join(m.get("body", b"") for m in read) if whole else None

    async def again() -> Message:
        return read.pop(0) if read else await receive()

    return body, again


class BodyCheck:
    """The verdict on one body: ``error`` (a JSON-RPC error to answer with) or the id
    to hold while the request runs (``key``)."""

    __slots__ = ("error", "key")

    def __init__(self, body: bytes | None) -> None:
        self.error: dict[str, Any] | None = None
        self.key: str | None = None
        if body is None:
            return
        if body.lstrip()[:1] == b"[":
            self.error = _invalid(_BATCH)
            return
        try:
            data = pydantic_core.from_json(body)
        except ValueError:
            return  # the SDK answers a parse error
        if not isinstance(data, dict) or "id" not in data or "method" not in data:
            return
        found = data["id"]
        if isinstance(found, bool) or not isinstance(found, int | str):
            self.error = _invalid(BAD_ID)
        elif (why := long_progress_token(data.get("params"))) is not None:
            self.error = _invalid(why, types.INVALID_PARAMS, found)
        else:
            self.key = str(found)

    def reused(self) -> dict[str, Any]:
        assert self.key is not None
        return _invalid(_reused(self.key))


def _invalid(
    message: str, code: int = types.INVALID_REQUEST, id_: str | int | None = None
) -> dict[str, Any]:
    """The error; with the id only of a request that will not run (never one running)."""
    return {"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}}


MAX_BODY = DEFAULT_MAX_REQUEST_BODY_SIZE
