"""Sessions shared by several ``codemode serve`` replicas (``executor: ray`` + Redis).

A shared session's interpreter lives in a *detached* Ray actor: no replica owns it, so a
replica that stops or dies takes nothing with it. The directory (Redis) maps the
session's key to the actor's (random) name; whichever replica a call reaches looks the
name up and attaches to the actor, or starts one and writes its name down. The actor
ends itself after ``ttl`` seconds without a run, when the directory forgets the key too.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import ExecutorError
from ..execution.base import CallHandler
from .directory import SessionDirectory
from .executor import RayExecutor, RayWorker

log = logging.getLogger("codemode.cluster")

CLAIM_ATTEMPTS = 3
"""Start-or-attach rounds before giving up (each loses only to a live, newer actor)."""


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
            await _end(worker)


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
        for _ in range(CLAIM_ATTEMPTS):
            if name is not None:
                worker = await ex.attach(name, handler)
                if worker is not None:
                    return worker
            # No live actor: start one, and keep it only if no other replica recorded
            # one meanwhile (else two interpreters would serve one session).
            handle, info = await ex._launch(detached=True)
            mine = RayWorker(ex, handle, handler, info, detached=True)
            try:
                await ex._call(handle.expire_after.remote(directory.ttl), "answer", ex._deadline())
                held = await directory.claim_actor(self.key, info["name"], stale=name)
            except BaseException:
                await _end(mine)
                raise
            if held == info["name"]:
                return mine
            await _end(mine)
            log.info("another replica started this session at the same time: using its actor")
            name = held
        raise ExecutorError(
            f"the session's actor could not be settled in {CLAIM_ATTEMPTS} attempts: "
            "replicas keep replacing it (see the replicas' logs)"
        )


async def _end(worker: RayWorker) -> None:
    worker.detached = False
    await worker.close()


async def _no_calls(method: str, params: dict[str, Any]) -> Any:
    raise RuntimeError(f"a session being ended called {method}")
