"""A ceiling on one HTTP answer's body from an upstream MCP server.

Streamable HTTP answers a request with an event stream or with one JSON body. The SDK caps
each event of a stream (``max_sse_event_size``) but reads a JSON body whole, however long.
:class:`MessageCap` hooks into httpx's client: a JSON body (or any other that is not an
event stream) ends in :class:`BodyTooLarge` as soon as it passes the ceiling, before the
rest is read. It is an ``httpx2.StreamError``, which the
SDK turns into an error for that request; ``on_too_large`` lets the connection be replaced.

The ceiling is on the body as it will be parsed: a compressed body (``gzip``, ``deflate``)
is inflated here, in pieces never larger than what is left under the ceiling, since a few
KB of gzip can inflate to GBs. Requests offer only those two codings; a body in any other
(``br``, ``zstd``: httpx inflates those when their package is installed) is refused.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2

from codemode.tools.sources.mcp.surrogates import repair_stream

ACCEPT_ENCODING = "gzip, deflate"
_WBITS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class BodyTooLarge(httpx2.StreamError):
    """An answer's body passed the configured ceiling."""


class BodyUnreadable(httpx2.StreamError):
    """An answer's body is in a content coding that is not offered, or is corrupt."""


class _Inflate:
    """One content coding undone, no more output per call than asked for (``deflate`` is
    zlib-wrapped by the standard, raw by some servers: both are read, as httpx does)."""

    def __init__(self, coding: str) -> None:
        self._wbits = _WBITS[coding]
        self._inflate = zlib.decompressobj(self._wbits)
        self._first = True

    def __call__(self, data: bytes, most: int) -> bytes:
        try:
            out = self._inflate.decompress(data, most)
        except zlib.error as exc:
            if not (self._first and self._wbits == zlib.MAX_WBITS):
                raise BodyUnreadable(f"the server's compressed answer is corrupt: {exc}") from None
            self._inflate, self._wbits = zlib.decompressobj(-zlib.MAX_WBITS), -zlib.MAX_WBITS
            return self(data, most)
        self._first = False
        return out


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(
        self,
        inner: httpx2.AsyncByteStream,
        limit: int,
        fail: Callable[[], BodyTooLarge],
        inflate: _Inflate | str | None = None,
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._fail = fail
        self._inflate = inflate

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if isinstance(self._inflate, str):  # raised here, as the body is read: the SDK
            # fails that one request (an error from the transport ends the connection)
            raise BodyUnreadable(
                f"the server answered in the content coding {self._inflate!r}; codemode "
                f"offers only {ACCEPT_ENCODING}"
            )
        size = 0
        async for chunk in self._inner:
            if self._inflate is not None:
                # One byte more than the room left: getting it means the body is too large.
                chunk = self._inflate(chunk, self._limit - size + 1)
            size += len(chunk)
            if size > self._limit:
                raise self._fail()
            if chunk:
                yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class MessageCap:
    """A client's event hooks that limit bodies other than event streams to ``limit`` bytes.

    Hooks, not a transport of our own: a client given a transport ignores the proxies of
    the environment (``HTTPS_PROXY``, ``NO_PROXY``), which upstream servers may need."""

    def __init__(self, limit: int, on_too_large: Callable[[str], None] = lambda reason: None):
        self.limit = limit
        self._on_too_large = on_too_large

    @property
    def hooks(self) -> dict[str, list[Callable[..., Any]]]:
        """For ``httpx2.AsyncClient(event_hooks=...)``."""
        return {"request": [self._request], "response": [self._response]}

    def client(self, **kwargs: Any) -> httpx2.AsyncClient:
        """An ``httpx2.AsyncClient(**kwargs)`` with this cap."""
        return httpx2.AsyncClient(event_hooks=self.hooks, **kwargs)

    def _fail(self) -> BodyTooLarge:
        reason = (
            f"the server sent a message larger than the {self.limit:,}-byte limit "
            "(max_message_bytes in its configuration)"
        )
        self._on_too_large(reason)
        return BodyTooLarge(reason)

    async def _request(self, request: httpx2.Request) -> None:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING

    async def _response(self, response: httpx2.Response) -> None:
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            repair_stream(response, self.limit)  # capped per event by the SDK's reader
            return
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        codings = [
            c.strip().lower()
            for c in response.headers.get_list("content-encoding", split_commas=True)
            if c.strip().lower() not in ("", "identity")
        ]
        inflate: _Inflate | str | None = None
        if codings:
            # Inflated here, under the ceiling (or refused): httpx must not inflate it again.
            del response.headers["content-encoding"]
            response.headers.pop("content-length", None)
            inflate = (
                _Inflate(codings[0])
                if len(codings) == 1 and codings[0] in _WBITS
                else ", ".join(codings)
            )
        response.stream = _CappedStream(response.stream, self.limit, self._fail, inflate)
        repair_stream(response)  # lone surrogates' escapes: see .surrogates
