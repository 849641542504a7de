"""Warm pools of pre-started workers, so a session starts without booting Python.

A pooled worker is a process plus its pipes, not yet tied to any event loop, so one pool
serves every loop and every session of the process. Pools are keyed by the launch
configuration: executors configured alike share one.
"""

from __future__ import annotations

import atexit
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar


class Pooled(Protocol):
    """What a pool holds (``subprocess.Spawned``): it can say it lives, and be destroyed."""

    def alive(self) -> bool: ...

    def destroy(self) -> None: ...


P = TypeVar("P", bound=Pooled)


class WorkerPool(Generic[P]):
    def __init__(self, spawn: Callable[[], P], size: int) -> None:
        self._spawn = spawn
        self.size = size
        self._ready: deque[P] = deque()
        self._lock = threading.Lock()

    def take(self) -> P | None:
        """A live pre-started worker, or None when the pool is empty."""
        while True:
            with self._lock:
                if not self._ready:
                    return None
                spawned = self._ready.popleft()
            if spawned.alive():
                return spawned
            spawned.destroy()

    def refill(self) -> None:
        while True:
            with self._lock:
                if len(self._ready) >= self.size:
                    return
            try:
                spawned = self._spawn()
            except Exception:  # noqa: BLE001 - a failed pre-start is reported by the next start()
                return
            with self._lock:
                self._ready.append(spawned)

    def __len__(self) -> int:
        return len(self._ready)

    def close(self) -> None:
        with self._lock:
            items, self._ready = list(self._ready), deque()
        for spawned in items:
            spawned.destroy()


_pools: dict[Hashable, WorkerPool[Any]] = {}
_pools_lock = threading.Lock()


def get_pool(key: Hashable, spawn: Callable[[], P], size: int) -> WorkerPool[P]:
    with _pools_lock:
        pool: WorkerPool[P] | None = _pools.get(key)
        if pool is None:
            pool = _pools[key] = WorkerPool(spawn, size)
        return pool


def close_pools() -> None:
    """Stop every pre-started worker (also done at interpreter exit)."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()


atexit.register(close_pools)


def pool_stats() -> tuple[int, int]:
    """(workers ready now, workers the pools aim to keep) over every pool of the process."""
    with _pools_lock:
        pools = list(_pools.values())
    return sum(len(p) for p in pools), sum(p.size for p in pools)
