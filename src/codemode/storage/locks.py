"""An inter-process file lock that waits without blocking the event loop."""

from __future__ import annotations

import asyncio
import fcntl
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path


@asynccontextmanager
async def file_lock(
    path: Path, timeout: float, busy: Callable[[], Exception]
) -> AsyncIterator[None]:
    """Hold an exclusive ``flock`` on ``path``; raise ``busy()`` if not had within ``timeout``.

    Polls with a growing delay (1 ms up to 50 ms) instead of blocking in ``flock``, so
    other tasks keep running while a writer in another process finishes.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + timeout
        delay = 0.001
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise busy() from None
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
        yield
    finally:
        os.close(fd)
