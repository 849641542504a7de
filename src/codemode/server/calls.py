"""Running tool calls, each cancellable: when its client goes away, or at shutdown.

The transport (``http.py``) gives every request a :class:`ClientLink`; when the client
disconnects before its answer was sent, the link cancels the calls it carries. At
shutdown the server cancels whatever still runs after the grace period. A cancelled
call ends with a clear tool error (``reason``), which the client sees when it is still
there. This module knows nothing about MCP or HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio

CLIENT_GONE = (
    "the client went away before the call finished (its request was closed); it was cancelled"
)

__all__ = ["CLIENT_GONE", "CallTracker", "ClientLink", "Running"]


class Running:
    """One call in progress."""

    __slots__ = ("_scope", "name", "reason", "started")

    def __init__(self, scope: anyio.CancelScope, name: str = "") -> None:
        self._scope = scope
        self.name = name
        """The server tool called (``run_code``...), for the console."""
        self.started = time.time()
        self.reason: str | None = None
        """Why the call was cancelled (None: it was not)."""

    def cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            self._scope.cancel()


class ClientLink:
    """One request of a client: its calls, and whether the client is still there."""

    __slots__ = ("calls", "client", "gone")

    def __init__(self, client: str | None = None) -> None:
        self.client = client
        """Who sent it (the remote address), for fair queueing."""
        self.gone = False
        self.calls: set[Running] = set()

    def lost(self) -> None:
        """The client disconnected: cancel every call of this request."""
        self.gone = True
        for call in list(self.calls):
            call.cancel(CLIENT_GONE)


class CallTracker:
    """Every call running in one server."""

    def __init__(self) -> None:
        self._running: set[Running] = set()
        self._idle: anyio.Event | None = None

    def __len__(self) -> int:
        return len(self._running)

    @contextmanager
    def track(self, link: ClientLink | None = None, name: str = "") -> Iterator[Running]:
        """Run the block as a cancellable call; its cancellation ends the block quietly.

        After the block, ``running.reason`` says whether (and why) it was cancelled.
        """
        with anyio.CancelScope() as scope:
            running = Running(scope, name)
            self._running.add(running)
            if link is not None:
                link.calls.add(running)
                if link.gone:
                    running.cancel(CLIENT_GONE)
            try:
                yield running
            finally:
                self._running.discard(running)
                if link is not None:
                    link.calls.discard(running)
                if not self._running and self._idle is not None:
                    self._idle.set()
                    self._idle = None

    def running(self) -> list[tuple[str, float]]:
        """(tool name, started at epoch seconds) of every call in progress, oldest first."""
        return sorted(((r.name, r.started) for r in list(self._running)), key=lambda c: c[1])

    def cancel_all(self, reason: str) -> int:
        """Cancel every running call; returns how many."""
        calls = list(self._running)
        for call in calls:
            call.cancel(reason)
        return len(calls)

    async def wait_idle(self) -> None:
        """Return once no call runs."""
        while self._running:
            if self._idle is None:
                self._idle = anyio.Event()
            await self._idle.wait()
