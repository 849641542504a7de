"""Every write to the memory, told to whoever watches (the audit log, for one).

Writes are caught where they all pass, whatever asked for them (the agent's code, the
SDK, ``codemode serve`` tools, the CLI): the ``Storage`` the skills, artifacts and state
are built on, and the deps directory's changes. A watcher is a plain function called after
the write succeeded; it must be quick and must not raise (a failing watcher is logged and
the write stands).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from typing import Any

from ..context import CallContext, current_context
from ..storage.base import CHUNK, Data, Listing, RecordInfo, Storage

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MemoryWrite:
    """One change to the memory: ``op`` is ``put`` or ``delete`` (records) or ``deps.add``,
    ``deps.remove``, ``deps.sync``; ``kind`` the record kind (``skill``, ``artifact``,
    ``state``...) or ``deps``."""

    op: str
    kind: str
    name: str
    size: int | None
    context: CallContext


MemoryWatcher = Callable[[MemoryWrite], None]


class Watchers:
    """The watchers of one ``Memory``, and the context its writes are attributed to."""

    def __init__(self, workspace: str | None = None) -> None:
        self.workspace = workspace
        self._watchers: list[MemoryWatcher] = []

    def add(self, watcher: MemoryWatcher) -> None:
        self._watchers.append(watcher)

    def __bool__(self) -> bool:
        return bool(self._watchers)

    def tell(self, op: str, kind: str, name: str, size: int | None = None) -> None:
        if not self._watchers:
            return
        ctx = current_context.get()
        if ctx.workspace is None and self.workspace is not None:
            ctx = replace(ctx, workspace=self.workspace)
        event = MemoryWrite(op, kind, name, size, ctx)
        for watcher in self._watchers:
            try:
                watcher(event)
            except Exception:
                log.exception("a memory watcher failed on %s %s/%s", op, kind, name)


class WatchedStorage:
    """A ``Storage`` that tells ``watchers`` about every successful put and delete."""

    def __init__(self, inner: Storage, watchers: Watchers) -> None:
        self.inner = inner
        self._watchers = watchers

    def describe(self) -> str:
        return self.inner.describe()

    async def put(
        self, kind: str, name: str, data: Data, meta: Mapping[str, Any] | None = None
    ) -> RecordInfo:
        info = await self.inner.put(kind, name, data, meta)
        self._watchers.tell("put", kind, name, info.size)
        return info

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
        existed = await self.inner.delete(kind, name)
        if existed:
            self._watchers.tell("delete", kind, name)
        return existed

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


__all__ = ["MemoryWatcher", "MemoryWrite", "WatchedStorage", "Watchers"]
