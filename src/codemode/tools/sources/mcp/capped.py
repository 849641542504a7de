"""A ceiling on one HTTP answer's body from an upstream MCP server.

Streamable HTTP answers a request with an event stream or with one JSON body. The SDK caps
each event of a stream (``max_sse_event_size``) but reads a JSON body whole, however long.
:class:`CappedTransport` wraps httpx's transport: a JSON body (or any other that is not an
event stream) ends in :class:`BodyTooLarge` as soon as it passes the ceiling, before the
rest is read. It is an ``httpx2.StreamError``, which the
SDK turns into an error for that request; ``on_too_large`` lets the connection be replaced.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx2


class BodyTooLarge(httpx2.StreamError):
    """An answer's body passed the configured ceiling."""


class _CappedStream(httpx2.AsyncByteStream):
    def __init__(
        self, inner: httpx2.AsyncByteStream, limit: int, fail: Callable[[], BodyTooLarge]
    ) -> None:
        self._inner = inner
        self._limit = limit
        self._fail = fail

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self._inner:
            size += len(chunk)
            if size > self._limit:
                raise self._fail()
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """``inner`` with bodies other than event streams limited to ``limit`` bytes."""

    def __init__(
        self,
        inner: httpx2.AsyncBaseTransport,
        limit: int,
        on_too_large: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self._inner = inner
        self.limit = limit
        self._on_too_large = on_too_large

    def _fail(self) -> BodyTooLarge:
        reason = (
            f"the server sent a message larger than the {self.limit:,}-byte limit "
            "(max_message_bytes in its configuration)"
        )
        self._on_too_large(reason)
        return BodyTooLarge(reason)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return response  # capped per event by the SDK's reader
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _CappedStream(response.stream, self.limit, self._fail)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
