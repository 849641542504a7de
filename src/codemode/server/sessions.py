"""One codemode session per MCP client, created on demand, expired when idle, capped.

This module knows nothing about MCP: callers name a session by a string key (how a
key is derived from a request is decided in ``app.py``) and get a started session
back. A key of ``None`` means "this caller cannot be recognised again": it gets an
ephemeral session that is closed when the call ends.

Lifecycle of a keyed session::

    absent --lease(key)--> [queued] --slot--> starting --factory() ok--> open
                              \\--full / timeout: ServerBusy        \\--fails: absent
    open --idle > idle_timeout------------------------------------> expired
    open --client detached (no stream, no request) > reclaim_after--> reclaimed
    open --drop(key) / aclose()-----------------------------------> closed

A session is never expired or reclaimed while a call holds it. Calls on one session
run one at a time (``lease`` holds the session's lock), so two ``run_code`` calls from
one client cannot interleave inside one worker.

Admission: at most ``max_sessions`` slots are held at once (open and starting sessions,
ephemeral calls). A caller that needs a new slot beyond that waits in a bounded queue
for up to ``queue_timeout`` seconds, then gets ``ServerBusy`` ("retry after N s").
Freed slots go to waiting clients in turn (round robin by client), and when the queue
is full a newcomer pushes out the newest waiter of the client holding the most places,
so one client's burst cannot starve the others. A client holding its share of the slots
or more (``client_share`` of ``max_sessions`` rounded down, at least one; ``--client-share``)
while another client waits is refused a new one at once ("busy, retry after N s")
instead of queueing, and a freed slot goes to a waiting client under its share first:
sessions already held are never taken away, so when nobody else waits one client may
still use every slot. A client is who the transport says asked (the remote address over
HTTP). Managers given one ``SessionCap`` (``serve --tenants``) also share a process-wide
number of slots (``session_cap``).
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from codemode.observability import signals

if TYPE_CHECKING:
    from codemode.session import Session

    from .session_cap import SessionCap

from .session_records import (
    Entry,
    Lease,
    Link,
    ServerBusy,
    ServerSession,
    SessionFactory,
    ShuttingDown,
    Waiter,
    what_remains,
)

logger = logging.getLogger(__name__)

DEFAULT_IDLE_TIMEOUT = 1800.0
DEFAULT_MAX_SESSIONS = 32
DEFAULT_RECLAIM_AFTER = 120.0
DEFAULT_QUEUE_SIZE = 64
DEFAULT_QUEUE_TIMEOUT = 15.0
DEFAULT_CLIENT_SHARE = 0.5
DEFAULT_START_CONCURRENCY = 64
"""Sessions started at once. Executors bound their own cold boots (``execution.spawn.
MAX_BOOTS``); a start from the warm pool boots nothing, so a burst of new clients is
not lined up behind a few: at 50 simultaneous first calls, a bound of 4 here made the
last ones wait for a dozen rounds of session starts."""
DEFAULT_SHUTDOWN_GRACE = 10.0
"""Seconds running calls may take to finish once the server is asked to stop."""
_REMEMBER_EXPIRED = 4096
_CLOSED = ("closed", "Your previous session was closed.")
_MAX_RETRY_AFTER = 60


class SessionManager:
    """Creates, hands out, expires and closes the sessions of one server."""

    def __init__(
        self,
        factory: SessionFactory,
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        reclaim_after: float | None = DEFAULT_RECLAIM_AFTER,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        queue_timeout: float = DEFAULT_QUEUE_TIMEOUT,
        client_share: float = DEFAULT_CLIENT_SHARE,
        start_concurrency: int = DEFAULT_START_CONCURRENCY,
        shared: bool = False,
        cap: SessionCap | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value in (("idle_timeout", idle_timeout), ("reclaim_after", reclaim_after)):
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a positive number of seconds or None")
        if max_sessions < 1:
            raise ValueError("max_sessions must be at least 1")
        if queue_size < 0 or not (math.isfinite(queue_timeout) and queue_timeout >= 0):
            raise ValueError("queue_size and queue_timeout must not be negative")
        if not 0 < client_share <= 1:
            raise ValueError("client_share must be above 0 and at most 1")
        if start_concurrency < 1:
            raise ValueError("start_concurrency must be at least 1")
        self._factory = factory
        self.shared = shared
        """Sessions outlive this manager (``serve`` replicas sharing them): ending an entry
        only lets go of it here, so its client's next call is told of no loss."""
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self.reclaim_after = reclaim_after
        self.queue_size = queue_size
        self.queue_timeout = queue_timeout
        self.client_share = client_share
        self.share = max(1, math.floor(client_share * max_sessions))
        """Slots a client may hold while another client waits for one."""
        self._clock = clock
        self._entries: dict[str, Entry] = {}
        self._used = 0
        """Slots held: open and starting sessions, ephemeral calls, grants in transit."""
        self._held: Counter[str] = Counter()
        """The slots each client holds."""
        self._queue: dict[str, deque[Waiter]] = {}
        self._turns: deque[str] = deque()
        """Clients with waiters, in the order they are served."""
        self._queued = 0
        self._links: dict[str, Link] = {}
        self._expired: OrderedDict[str, str] = OrderedDict()
        self._starts = anyio.Semaphore(start_concurrency, fast_acquire=True)  # as Entry.lock
        self._draining = False
        self._closed = False
        self._cap = cap
        """Slots shared with other managers of the process (serve --tenants)."""
        if cap is not None:
            cap.join(self)

    # -- queries -------------------------------------------------------------------

    def __len__(self) -> int:
        return self._used

    @property
    def held(self) -> int:
        """Slots held (``SessionCap``'s view of this manager)."""
        return self._used

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def keys(self) -> list[str]:
        return list(self._entries)

    def snapshot(self) -> list[tuple[str, float, float, int]]:
        """(key, created, last used, calls in progress) per open session; times are the
        manager's clock (monotonic), ``now()`` tells the same clock's present."""
        return [(e.key, e.created, e.last_used, e.busy) for e in list(self._entries.values())]

    def now(self) -> float:
        return self._clock()

    @property
    def queued(self) -> int:
        """Callers waiting for a session slot."""
        return self._queued

    @property
    def accepting(self) -> bool:
        """Whether a new client would get a session now or a place in the queue."""
        if self._draining or self._closed:
            return False
        return self._room() or self._queued < self.queue_size

    @property
    def draining(self) -> bool:
        return self._draining or self._closed

    # -- borrowing -----------------------------------------------------------------

    @asynccontextmanager
    async def lease(
        self, key: str | None, *, exclusive: bool = True, client: str | None = None
    ) -> AsyncIterator[Lease]:
        """Borrow the session named ``key`` (started on first use) for one call.

        ``client`` names who is asking (e.g. the remote address), for fair queueing.
        Raises ``ServerBusy`` when no slot frees up in time, ``ShuttingDown`` while the
        server stops, and whatever the factory raises when the session cannot start.
        """
        if key is None:
            async with self._ephemeral_lease(client or "") as lease:
                yield lease
            return
        entry, new, notice = await self._acquire(key, client or "")
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

    def _check_open(self) -> None:
        if self._draining or self._closed:
            raise ShuttingDown(
                "the codemode server is shutting down and takes no new calls; "
                "retry in a moment (or on another server)"
            )

    async def _acquire(self, key: str, client: str) -> tuple[Entry, bool, str | None]:
        while True:
            self._check_open()
            entry = self._entries.get(key)
            if entry is not None and self._reason_to_end(entry) is not None:
                await self._expire(entry)
                continue
            if entry is not None:
                entry.busy += 1
                if not entry.ready.is_set():  # a set anyio Event still yields a turn
                    await entry.ready.wait()
                if entry.error is not None:
                    entry.busy -= 1
                    raise entry.error
                return entry, False, None
            await self._reserve_slot(client)
            if key in self._entries or self._draining or self._closed:
                self._free_slot(client)  # someone else started it while we waited
                continue
            break
        now = self._clock()
        entry = Entry(key=key, created=now, last_used=now, busy=1, client=client)
        self._entries[key] = entry
        notice = self._expired.pop(key, None)
        try:
            entry.session = await self._start(key)
            signals.session_started()
        except BaseException as exc:
            entry.error = exc
            if self._entries.get(key) is entry:
                del self._entries[key]
                self._free_slot(client)
            raise
        finally:
            entry.ready.set()
        return entry, True, notice

    @asynccontextmanager
    async def _ephemeral_lease(self, client: str) -> AsyncIterator[Lease]:
        self._check_open()
        await self._reserve_slot(client)
        try:
            session = await self._start(None)
            try:
                yield Lease(session, None, True, None)
            finally:
                with anyio.CancelScope(shield=True):
                    await _close_quietly(session)
        finally:
            self._free_slot(client)

    async def _start(self, key: str | None) -> Session:
        async with self._starts:
            return await self._factory(key)

    # -- admission -------------------------------------------------------------------

    def _room(self) -> bool:
        return self._used < self.max_sessions and (self._cap is None or not self._cap.full)

    def _take(self, client: str) -> None:
        self._used += 1
        self._held[client] += 1
        if self._cap is not None:
            self._cap.used += 1

    def _over_share(self, client: str) -> bool:
        return self.client_share < 1 and self._held[client] >= self.share

    async def _reserve_slot(self, client: str) -> None:
        if self._room() and not self._queued:
            self._take(client)
            return
        await self.sweep()  # expired-but-not-yet-swept sessions do not count
        if self._room() and not self._queued:
            self._take(client)
            return
        if self._over_share(client) and any(c != client for c in self._turns):
            raise self._busy(
                f"this client ({client or 'local'}) already holds {self._held[client]} of "
                f"them, its share while other clients wait (--client-share "
                f"{self.client_share:g}: {self.share})"
            )
        cap = self._cap
        if cap is not None and cap.full and cap.over_share(self) and cap.others_waiting(self):
            raise self._busy(
                f"this tenant already holds {self._used} of them, its share while other "
                f"tenants wait (--client-share {cap.share:g}: {cap.most})"
            )
        waiter = self._enqueue(client)
        try:
            with anyio.move_on_after(self.queue_timeout):
                await waiter.event.wait()
        except BaseException:
            if waiter.granted:
                self._free_slot(client)  # cancelled right after a slot was handed over
            else:
                self._unqueue(waiter)
            raise
        if waiter.granted:
            return  # the slot was handed over by _free_slot: _used already counts it
        self._unqueue(waiter)
        raise waiter.refusal or self._busy(
            f"no session slot freed up within {self.queue_timeout:g} s"
        )

    def _enqueue(self, client: str) -> Waiter:
        if self._queued >= self.queue_size:
            self._push_out(client)
        waiter = Waiter(client)
        line = self._queue.get(client)
        if line is None:
            line = self._queue[client] = deque()
            self._turns.append(client)
        line.append(waiter)
        self._queued += 1
        return waiter

    def _push_out(self, client: str) -> None:
        """Make room for ``client`` by refusing the newest waiter of the biggest client."""
        mine = len(self._queue.get(client, ()))
        biggest = max(self._queue, key=lambda c: len(self._queue[c]), default=None)
        if biggest is None or len(self._queue[biggest]) <= mine + 1:
            raise self._busy(f"{self._queued} clients are already waiting (--queue-size)")
        victim = self._queue[biggest].pop()
        self._queued -= 1
        victim.refusal = self._busy("a waiting place was given to another client (fair share)")
        victim.event.set()

    def _unqueue(self, waiter: Waiter) -> None:
        line = self._queue.get(waiter.client)
        if line is None or waiter not in line:
            return
        line.remove(waiter)
        self._queued -= 1
        if not line:
            del self._queue[waiter.client]
            self._turns.remove(waiter.client)

    def _free_slot(self, client: str) -> None:
        """Release ``client``'s slot: to the next waiting client in turn (of this manager,
        or of the next manager sharing the process-wide cap)."""
        self._used -= 1
        self._held[client] -= 1
        if self._held[client] <= 0:
            del self._held[client]
        if self._cap is not None:
            self._cap.release()
        else:
            self.grant_waiter()

    def grant_waiter(self) -> bool:
        """Hand a free slot to the next waiting client in turn; False if none may have it."""
        if not self._turns or not self._room():
            return False
        # A client under its share first: the one over it waits while another does.
        for _ in range(len(self._turns)):
            if not self._over_share(self._turns[0]):
                break
            self._turns.rotate(-1)
        client = self._turns.popleft()
        line = self._queue[client]
        waiter = line.popleft()
        self._queued -= 1
        if line:
            self._turns.append(client)
        else:
            del self._queue[client]
        self._take(client)
        waiter.granted = True
        waiter.event.set()
        return True

    def _busy(self, why: str) -> ServerBusy:
        wait = self._retry_after()
        limit = f"its limit of {self.max_sessions} concurrent sessions (--max-sessions)"
        if self._cap is not None and self._cap.full and self._used < self.max_sessions:
            limit = (
                f"the process-wide limit of {self._cap.limit} concurrent sessions across "
                "all tenants (--max-sessions-total)"
            )
        return ServerBusy(
            f"codemode server is busy: it is at {limit} and {why}. Retry after {wait} s, "
            "or close another client's session.",
            retry_after=wait,
        )

    def _retry_after(self) -> int:
        """Seconds until a slot is likely to free up (an idle session's expiry), bounded."""
        now, soonest = self._clock(), math.inf
        for entry in self._entries.values():
            if entry.busy or not entry.ready.is_set():
                continue
            if self.idle_timeout is not None:
                soonest = min(soonest, entry.last_used + self.idle_timeout - now)
            link = self._links.get(entry.key)
            if self.reclaim_after is not None and link is not None and link.open == 0:
                soonest = min(soonest, link.since + self.reclaim_after - now)
        guess = soonest if math.isfinite(soonest) else max(self.queue_timeout, 1.0)
        return int(min(max(math.ceil(guess), 1), _MAX_RETRY_AFTER))

    # -- client presence -------------------------------------------------------------

    def attach(self, key: str) -> None:
        """A stream or request of the client owning ``key`` opened."""
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = Link()
        link.open += 1

    def detach(self, key: str, *, known: bool = True) -> None:
        """One of its streams or requests closed (see ``reclaim_after``).

        ``known=False``: the transport did not know ``key`` (a made-up session id); it is
        forgotten unless something else holds it, so such requests cost no memory.
        """
        link = self._links.get(key)
        if link is not None and link.open > 0:
            link.open -= 1
            if link.open == 0:
                link.since = self._clock()
                if not known and key not in self._entries:
                    del self._links[key]

    # -- expiry and closing --------------------------------------------------------

    def _reason_to_end(self, entry: Entry) -> tuple[str, str] | None:
        """Why ``entry`` should be closed now (idle or client gone) as (the
        ``codemode_sessions_ended_total`` reason, the notice for its client), or None."""
        if entry.busy > 0 or not entry.ready.is_set():
            return None
        now = self._clock()
        if self.idle_timeout is not None and now - entry.last_used > self.idle_timeout:
            return (
                "expired",
                f"Your previous session expired after more than {self.idle_timeout:g} s "
                f"without use; {what_remains(entry)} This is a new session.",
            )
        link = self._links.get(entry.key)
        if (
            self.reclaim_after is not None
            and link is not None
            and link.open == 0
            and now - max(link.since, entry.last_used) > self.reclaim_after
        ):
            return (
                "client_gone",
                f"Your previous session was closed: its client's connection was gone for more "
                f"than {self.reclaim_after:g} s; {what_remains(entry)} This is a new session.",
            )
        return None

    def _forget(self, entry: Entry, *, notice: str | None) -> None:
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]
            self._free_slot(entry.client)
        if notice is not None and not self.shared:
            self._expired[entry.key] = notice
            while len(self._expired) > _REMEMBER_EXPIRED:
                self._expired.popitem(last=False)

    async def _expire(self, entry: Entry, why: tuple[str, str] | None = None) -> None:
        reason, notice = why or self._reason_to_end(entry) or _CLOSED
        self._forget(entry, notice=notice)
        signals.session_ended(reason)
        logger.info("session %s closed: %s", entry.key[:24], notice.split(":")[0])
        with anyio.CancelScope(shield=True):
            await _close_quietly(entry.session)

    async def sweep(self) -> int:
        """Close every session idle too long or whose client is gone; returns how many."""
        ending = [(e, r) for e in list(self._entries.values()) if (r := self._reason_to_end(e))]
        for entry, why in ending:
            await self._expire(entry, why)
        self._prune_links()
        return len(ending)

    def _prune_links(self) -> None:
        """Forget presence of clients that have no session and left long ago."""
        horizon = 2 * max(self.reclaim_after or 0.0, self.idle_timeout or 0.0, 60.0)
        now = self._clock()
        stale = [
            key
            for key, link in self._links.items()
            if link.open == 0 and key not in self._entries and now - link.since > horizon
        ]
        for key in stale:
            del self._links[key]

    async def run_reaper(self, interval: float | None = None) -> None:
        """Sweep forever (run it in a task group; cancel it to stop)."""
        periods = [t / 4 for t in (self.idle_timeout, self.reclaim_after) if t is not None]
        if not periods:
            await anyio.sleep_forever()
        period = interval if interval is not None else min(max(min(periods), 0.05), 30.0)
        while True:
            await anyio.sleep(period)
            await self.sweep()

    async def drop(self, key: str) -> bool:
        """Close the session named ``key`` now (its client ended it). False if none."""
        self._links.pop(key, None)
        entry = self._entries.get(key)
        if entry is None:
            return False
        self._forget(entry, notice=None)
        await entry.ready.wait()
        if entry.session is not None:
            signals.session_ended("closed")
        with anyio.CancelScope(shield=True):
            await _close_quietly(entry.session)
        return True

    def stop_admitting(self) -> None:
        """Shutdown has begun: refuse new calls and everyone still waiting for a slot."""
        self._draining = True
        for line in self._queue.values():
            for waiter in line:
                waiter.refusal = ShuttingDown("the codemode server is shutting down")
                waiter.event.set()
        self._queue.clear()
        self._turns.clear()
        self._queued = 0

    async def aclose(self) -> None:
        """Close every session; later leases fail. Safe to call twice."""
        self.stop_admitting()
        self._closed = True
        entries = list(self._entries.values())
        self._entries.clear()
        if self._cap is not None:
            self._cap.leave(self, self._used)
            self._cap = None
        for entry in entries:
            if entry.session is not None:
                signals.session_ended("shutdown")
        with anyio.CancelScope(shield=True), anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                for entry in entries:
                    tg.start_soon(_close_entry, entry)


async def _close_entry(entry: Entry) -> None:
    await entry.ready.wait()
    await _close_quietly(entry.session)


async def _close_quietly(session: ServerSession | None) -> None:
    if session is None:
        return
    try:
        await session.close()
    except Exception:  # a session that fails to close must not stop the others
        logger.exception("closing a session failed")
