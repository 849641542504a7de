"""The executor seam: how a Session gets a worker, without knowing which kind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, Protocol, runtime_checkable

from ..errors import ExecutorError
from ..result import ExecutionResult

PROTOCOL_VERSION = 1
"""The worker <-> host protocol this host speaks. The worker's is
``codemode_worker.protocol.VERSION``, a separate package that may come from another
install (a sandbox image, a remote node): the two are compared when a worker connects."""


def check_protocol(worker_version: Any) -> None:
    """Refuse a worker that speaks another protocol version, naming both versions."""
    if worker_version == PROTOCOL_VERSION:
        return
    theirs = (
        "none (a release before protocol versions)" if worker_version is None else worker_version
    )
    raise ExecutorError(
        f"the worker speaks protocol version {theirs}, this host speaks version "
        f"{PROTOCOL_VERSION}: install the same codemode release on both sides"
    )


def settle(fut: asyncio.Future[Any], value: Any = None) -> None:
    """Resolve ``fut`` unless it already is (callbacks may race with a teardown)."""
    if not fut.done():
        fut.set_result(value)


CallHandler = Callable[[str, dict[str, Any]], Awaitable[Any]]
"""``(method, params) -> value``: answers calls the agent's code makes to the host."""


@runtime_checkable
class Worker(Protocol):
    """One interpreter holding one session's state."""

    @property
    def alive(self) -> bool: ...

    async def run(self, code: str, timeout: float) -> ExecutionResult:
        """Run ``code``. A cancelled run is stopped as a timed-out one is: interrupted,
        and its worker killed if it does not stop within the interrupt grace."""
        ...

    async def idle(self) -> None:
        """Wait until a stopped (timed-out or cancelled) run has ended: bounded by the
        interrupt grace. Then ``alive`` says whether the worker survived it."""
        ...

    async def reset(self) -> None: ...

    async def close(self) -> None: ...

    def hold_timeout(self) -> AbstractContextManager[None]:
        """While held, the running code's timeout does not run (the host is waiting for a
        person); a no-op when nothing runs."""
        ...


@runtime_checkable
class Executor(Protocol):
    """Starts workers. Implementations: in-process, subprocess, sandbox."""

    async def start(self, handler: CallHandler) -> Worker: ...


# How long a closed worker waits for the host calls it cancelled to finish their cleanup
# (an MCP server mid-handshake takes the SDK's stdin grace plus its SIGTERM grace to stop).
CALLS_STOP_WAIT = 15.0


class RunTimer:
    """The timeout of one run: fires ``callback`` after ``timeout`` seconds of running,
    not counting the time it was held (``hold``). Quacks like a ``TimerHandle``."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, timeout: float, callback: Callable[[], None]
    ) -> None:
        self._loop = loop
        self._callback: Callable[[], None] | None = callback
        self._remaining = timeout
        self._holds = 0
        self._cancelled = False
        self._deadline = loop.time() + timeout
        self._handle: asyncio.TimerHandle | None = loop.call_later(timeout, self._fire)

    def _fire(self) -> None:
        self._handle = None
        callback = self._callback
        if not self._cancelled and callback is not None:
            self.cancel()
            callback()

    def cancel(self) -> None:
        """Never fire; let go of the callback, which usually refers back to the run that
        holds this timer: kept, that cycle would wait for the garbage collector, with the
        run's result in it, on every run."""
        self._cancelled = True
        self._callback = None
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    @contextmanager
    def hold(self) -> Iterator[None]:
        if self._holds == 0 and self._handle is not None:
            self._handle.cancel()
            self._handle = None
            self._remaining = max(self._deadline - self._loop.time(), 0.0)
        self._holds += 1
        try:
            yield
        finally:
            self._holds -= 1
            if self._holds == 0 and not self._cancelled and self._handle is None:
                self._deadline = self._loop.time() + self._remaining
                self._handle = self._loop.call_later(self._remaining, self._fire)


def held(timer: RunTimer | None) -> AbstractContextManager[None]:
    """``timer.hold()``, or nothing when there is no run."""
    return timer.hold() if timer is not None else nullcontext()


run_timeout_hold: ContextVar[Callable[[], AbstractContextManager[None]] | None] = ContextVar(
    "codemode_run_timeout_hold", default=None
)
"""How to hold the timeout of the run that made the current call (set by ``Session``)."""


def waiting_for_person() -> AbstractContextManager[None]:
    """Hold the calling run's timeout while the host waits for a person (approvals)."""
    hold = run_timeout_hold.get()
    return hold() if hold is not None else nullcontext()
