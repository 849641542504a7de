"""Sessions shared by several ``codemode serve`` replicas (``executor: ray`` + Redis).

A shared session's interpreter lives in a *detached* Ray actor: no replica owns it, so a
replica that stops or dies takes nothing with it. The directory (Redis) maps the
session's key to the actor's (random) name; whichever replica a call reaches looks the
name up and attaches to the actor, or starts one and writes its name down. The actor
ends itself after ``ttl`` seconds without a run, when the directory forgets the key too.
"""

from __future__ import annotations

from typing import Any

from ..execution.base import CallHandler
from .directory import SessionDirectory
from .executor import RayExecutor, RayWorker


class SharedSessions:
    """Hands each session key an executor bound to that key's detached actor."""

    def __init__(self, executor: RayExecutor, directory: SessionDirectory) -> None:
        self.executor = executor
        self.directory = directory

    def for_key(self, key: str) -> SharedSessionExecutor:
        return SharedSessionExecutor(self, key)

    async def end(self, key: str) -> None:
        """The client ended its session: end its actor and forget it."""
        name = await self.directory.actor(key)
        await self.directory.forget(key)
        if name is None:
            return
        worker = await self.executor.attach(name, _no_calls)
        if worker is not None:
            worker.detached = False
            await worker.close()


class SharedSessionExecutor:
    """The executor of one shared session: its worker is the key's detached actor."""

    def __init__(self, shared: SharedSessions, key: str) -> None:
        self._shared = shared
        self.key = key

    @property
    def max_output(self) -> int:
        return self._shared.executor.max_output

    async def start(self, handler: CallHandler) -> RayWorker:
        ex, directory = self._shared.executor, self._shared.directory
        name = await directory.actor(self.key)
        if name is not None:
            worker = await ex.attach(name, handler)
            if worker is not None:
                return worker
        handle, info = await ex._launch(detached=True)
        worker = RayWorker(ex, handle, handler, info, detached=True)
        try:
            await ex._call(handle.expire_after.remote(directory.ttl), "answer", ex._deadline())
            await directory.set_actor(self.key, info["name"])
        except BaseException:
            worker.detached = False
            await worker.close()
            raise
        return worker


async def _no_calls(method: str, params: dict[str, Any]) -> Any:
    raise RuntimeError(f"a session being ended called {method}")
