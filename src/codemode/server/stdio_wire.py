"""The two ends of ``codemode serve``'s stdio wire: lines in, messages out.

Why not the SDK's ``stdio_server``: it hands a line that is not a valid JSON-RPC message
to the server as an exception, which logs it and answers nothing, so a client that sent
a request with a bad ``params`` (or a line cut short) waits for its answer for ever; and
it reads a line of any length into memory. Here:

- a line that is not JSON is answered ``-32700`` (parse error, ``id: null``);
- JSON that is not a message MCP accepts is answered ``-32600`` (invalid request), with
  the request's ``id`` when it has a usable one (a string or an integer), else ``null``;
- a line longer than the limit (``CODEMODE_STDIO_MAX_MESSAGE_MB``, default 16 MiB; HTTP
  takes 4 MiB) is skipped as it streams by, never held whole, and answered ``-32600``
  with its ``id`` when the line's head names one, or its end (``"id"`` written last);
- a request whose progress token is over 1,024 characters is answered ``-32602`` with
  its id (:mod:`.posts`: every progress notification repeats the token);
- blank lines are ignored;
- at most ``CODEMODE_STDIO_MAX_IN_FLIGHT`` requests (default 256) are in progress at
  once; one more is answered ``-32000`` at once, not queued. A client that wrote
  requests without reading the answers grew the server's memory without bound (100,000
  pings: 1.1 GB); now, once the answers fill the pipe, the server stops reading. Answers
  not yet written count as well (``stdio.py``): a request cancelled at once frees its
  slot, but not its answer, already on its way to a client that does not read it.

Like the SDK, fd 0 is pointed at ``/dev/null`` while serving (a handler or child that
reads stdin gets EOF instead of stealing the client's messages); the wire is a private
duplicate.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from .connections import env_number
from .posts import BAD_ID, long_progress_token

MAX_MESSAGE_ENV = "CODEMODE_STDIO_MAX_MESSAGE_MB"
DEFAULT_MAX_MESSAGE_MB = 16
MAX_IN_FLIGHT_ENV = "CODEMODE_STDIO_MAX_IN_FLIGHT"
DEFAULT_MAX_IN_FLIGHT = 256
BUSY = -32000
READ_CHUNK = 1 << 16
_HEAD = 512  # bytes of each end of an oversized line searched for its id
_HEAD_ID = re.compile(rb'^\s*\{[^{}\[\]]*?"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]{0,200})")')
# The id as the object's last member (serializers that write it after "params"): one
# closing brace after it, so a nested object's "id" (two or more) is not taken for it.
_TAIL_ID = re.compile(rb',\s*"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]{0,200})")\s*\}\s*$')

__all__ = [
    "MAX_IN_FLIGHT_ENV",
    "MAX_MESSAGE_ENV",
    "Oversized",
    "StdinWire",
    "max_in_flight",
    "max_message",
    "message_of",
    "too_many",
]


def max_message(env: Mapping[str, str] | None = None) -> int:
    """The longest line taken, in bytes (``CODEMODE_STDIO_MAX_MESSAGE_MB``)."""
    mb: float = env_number(
        os.environ if env is None else env, MAX_MESSAGE_ENV, float, DEFAULT_MAX_MESSAGE_MB
    )
    return int(mb * (1 << 20))


def max_in_flight(env: Mapping[str, str] | None = None) -> int:
    """Requests in progress at once (``CODEMODE_STDIO_MAX_IN_FLIGHT``)."""
    most: int = env_number(
        os.environ if env is None else env, MAX_IN_FLIGHT_ENV, int, DEFAULT_MAX_IN_FLIGHT
    )
    return most


def too_many(message: SessionMessage, most: int) -> SessionMessage | None:
    """The answer to ``message`` when ``most`` requests are already in progress, or None
    when it may go through: notifications and answers to the server's own requests
    always do (a call waiting for one would otherwise wait for ever)."""
    request = message.message
    if not isinstance(request, types.JSONRPCRequest):
        return None
    text = (
        f"this client already has {most} requests in progress or answers not read yet "
        f"({MAX_IN_FLIGHT_ENV}): read their answers before sending more"
    )
    return _error(request.id, BUSY, text)


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the limit: only its two ends (for the id) and its length are kept."""

    head: bytes
    size: int
    tail: bytes = b""


