"""Graceful stop of ``codemode serve``, shared by the HTTP and stdio transports.

On the first SIGTERM/SIGINT (SIGHUP too over stdio) the server stops accepting, lets
running calls finish for up to ``grace`` seconds, then cancels what still runs with a
clear error and waits (bounded) until those answers are out. A second signal skips
the rest of the grace period. The transport then closes every session (stopping its
worker), the upstream servers and the warm pool of pre-started workers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from .sessions import DEFAULT_SHUTDOWN_GRACE

if TYPE_CHECKING:
    from .toolset import ServerContext

logger = logging.getLogger(__name__)

ANSWER_FLUSH = 5.0
"""Seconds to wait for the answers of cancelled calls to reach their clients."""

__all__ = ["ANSWER_FLUSH", "DEFAULT_SHUTDOWN_GRACE", "GracefulStop", "drain", "shutdown_reason"]


def shutdown_reason(grace: float) -> str:
    return (
        f"the codemode server is shutting down and this call was still running after the "
        f"{grace:g} s grace period; its session is closed. Reconnect and run it again."
    )


class GracefulStop:
    """A stop request that a signal handler can make from outside the event loop."""

    def __init__(self, grace: float = DEFAULT_SHUTDOWN_GRACE) -> None:
        self.grace = grace
        self.requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requested: anyio.Event | None = None
        self._hurry: anyio.Event | None = None
        self._drained: anyio.Event | None = None

    def bind(self) -> None:
        """Attach to the running loop (call once, from it, before signals can arrive)."""
        self._loop = asyncio.get_running_loop()
        self._requested = anyio.Event()
        self._hurry = anyio.Event()
        self._drained = anyio.Event()

    def request(self) -> None:
        """Ask for a graceful stop; a second request skips what is left of the grace.

        Safe from a signal handler: the events are set from the loop's own thread.
        """
        self.requests += 1
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        event = self._requested if self.requests == 1 else self._hurry
        if event is not None:
            loop.call_soon_threadsafe(event.set)

    async def wait(self) -> None:
        assert self._requested is not None, "bind() first"
        await self._requested.wait()

    async def wait_hurry(self) -> None:
        assert self._hurry is not None, "bind() first"
        await self._hurry.wait()

    def drained(self) -> None:
        """The drain is over: the transport may close its connections now."""
        assert self._drained is not None, "bind() first"
        self._drained.set()

    async def wait_drained(self) -> None:
        assert self._drained is not None, "bind() first"
        await self._drained.wait()


async def drain(
    context: ServerContext,
    stop: GracefulStop,
    quiet: Callable[[], Awaitable[None]],
) -> None:
    """Refuse new calls, let running ones finish within the grace, cancel the rest.

    ``quiet`` returns once every call has ended and its answer has left (the transport
    knows when that is).
    """
    context.sessions.stop_admitting()
    running = len(context.calls)
    if running:
        logger.warning("stopping: waiting up to %g s for %d running call(s)", stop.grace, running)
    with anyio.move_on_after(stop.grace):
        async with anyio.create_task_group() as tg:

            async def hurry() -> None:
                await stop.wait_hurry()
                tg.cancel_scope.cancel()

            tg.start_soon(hurry)
            await quiet()
            tg.cancel_scope.cancel()
    cancelled = context.calls.cancel_all(shutdown_reason(stop.grace))
    if cancelled:
        logger.warning("stopping: cancelled %d call(s) still running", cancelled)
    with anyio.move_on_after(ANSWER_FLUSH):
        await quiet()
