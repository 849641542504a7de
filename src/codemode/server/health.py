"""``/healthz`` and ``/readyz`` answered outside the server, on a port of their own.

Why: the main port's health endpoints are answered by the outermost ASGI layer, but on
the event loop: when hundreds of sessions saturate it, their answer waits behind
everything else (hundreds of ms, seconds), and a liveness probe kills a server that is
merely busy. A thread of the server would still need its GIL, which a saturated loop and
the worker-start threads hand around in 5 ms turns (~300 ms per answer was measured at
200 sessions). So ``--health-port`` is served by a small child process
(:mod:`.health_child`, standard library only) that shares one page of memory with the
server and nothing else.

The server publishes both answers to that page at every tick of a heartbeat task on its
event loop (every ``HEARTBEAT`` s). The child adds how late the last tick is
(``loop_lag_ms``) and answers ``503 "stalled"`` once it is later than ``stall_after``
seconds: a deadlocked loop, or one stuck in a blocking call, is not alive; a busy loop
keeps ticking (a tick waits its turn, hundreds of ms at worst), so it stays alive. The
child exits when the server does.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from . import health_child
from .health_child import HEAD, HEARTBEAT, SIZE

DEFAULT_STALL_AFTER = 10.0
"""Seconds without a tick after which the loop counts as stalled."""

Answer = tuple[int, dict[str, Any]]
Facts = Callable[[str], Answer | None]
"""``facts(path) -> (status, body)`` for a health path, None for any other path."""

__all__ = ["DEFAULT_STALL_AFTER", "HEARTBEAT", "HealthPort"]


class HealthPort:
    """The health port's child process, and the page the event loop publishes to it."""

    def __init__(
        self,
        sock: socket.socket,
        facts: Facts,
        paths: tuple[str, ...],
        stall_after: float = DEFAULT_STALL_AFTER,
    ) -> None:
        self._sock = sock
        self._facts = facts
        self._paths = paths
        self.stall_after = stall_after
        self._fd = _shared_fd()
        os.ftruncate(self._fd, SIZE)
        self._page = mmap.mmap(self._fd, SIZE)
        self._seq = 0
        self._child: subprocess.Popen[bytes] | None = None

    def publish(self) -> None:
        """Write both answers and the time of this tick (a seqlock: odd while writing)."""
        answers = {p: list(a) for p in self._paths if (a := self._facts(p)) is not None}
        data = json.dumps(answers).encode()[: SIZE - HEAD.size]
        self._seq += 1
        HEAD.pack_into(self._page, 0, self._seq, 0.0, 0)
        self._page[HEAD.size : HEAD.size + len(data)] = data
        self._seq += 1
        HEAD.pack_into(self._page, 0, self._seq, _now(), len(data))

    def start(self) -> None:
        """Start the child; from now on it alone accepts on the health socket."""
        self.publish()
        fds = (self._sock.fileno(), self._fd)
        argv = [sys.executable, "-I", "-S", str(Path(health_child.__file__)),
                *map(str, fds), str(self.stall_after), str(os.getpid())]  # fmt: skip
        self._child = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL)
        self._sock.close()  # the child's copy listens

    async def run(self) -> None:
        """The heartbeat: publish every tick, as long as the loop lets it run."""
        while True:
            self.publish()
            await anyio.sleep(HEARTBEAT)

    def close(self) -> None:
        """Stop the child and release the page (safe to call twice)."""
        child, self._child = self._child, None
        if child is not None:
            child.terminate()
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=5)
        self._sock.close()
        with contextlib.suppress(BufferError, ValueError):
            self._page.close()
        fd, self._fd = self._fd, -1  # closed once: a second close would hit a reused number
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _now() -> float:
    import time

    return time.monotonic()


def _shared_fd() -> int:
    """An fd of anonymous memory the child can map (a memfd, or an unlinked temp file)."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        with contextlib.suppress(OSError):
            return int(memfd("codemode-health", 0))
    fd, path = tempfile.mkstemp(prefix="codemode-health-")
    os.unlink(path)
    return fd