class StdinWire:
    """fd 0 as a private descriptor, read in chunks, split into bounded lines."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            os.dup2(null, 0)
        finally:
            os.close(null)

    async def _chunk(self) -> bytes:
        # A blocking read in a thread (as the SDK does): the process exits with
        # os._exit once done, so a read the client never completes does not hold it.
        return await anyio.to_thread.run_sync(os.read, self._fd, READ_CHUNK, abandon_on_cancel=True)

    async def lines(self) -> AsyncIterator[bytes | Oversized]:
        """Each line without its newline (a last line without one too), or ``Oversized``."""
        buf = bytearray()
        skipping: Oversized | None = None  # the head of the line being skipped
        skipped = 0
        tail = b""  # the last bytes of the line being skipped
        while True:
            chunk = await self._chunk()
            if not chunk:
                break
            start = 0
            while start < len(chunk):
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                start = len(chunk) if end < 0 else end + 1
                if skipping is not None:
                    skipped += len(piece)
                    tail = (tail + piece)[-_HEAD:]
                elif len(buf) + len(piece) > self.limit:
                    skipping = Oversized(bytes((buf + piece)[:_HEAD]), 0)
                    skipped = len(buf) + len(piece)
                    tail = bytes((buf[-_HEAD:] + piece)[-_HEAD:])
                    buf.clear()
                else:
                    buf += piece
                if end < 0:
                    continue
                if skipping is not None:
                    yield Oversized(skipping.head, skipped, tail)
                    skipping, skipped, tail = None, 0, b""
                else:
                    yield bytes(buf)
                    buf.clear()
        if skipping is not None:
            yield Oversized(skipping.head, skipped, tail)
        elif buf:
            yield bytes(buf)

    def close(self) -> None:
        os.close(self._fd)


def _error(id_: Any, code: int, message: str) -> SessionMessage:
    error = types.JSONRPCError(
        jsonrpc="2.0", id=id_, error=types.ErrorData(code=code, message=message)
    )
    return SessionMessage(error)


def _request_id(data: Any) -> str | int | None:
    """The id to answer an invalid request with: a request's (it has a method) string
    or integer id; ``None`` otherwise (a bad response's id names one of our requests)."""
    if not isinstance(data, dict) or "method" not in data:
        return None
    found = data.get("id")
    if isinstance(found, bool) or not isinstance(found, int | str):
        return None
    return found


def _has_id(text: str) -> bool:
    if '"id"' not in text:
        return False
    data = json.loads(text)
    return isinstance(data, dict) and "id" in data


def message_of(line: bytes | Oversized, limit: int) -> tuple[SessionMessage | None, bool]:
    """``(message, is_error)``: the client's message, or the error to answer it with
    (``is_error``); ``(None, False)`` for a blank line."""
    if isinstance(line, Oversized):
        m = _HEAD_ID.match(line.head) or _TAIL_ID.search(line.tail)
        id_: Any = None
        if m is not None:
            id_ = json.loads(m.group(1))
        text = (
            f"Invalid Request: a message of {line.size:,} bytes; this server takes at most "
            f"{limit:,} ({MAX_MESSAGE_ENV}); it was skipped"
        )
        return _error(id_, types.INVALID_REQUEST, text), True
    text = line.decode("utf-8", "replace")
    if not text.strip():
        return None, False
    try:
        message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except ValidationError:
        pass
    else:
        if isinstance(message, types.JSONRPCRequest):
            why = long_progress_token(message.params)
            if why is not None:
                return _error(message.id, types.INVALID_PARAMS, why), True
        if not (isinstance(message, types.JSONRPCNotification) and _has_id(text)):
            return SessionMessage(message), False
        # An id MCP does not allow (null, an object): read as a notification, it would
        # never be answered while its sender waits.
        return _error(None, types.INVALID_REQUEST, BAD_ID), True
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return _error(None, types.PARSE_ERROR, "Parse error: the line is not JSON"), True
    why = (
        "Invalid Request: not a JSON-RPC 2.0 message MCP accepts (a request needs "
        '"jsonrpc": "2.0", a string "method", an object "params" if any, and a string or '
        "integer id; batches are not accepted)"
    )
    return _error(_request_id(data), types.INVALID_REQUEST, why), True
