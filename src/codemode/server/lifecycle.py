"""Graceful stop of ``codemode serve``, shared by the HTTP and stdio transports.

On the first SIGTERM/SIGINT (SIGHUP too over stdio) the server stops accepting, lets
running calls finish for up to ``grace`` seconds, then cancels what still runs with a
clear error and waits (bounded) until those answers are out. A second signal skips
the rest of the grace period. The transport then closes every session (stopping its
worker), the upstream servers and the warm pool of pre-started workers.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import os
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from .sessions import DEFAULT_SHUTDOWN_GRACE

if TYPE_CHECKING:
    from .toolset import ServerContext

logger = logging.getLogger(__name__)

ANSWER_FLUSH = 5.0
"""Seconds to wait for the answers of cancelled calls to reach their clients."""
STOP_BUDGET = 40.0
"""Seconds a stop may take beyond the grace before the process exits anyway (watchdog)."""

__all__ = ["ANSWER_FLUSH", "DEFAULT_SHUTDOWN_GRACE", "GracefulStop", "drain", "shutdown_reason"]


def shutdown_reason(grace: float) -> str:
    return (
        f"the codemode server is shutting down and this call was still running after the "
        f"{grace:g} s grace period; its session is closed. Reconnect and run it again."
    )


class GracefulStop:
    """A stop request that a signal handler can make from outside the event loop."""

    def __init__(self, grace: float = DEFAULT_SHUTDOWN_GRACE, *, watchdog: bool = False) -> None:
        self.grace = grace
        self.requests = 0
        self._watchdog = watchdog
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
        if self.requests == 1 and self._watchdog:
            _watch(self.grace + STOP_BUDGET, self._loop)
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        event = self._requested if self.requests == 1 else self._hurry
        if event is not None:
            loop.call_soon_threadsafe(event.set)

    def request_now(self) -> None:
        """Stop without a grace period: nobody is left to receive the answers (the stdio
        client closed its end of the pipe). The watchdog still bounds the stop."""
        while self.requests < 2:
            self.request()

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


class GracefulStops(GracefulStop):
    """Several apps' graceful stops behind one server (the tenant router): a request goes
    to each, and the drain is over when every app has drained."""

    def __init__(self, stops: list[GracefulStop], grace: float, *, watchdog: bool = False) -> None:
        super().__init__(grace, watchdog=watchdog)
        self.stops = stops

    def request(self) -> None:
        self.requests += 1
        if self.requests == 1 and self._watchdog:
            _watch(self.grace + STOP_BUDGET, self._loop)
        for stop in self.stops:
            stop.request()

    async def wait_drained(self) -> None:
        for stop in self.stops:
            await stop.wait_drained()


def _watch(budget: float, loop: asyncio.AbstractEventLoop | None) -> None:
    # Called from a signal handler: starting a thread there could deadlock on the lock
    # the interrupted code held while starting one, so the loop's thread starts it.
    if loop is not None and not loop.is_closed():
        loop.call_soon_threadsafe(_start_watchdog, budget, loop)
    else:
        _start_watchdog(budget, loop)


def _start_watchdog(budget: float, loop: asyncio.AbstractEventLoop | None) -> None:
    """Guarantee that a stop ends the process: after ``budget`` s, dump stacks and exit 1.

    Each step of a stop is bounded, but a thread blocked in a read or a library that
    ignores cancellation could still keep the process alive; an operator's SIGTERM must
    not depend on that (a supervisor would escalate to SIGKILL and lose the reason).
    """

    def expire() -> None:
        try:
            sys.stderr.write(
                f"codemode serve: stopping took longer than {budget:g} s; exiting now "
                "(status 1). Where each thread was:\n"
            )
            sys.stderr.flush()
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            _dump_tasks(loop)
        finally:
            os._exit(1)

    timer = threading.Timer(budget, expire)
    timer.daemon = True
    timer.name = "codemode-stop-watchdog"
    timer.start()


def _dump_tasks(loop: asyncio.AbstractEventLoop | None, most: int = 40) -> None:
    """Best effort, from another thread: what the event loop's tasks wait on."""
    if loop is None:
        return
    try:
        tasks = list(asyncio.all_tasks(loop))
        sys.stderr.write(f"{len(tasks)} asyncio task(s) still running:\n")
        for task in tasks[:most]:
            task.print_stack(limit=6, file=sys.stderr)
        sys.stderr.flush()
    except RuntimeError as exc:  # the set of tasks changed under us: the stacks must do
        sys.stderr.write(f"(could not list the asyncio tasks: {exc!r})\n")


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
    if running and stop.requests < 2:  # else no grace: nobody waits for the answers
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
