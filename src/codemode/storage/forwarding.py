"""``ForwardingStorage``: a ``Storage`` that passes every call to the one it wraps.

Wrappers (quotas, write watchers) override only the calls they change, so a method added
to the ``Storage`` protocol is forwarded in one place.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any

from .base import CHUNK, Data, Listing, RecordInfo, Storage


class ForwardingStorage:
    """Every ``Storage`` call goes to ``inner``; subclasses override what they add to."""

    def __init__(self, inner: Storage) -> None:
        self.inner = inner

    def describe(self) -> str:
        return self.inner.describe()

    async def put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None = None
    ) -> RecordInfo:
        return await self.inner.put(kind, name, data, meta)

    async def info(self, kind: str, name: str) -> RecordInfo:
        return await self.inner.info(kind, name)

    async def read(self, kind: str, name: str) -> tuple[RecordInfo, bytes]:
        return await self.inner.read(kind, name)

    async def stream(
        self, kind: str, name: str, chunk_size: int = CHUNK
    ) -> tuple[RecordInfo, AsyncIterator[bytes]]:
        return await self.inner.stream(kind, name, chunk_size)

    async def exists(self, kind: str, name: str) -> bool:
        return await self.inner.exists(kind, name)

    async def delete(self, kind: str, name: str) -> bool:
        return await self.inner.delete(kind, name)

    async def list(self, kind: str, prefix: str = "") -> Listing:
        return await self.inner.list(kind, prefix)

    async def generation(self, kind: str) -> str:
        return await self.inner.generation(kind)

    def lock(
        self, kind: str, name: str, timeout: float = 30.0
    ) -> AbstractAsyncContextManager[None]:
        return self.inner.lock(kind, name, timeout)

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["ForwardingStorage"]
