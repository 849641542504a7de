"""One codemode session per MCP client, created on demand, expired when idle, capped.

This module knows nothing about MCP: callers name a session by a string key (how a
key is derived from a request is decided in ``app.py``) and get a started session
back. A key of ``None`` means "this caller cannot be recognised again": it gets an
ephemeral session that is closed when the call ends.

Lifecycle of a keyed session::

    absent --lease(key)--> starting --factory() ok--> open --idle > idle_timeout--> expired
                                      \\--fails--> absent (error raised to every waiter)
    open --drop(key) / aclose()--> closed

A session is never expired while a call holds it. Calls on one session run one at a
time (``lease`` holds the session's lock), so two ``run_code`` calls from one client
cannot interleave inside one worker.
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import anyio

from codemode.errors import CodemodeError

if TYPE_CHECKING:
    from codemode.session import Session

logger = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 1800.0
DEFAULT_MAX_SESSIONS = 32
_REMEMBER_EXPIRED = 4096


class SessionLimitReached(CodemodeError):
    """Every session slot is taken; the caller should retry later or close a client.

    Local subclass of the base error: it is a server policy, raised only here.
    """


class ServerSession(Protocol):
    """What the manager needs from a codemode session (``codemode.session.Session``)."""

    async def close(self) -> None: ...


SessionFactory = Callable[[str | None], Awaitable["Session"]]
"""Returns a started session for a key. Called once per new key (and with ``None`` per
ephemeral call)."""


@dataclass(eq=False)
class _Entry:
    key: str
    created: float
    last_used: float
    session: Session | None = None
    error: BaseException | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    busy: int = 0


@dataclass(frozen=True, slots=True)
class Lease:
    """A session borrowed for one call."""

    session: Session
    key: str | None
    new: bool
    """True when this call started the session."""
    notice: str | None = None
    """Something the model should be told (e.g. its previous session expired)."""

    @property
    def ephemeral(self) -> bool:
        return self.key is None


class SessionManager:
    """Creates, hands out, expires and closes the sessions of one server."""

    def __init__(
        self,
        factory: SessionFactory,
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle_timeout is not None and not (math.isfinite(idle_timeout) and idle_timeout > 0):
            raise ValueError("idle_timeout must be a positive number of seconds or None")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        self._factory = factory
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._ephemeral = 0
        self._expired: OrderedDict[str, float] = OrderedDict()
        self._closed = False

    # -- queries -------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries) + self._ephemeral

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[str]:
        return list(self._entries)

    # -- borrowing -----------------------------------------------------------------

    @asynccontextmanager
    async def lease(self, key: str | None, *, exclusive: bool = True) -> AsyncIterator[Lease]:
        """Borrow the session named ``key`` (started on first use) for one call.

        Raises ``SessionLimitReached`` when a new session would exceed the cap, and
        whatever the factory raises when the session cannot be started.
        """
        if key is None:
            async with self._ephemeral_lease() as lease:
                yield lease
            return
        entry, new, notice = await self._acquire(key)
        try:
            session = entry.session
            assert session is not None  # _acquire returns only started entries
            if exclusive:
                async with entry.lock:
                    yield Lease(session, key, new, notice)
            else:
                yield Lease(session, key, new, notice)
        finally:
            entry.busy -= 1
            entry.last_used = self._clock()

    async def get(self, key: str) -> Session:
        """The session for ``key`` without holding it (for calls that only read from it)."""
        async with self.lease(key, exclusive=False) as lease:
            return lease.session

    async def _acquire(self, key: str) -> tuple[_Entry, bool, str | None]:
        while True:
            if self._closed:
                raise CodemodeError("the server is shutting down")
            entry = self._entries.get(key)
            if entry is not None and self._is_idle_expired(entry):
                await self._expire(entry)
                continue
            if entry is not None:
                entry.busy += 1
                await entry.ready.wait()
                if entry.error is not None:
                    entry.busy -= 1
                    raise entry.error
                return entry, False, None
            await self._reserve_slot()
            if key in self._entries:  # someone else started it while we swept
                continue
            break
        now = self._clock()
        entry = _Entry(key=key, created=now, last_used=now, busy=1)
        self._entries[key] = entry
        notice = self._expiry_notice(key)
        try:
            entry.session = await self._factory(key)
        except BaseException as exc:
            entry.error = exc
            self._entries.pop(key, None)
            raise
        finally:
            entry.ready.set()
        return entry, True, notice

    @asynccontextmanager
    async def _ephemeral_lease(self) -> AsyncIterator[Lease]:
        if self._closed:
            raise CodemodeError("the server is shutting down")
        await self._reserve_slot()
        self._ephemeral += 1
        try:
            session = await self._factory(None)
            try:
                yield Lease(session, None, True, None)
            finally:
                with anyio.CancelScope(shield=True):
                    await _close_quietly(session)
        finally:
            self._ephemeral -= 1

    async def _reserve_slot(self) -> None:
        if len(self) >= self.max_sessions:
            await self.sweep()  # expired-but-not-yet-swept sessions do not count
        if len(self) >= self.max_sessions:
            idle = (
                f"; idle sessions expire after {self.idle_timeout:g} s"
                if self.idle_timeout is not None
                else ""
            )
            raise SessionLimitReached(
                f"codemode server is at its limit of {self.max_sessions} concurrent sessions "
                f"(--max-sessions){idle}. Close another client's session or retry later."
            )

    # -- expiry and closing --------------------------------------------------------

    def _is_idle_expired(self, entry: _Entry) -> bool:
        if self.idle_timeout is None or entry.busy > 0 or not entry.ready.is_set():
            return False
        return self._clock() - entry.last_used > self.idle_timeout

    def _expiry_notice(self, key: str) -> str | None:
        if self._expired.pop(key, None) is None:
            return None
        return (
            f"Your previous session expired after more than {self.idle_timeout:g} s without use; "
            "its variables and imports are gone. This is a new session."
        )

    def _forget(self, entry: _Entry, *, expired: bool) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
        if expired:
            self._expired[entry.key] = self._clock()
            while len(self._expired) > _REMEMBER_EXPIRED:
                self._expired.popitem(last=False)

    async def _expire(self, entry: _Entry) -> None:
        self._forget(entry, expired=True)
        logger.info("session %s expired after %.0f s idle", entry.key[:24], self.idle_timeout)
        with anyio.CancelScope(shield=True):
            await _close_quietly(entry.session)

    async def sweep(self) -> int:
        """Close every session idle for longer than ``idle_timeout``; returns how many."""
        expired = [e for e in list(self._entries.values()) if self._is_idle_expired(e)]
        for entry in expired:
            await self._expire(entry)
        return len(expired)

    async def run_reaper(self, interval: float | None = None) -> None:
        """Sweep forever (run it in a task group; cancel it to stop)."""
        if self.idle_timeout is None:
            await anyio.sleep_forever()
        assert self.idle_timeout is not None
        period = interval if interval is not None else min(max(self.idle_timeout / 4, 0.05), 30.0)
        while True:
            await anyio.sleep(period)
            await self.sweep()

    async def drop(self, key: str) -> bool:
        """Close the session named ``key`` now (its client went away). False if none."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._forget(entry, expired=False)
        await entry.ready.wait()
        with anyio.CancelScope(shield=True):
            await _close_quietly(entry.session)
        return True

    async def aclose(self) -> None:
        """Close every session; later leases fail. Safe to call twice."""
        self._closed = True
        entries = list(self._entries.values())
        self._entries.clear()
        with anyio.CancelScope(shield=True), anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                for entry in entries:
                    tg.start_soon(_close_entry, entry)


async def _close_entry(entry: _Entry) -> None:
    await entry.ready.wait()
    await _close_quietly(entry.session)


async def _close_quietly(session: ServerSession | None) -> None:
    if session is None:
        return
    try:
        await session.close()
    except Exception:  # a session that fails to close must not stop the others
        logger.exception("closing a session failed")
