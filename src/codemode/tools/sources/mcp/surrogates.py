"""Lone surrogates in an upstream server's JSON: shown as U+FFFD, with a count, over every
transport.

JSON may escape a lone surrogate (``"\\ud800"``), which no UTF-8 text can carry and which
the SDK's parser (pydantic) refuses, losing the whole answer. A message holding such an
escape is parsed here with Python's ``json`` instead, each one becomes U+FFFD, and a
result says how many in its ``_meta`` (``convert.call_result`` turns that into the call's
warning). The stdio reader repairs each line it could not parse (``stdio._parse``); over
HTTP the SDK parses the bytes itself, so they are repaired before it reads them: a JSON
body whole (the SDK reads it whole too), an event stream event by event, each event held
only until its end (which the SDK waits for as well). Messages without a surrogate escape
pass unchanged, after one byte search.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx2
from mcp.shared._httpx_utils import create_mcp_http_client

from codemode.tools.convert import replace_lone_surrogates

__all__ = [
    "LONE_ESCAPE",
    "LONE_SURROGATES_META",
    "repair_body",
    "repair_response",
    "repair_stream",
    "repaired",
    "repairing_client",
]

LONE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
"""A surrogate's escape, lone or half of a pair: a message with none needs no repair."""
LONE_SURROGATES_META = "codemode/lone_surrogates"
"""Where a repaired answer's ``result._meta`` says how many lone surrogates it held."""
_EVENT_END = re.compile(rb"(?:\r\n|\n|\r(?!\n))(?:\r\n|\n|\r(?!\n))")
"""A blank line: the end of an event (``\\r\\n`` is one line break, never two)."""
_LINE = re.compile(rb"\r\n|\n|\r")
_BLANK = (b"\n\n", b"\r\r", b"\r\n\r\n", b"\n\r\n", b"\r\n\n")


def _last_end(tail: bytes, chunk: bytes) -> int:
    """Where in ``chunk`` the last blank line that ends in it ends (0: none); ``tail``: the
    bytes before it, in which such a line may begin. Searches for one byte, from the end
    (``memrchr``: a large event's chunks hold no line break at all), and a look at the
    few bytes before each break found."""
    stop = len(chunk)
    for _ in range(16):
        at = max(chunk.rfind(b"\n", 0, stop), chunk.rfind(b"\r", 0, stop))
        if at < 0:
            return 0
        near = (tail + chunk[: at + 1])[-4:] if at < 3 else chunk[at - 3 : at + 1]
        if near.endswith(_BLANK):
            return at + 1
        stop = at
    return max(chunk.rfind(b) + len(b) if b in chunk else 0 for b in _BLANK)  # many lines


def _maybe(data: bytes | bytearray) -> bool:
    """Whether ``data`` may hold a surrogate's escape: a ``memchr`` for a backslash (~80
    GB/s), then the regex (~4 GB/s; ``in`` of a 3-byte needle runs at a quarter of that)."""
    return b"\\" in data and LONE_ESCAPE.search(data) is not None


def repaired(message: Any) -> tuple[Any, int]:
    """``message`` (parsed JSON) with each lone surrogate as U+FFFD, how many there were,
    and that count in its result's ``_meta`` (the same object when there were none)."""
    message, count = replace_lone_surrogates(message)
    result = message.get("result") if isinstance(message, dict) else None
    if count and isinstance(result, dict):
        meta = result.get("_meta")
        meta = meta if isinstance(meta, dict) else {}
        result["_meta"] = {**meta, LONE_SURROGATES_META: count}
    return message, count


def repair_body(data: bytes) -> bytes:
    """One JSON message, its lone surrogates repaired (``data`` itself when it has none or
    is not JSON: the SDK then says what is wrong with it, as before)."""
    if not _maybe(data):
        return data
    try:
        message, count = repaired(json.loads(data))
    except (ValueError, RecursionError):
        return data
    if not count:
        return data  # only pairs: a parser reads them
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()


def _repair_event(event: bytes) -> bytes:
    """One event (its lines and the blank line that ends it) with its data repaired."""
    if not _maybe(event):
        return event
    lines = _LINE.split(event)
    joined = b"\n".join(ln[5:].removeprefix(b" ") for ln in lines if ln.startswith(b"data:"))
    fixed = repair_body(joined)
    if fixed is joined:
        return event
    others = [ln for ln in lines if ln and not ln.startswith(b"data:")]
    return b"".join(ln + b"\n" for ln in [*others, b"data: " + fixed]) + b"\n"


class _RepairedBody(httpx2.AsyncByteStream):
    """A JSON body, read whole, then repaired."""

    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        chunks = [chunk async for chunk in self._inner]
        body = b"".join(chunks)  # one chunk: the SDK's join of it is no copy
        if body:
            yield repair_body(body)

    async def aclose(self) -> None:
        await self._inner.aclose()


class _RepairedEvents(httpx2.AsyncByteStream):
    """An event stream whose events are passed on whole, each repaired. An event longer
    than ``limit`` is passed on as it comes (the SDK refuses it by its own cap)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int | None) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held: list[bytes] = []  # the unfinished event's pieces
        size = 0
        flowing = False  # an event past the limit: passed on until its end
        async for chunk in self._inner:
            cut = _last_end(b"".join(held[-3:])[-3:], chunk)
            if cut <= 0:
                if flowing:
                    yield chunk
                    continue
                held.append(chunk)
                size += len(chunk)
                if self._limit is not None and size > self._limit:
                    flowing = True
                    yield b"".join(held)
                    held, size = [], 0
                continue
            done = b"".join([*held, chunk[:cut]])
            if flowing:
                flowing = False
                yield done
            elif _maybe(done):
                start = 0
                for m in _EVENT_END.finditer(done):
                    yield _repair_event(done[start : m.end()])
                    start = m.end()
                if start < len(done):
                    yield done[start:]
            else:
                yield done
            rest = chunk[cut:]
            held, size = ([rest], len(rest)) if rest else ([], 0)
        if held:
            yield b"".join(held)

    async def aclose(self) -> None:
        await self._inner.aclose()


def repair_stream(response: httpx2.Response, limit: int | None = None) -> None:
    """Have ``response``'s body repaired as it is read (see the module's doc)."""
    assert isinstance(response.stream, httpx2.AsyncByteStream)
    if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
        coded = response.headers.get("content-encoding", "identity").lower() != "identity"
        if not coded:  # (compressed, its events' ends cannot be seen here: not repaired)
            response.stream = _RepairedEvents(response.stream, limit)
    else:
        response.stream = _RepairedBody(response.stream)


async def repair_response(response: httpx2.Response) -> None:
    """An httpx response hook: :func:`repair_stream` without a cap on held events."""
    repair_stream(response)


def repairing_client(
    headers: dict[str, str] | None = None,
    timeout: httpx2.Timeout | None = None,
    auth: httpx2.Auth | None = None,
) -> httpx2.AsyncClient:
    """The legacy SSE transport's client (``sse_client(httpx_client_factory=...)``): the
    SDK's, with the repair hook."""
    client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
    client.event_hooks["response"] = [*client.event_hooks["response"], repair_response]
    return client
