"""The CPU a burst of first calls used, measured rather than estimated (``bench_load.py``).

``bench_load.py`` also estimates a burst's CPU from the whole row's CPU per call; that
average mixes the first calls with the later ones and, for codemode, with the warm
pool's refills, which wait for the burst to end. This measures the burst itself: the
on-CPU time (``schedstat``, nanoseconds, every thread) of the server, its workers and the
client processes from the instant the clients are told to go until the server's request
log (``_timing``) holds every session's first call, polled every 2 ms. A few second calls
start before the last first call is answered: their share is in the figures too.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path


def cpu_ns(pids: list[int]) -> int:
    """On-CPU nanoseconds so far of every thread of ``pids`` (finer than clock ticks)."""
    total = 0
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            with contextlib.suppress(OSError, ValueError, IndexError):
                total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    return total


class BurstCpu(threading.Thread):
    """Start it just before "go"; after ``join``: ``wall_ms`` and ``used_ms`` per group."""

    def __init__(self, log: str, sessions: int, tool: str, groups: dict[str, list[int]]) -> None:
        super().__init__(daemon=True)
        self.log, self.sessions, self.tool, self.groups = log, sessions, tool, groups
        self._start_ns = {k: cpu_ns(v) for k, v in groups.items()}
        self._t0 = time.monotonic()
        self.used_ms: dict[str, float] = {}
        self.wall_ms = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        seen: set[str] = set()
        rest = ""
        with open(self.log) as f:
            while len(seen) < self.sessions and not self._halt.is_set():
                chunk = f.read()
                if not chunk:
                    time.sleep(0.002)
                    continue
                *lines, rest = (rest + chunk).split("\n")
                for line in lines:
                    if f'"tool": "{self.tool}"' in line:
                        seen.add(json.loads(line).get("sid") or "")
        if len(seen) < self.sessions:
            return
        t = time.monotonic()
        self.used_ms = {k: (cpu_ns(v) - self._start_ns[k]) / 1e6 for k, v in self.groups.items()}
        self.wall_ms = (t - self._t0) * 1000

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=30)

    def line(self, name: str) -> str:
        if not self.used_ms:
            return f"    {name}: the burst's CPU was not measured (not every first call logged)"
        parts = ", ".join(f"{k} {v:.0f}" for k, v in self.used_ms.items())
        total = sum(self.used_ms.values())
        return (
            f"    {name}: the burst of first calls, measured: {self.wall_ms:.0f} ms until the "
            f"last was answered; CPU ms {parts}, total {total:.0f}"
        )
