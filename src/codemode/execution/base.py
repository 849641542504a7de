"""The executor seam: how a Session gets a worker, without knowing which kind."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
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


@runtime_checkable
class Executor(Protocol):
    """Starts workers. Implementations: in-process, subprocess, sandbox."""

    async def start(self, handler: CallHandler) -> Worker: ...
