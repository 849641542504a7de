"""Warm pools of pre-started workers, so a session starts without booting Python.

A pooled worker is a process plus its pipes, not yet tied to any event loop, so one pool
serves every loop and every session of the process. Pools are keyed by the launch
configuration: executors configured alike share one.

Pools refill in the background, on the start threads (:mod:`.spawn`), never on the event
loop, and the workers a refill starts boot at a low CPU priority (when the host may raise it
back: root or CAP_SYS_NICE), which :meth:`WorkerPool.take` gives back to normal: a refill
after a burst uses CPU time the running sessions do not need.

The target follows demand: ``size`` workers are kept ready once a pool is used; each
start that finds it empty raises the target by one, up to ``max_size``, so the next
burst of sessions finds warm workers; after ``idle_after`` seconds without such a miss the
target falls back to ``size`` and the extra workers are stopped.

A refill waits for a quiet moment: while sessions keep taking workers (a burst of new
clients), the host's share of each start (fork, cgroups, the launch line) would compete
with their first calls for this process's CPU and GIL. Each background start waits until
no worker was taken for ``quiet`` seconds, at most ``max_delay``; never while the pool
is empty, nor after a start found it empty within ``max_delay`` (the burst outran the
pool: its next sessions boot cold unless refills keep up; waiting there doubled the
first-call p95 of 200 sessions on a 64-worker pool, 6 s -> 12 s).
"""

from __future__ import annotations

import asyncio
import atexit
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future

from .limits import release_background_groups
from .spawn import Spawned, reap_later, refills, starts

REFILL_QUIET = 0.25
"""Seconds without a worker taken before a background refill starts one."""
REFILL_MAX_DELAY = 2.0
"""The longest a background refill waits for such a quiet moment."""


class WorkerPool:
    def __init__(
        self,
        spawn: Callable[..., Spawned],
        size: int,
        *,
        max_size: int | None = None,
        idle_after: float = 60.0,
        quiet: float = REFILL_QUIET,
        max_delay: float = REFILL_MAX_DELAY,
    ) -> None:
        self._spawn = spawn
        self.size = size
        self.max_size = max(size, max_size if max_size is not None else 4 * size)
        self.target = size
        self.idle_after = idle_after
        self.quiet = quiet
        self.max_delay = max_delay
        self._ready: deque[Spawned] = deque()
        self._starting: set[Future[None]] = set()
        self._last_miss = 0.0
        self._last_take = 0.0
        self._generation = 0  # close() starts a new one: starts begun before are dropped
        self.retired = False  # evicted from the process's pools: keeps nothing ready
        self._lock = threading.RLock()  # a start may finish, and call back, while refill holds it
        self._changed = threading.Condition(self._lock)  # wakes refills waiting for quiet

    def take(self) -> Spawned | None:
        """A live pre-started worker, or None when the pool is empty (a miss: the target
        grows). Call :meth:`refill` once the worker is up (a start thread competes for
        the GIL with the event loop while it forks)."""
        found: Spawned | None = None
        with self._lock:
            self._last_take = time.monotonic()
            while self._ready:
                spawned = self._ready.popleft()
                if spawned.alive():
                    try:
                        spawned.boost()  # started in the background: it serves a session now
                    except OSError:  # it could not get its own cgroup: not usable
                        reap_later(spawned)
                        continue
                    found = spawned
                    break
                reap_later(spawned)
            if found is None and self.size > 0:
                self.target = min(self.max_size, self.target + 1)
                self._last_miss = time.monotonic()
            if not self._ready:
                self._changed.notify_all()  # empty: waiting refills start now
        return found

    def refill(self, *, background: bool = True) -> None:
        """Start (on the start threads) as many workers as the target lacks; no waiting.
        ``background``: at a low CPU priority (see the module doc)."""
        with self._lock:
            if self.retired:
                return
            if self.target > self.size and time.monotonic() - self._last_miss > self.idle_after:
                self.target = self.size
                while len(self._ready) > self.target:
                    reap_later(self._ready.pop())
            for _ in range(self.target - len(self._ready) - len(self._starting)):
                lane = refills() if background else starts()
                fut = lane.submit(self._start_one, self._generation, background)
                self._starting.add(fut)
                fut.add_done_callback(self._started)

    def _started(self, fut: Future[None]) -> None:
        with self._lock:
            self._starting.discard(fut)

    def _start_one(self, generation: int, background: bool) -> None:
        if background and not self._wait_quiet(generation):
            return
        try:
            spawned: Spawned | None = self._spawn(background=background)
        except Exception:  # noqa: BLE001 - a failed pre-start is reported by the next start()
            spawned = None
        with self._lock:
            current = generation == self._generation
            if spawned is not None and current and len(self._ready) < self.target:
                self._ready.append(spawned)
                return
        if spawned is not None:
            spawned.destroy()

    def _wait_quiet(self, generation: int) -> bool:
        """Block this refill thread until a background start may begin (see the module
        doc); False when the pool was closed meanwhile (nothing to start)."""
        deadline = time.monotonic() + self.max_delay
        with self._changed:
            while generation == self._generation:
                now = time.monotonic()
                wait = min(self._last_take + self.quiet, deadline) - now
                if wait <= 0 or not self._ready or now - self._last_miss < self.max_delay:
                    return True  # quiet, empty, or demand outran the pool: start now
                self._changed.wait(wait)
            return False

    async def fill(self, count: int | None = None) -> None:
        """Raise the pool's size to ``count`` (if given) and wait until it is full."""
        with self._lock:
            if count is not None and count > self.size:
                self.size = count
                self.max_size = max(self.max_size, count)
            self.target = max(self.target, self.size)
        self.refill(background=False)  # someone waits for these: at full speed
        with self._lock:
            starting = list(self._starting)
        if starting:
            await asyncio.wait([asyncio.wrap_future(f) for f in starting])

    def __len__(self) -> int:
        return len(self._ready)

    def close(self) -> None:
        """Stop the pre-started workers (the pool refills again when next used)."""
        with self._lock:
            self._generation += 1
            self.target = self.size
            items, self._ready = list(self._ready), deque()
            self._changed.notify_all()
        for spawned in items:
            spawned.destroy()


MAX_WARM_POOLS = 16
"""Pools (launch configurations: one per workspace, limits, ...) kept warm at once. A
process that opens sessions on many workspaces in turn (a tenants server, a test suite, a
script looping over projects) kept every one's pre-started workers, their processes and
pipes, until it exited: the least recently used pool past this bound is closed."""

_pools: dict[Hashable, WorkerPool] = {}  # least recently used first
_pools_lock = threading.Lock()


def get_pool(key: Hashable, spawn: Callable[..., Spawned], size: int) -> WorkerPool:
    """The pool for ``key``; ``spawn(background=bool)`` starts one worker."""
    evicted: list[WorkerPool] = []
    with _pools_lock:
        pool = _pools.pop(key, None)
        if pool is None:
            pool = WorkerPool(spawn, size)
        _pools[key] = pool
        while len(_pools) > MAX_WARM_POOLS:
            evicted.append(_pools.pop(next(iter(_pools))))
    for old in evicted:
        old.retired = True  # a start still holding it refills nothing
        old.close()
    return pool


def close_pools() -> None:
    """Stop every pre-started worker (also done at interpreter exit)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
    release_background_groups()


atexit.register(close_pools)


def pool_stats() -> tuple[int, int]:
    """(workers ready now, workers the pools aim to keep) over every pool of the process."""
    with _pools_lock:
        pools = list(_pools.values())
    return sum(len(p) for p in pools), sum(p.size for p in pools)
