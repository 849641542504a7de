"""The host's net around one sandboxed worker: its workspace is swept and held to a quota.

After each run (and every few tenths of a second during one) the workspace the worker can
write is swept on the host (:func:`codemode.isolation.sweep.sweep`): setuid/setgid bits
are stripped (the seccomp filter already refuses them: this is the second net) and its
bytes and files are counted. A run that takes the workspace over its quota is
interrupted like a timed-out one (killed if it does not stop) and its result carries a
``QuotaExceeded`` error naming the usage and the limits; what was written stays, so the
code can delete files and go on.

Why accounting rather than a size-limited filesystem: the sandbox uid is unprivileged
and the workspace is an ordinary host directory that must survive the worker. Project
quotas need a filesystem mounted with ``prjquota``; a loop-mounted image per workspace
needs root, loop devices and a migration of existing files. A walk works for root and
non-root hosts alike; the overshoot is bounded by the sweep interval (and each file by
``RLIMIT_FSIZE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from ..isolation.sweep import (
    Usage,
    cpu_ticks,
    descendants,
    held_bytes,
    sweep,
    tree_memory,
    written,
)
from ..result import ErrorInfo, ExecutionResult

# A workspace this small is swept inline after a run (well under a millisecond): a thread
# hop would cost more than the walk.
INLINE_FILES = 200
IDLE_MAX = 2.0
"""Longest pause (s) between two sweeps of an idle worker's unchanged workspace."""
HELD_EVERY = 1.0
"""Seconds between two counts of deleted files the worker holds open (``held_bytes``
reads every process's /proc fd and map entries): a count per sweep cost each run of a
busy server ~0.5 ms of its event loop; between counts the last one stands in."""
_HZ = os.sysconf("SC_CLK_TCK")
"""Clock ticks per second (``cpu_ticks`` counts in them)."""


@dataclass(frozen=True)
class WorkspaceQuota:
    """Limits of one workspace; ``None`` switches one off."""

    max_bytes: int | None = 1 << 30
    max_files: int | None = 50_000

    def bytes_over(self, usage: Usage) -> bool:
        return self.max_bytes is not None and usage.bytes > self.max_bytes

    def problem(self, usage: Usage) -> str | None:
        over_bytes = self.bytes_over(usage)
        over_files = self.max_files is not None and (
            usage.files > self.max_files or not usage.complete
        )
        if not (over_bytes or over_files):
            return None
        files = f"{usage.files:,}{'+' if not usage.complete else ''}"
        held = f" ({_size(usage.held)} in deleted files still open)" if usage.held else ""
        return (
            f"/workspace is over its quota: it holds {_size(usage.bytes)}{held} in {files} files "
            f"(limits: {_size(self.max_bytes)}, {_count(self.max_files)} files). "
            "Delete files to go on."
        )


def _size(n: int | None) -> str:
    if n is None:
        return "no byte limit"
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def _count(n: int | None) -> str:
    return "no" if n is None else f"{n:,}"


class SizeHints:
    """How many files the last sweep of each workspace found, shared by the guards of one
    executor: a new worker's first sweep runs inline when its workspace was small the last
    time any worker swept it, so a session's first run waits for no thread hop."""

    def __init__(self, keep: int = 256) -> None:
        self._files: OrderedDict[str, int] = OrderedDict()
        self._keep = keep
        self._lock = threading.Lock()  # sweeps also run on threads

    def small(self, workspace: str) -> bool:
        files = self._files.get(workspace)
        return files is not None and files < INLINE_FILES

    def note(self, workspace: str, usage: Usage) -> None:
        with self._lock:
            self._files[workspace] = usage.files
            self._files.move_to_end(workspace)
            while len(self._files) > self._keep:
                self._files.popitem(last=False)


class GuardedWorker:
    """A sandboxed worker whose workspace is swept after, and watched during, each run."""

    def __init__(
        self,
        inner: Any,
        workspace: str,
        quota: WorkspaceQuota,
        interval: float = 0.25,
        *,
        hints: SizeHints | None = None,
        uid: int | None = None,
        memory_limit: int | None = None,
    ) -> None:
        self.inner = inner
        self.memory_limit = memory_limit
        """Bytes the worker's whole process tree may use, watched here where no memory
        cgroup holds it (``RLIMIT_AS`` bounds each process alone: N forked children could
        use N times the limit); None: the cgroup does, or no limit."""
        self._memory_notes: list[str] = []
        self.uid = uid
        """The sandbox's uid: deleted files it owns and still holds count (None: not)."""
        self.workspace = workspace
        self.quota = quota
        self.interval = interval
        self.hints = hints if hints is not None else SizeHints()
        self.last_usage: Usage | None = None
        self._idle: asyncio.Task[None] | None = None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._held = (0, -HELD_EVERY)  # (bytes, when counted)
        self._timeout: float | None = None  # the last run's: what code left running may use
        self._io = (-1, -1)  # (the worker's pid, its own process's io file: _own_writes)
        self._io_close: weakref.finalize[Any, Any] | None = None

    @property
    def alive(self) -> bool:
        return bool(self.inner.alive)

    @property
    def pid(self) -> int:
        return int(self.inner.pid)

    def __getattr__(self, name: str) -> Any:  # the inner worker's other attributes
        return getattr(self.inner, name)

    def _sweep(self) -> Usage:
        limit = self.quota.max_files
        usage = sweep(self.workspace, max_entries=limit + 1 if limit is not None else 10**7)
        if self.uid is not None and self.inner.alive:
            held, when = self._held
            if time.monotonic() - when >= HELD_EVERY:
                with contextlib.suppress(OSError):
                    dev = os.stat(self.workspace).st_dev
                    held = held_bytes(self.inner.pid, dev, self.uid)
                    self._held = (held, time.monotonic())
            if held:
                usage = replace(usage, bytes=usage.bytes + held, held=held)
        self.last_usage = usage
        self.hints.note(self.workspace, usage)
        return usage

    def _own_writes(self) -> int | None:
        """What ``written`` counts for the worker's own process alone (all its threads; not
        bubblewrap's, which write nothing), from its ``/proc/<pid>/io`` kept open: ~2 us a
        read, cheap enough for the end of every run. None when it cannot be read."""
        pid = self.inner.pid
        if self._io[0] != pid:
            self._close_io()
            fd = -1
            for proc in descendants(pid, limit=8):
                try:
                    with open(f"/proc/{proc}/comm", "rb") as fh:
                        if fh.read().strip() == b"bwrap":
                            continue
                    fd = os.open(f"/proc/{proc}/io", os.O_RDONLY | os.O_CLOEXEC)
                except OSError:
                    pass
                break
            self._io = (pid, fd)
            if fd >= 0:  # closed with the guard, even one dropped without close()
                self._io_close = weakref.finalize(self, os.close, fd)
        fd = self._io[1]
        if fd < 0:
            return None
        try:  # rchar: N wchar: N syscr: N syscw: N read_bytes: N write_bytes: N ...
            fields = os.pread(fd, 1024, 0).split()
            if fields[2] != b"wchar:" or fields[10] != b"write_bytes:":
                return None
            return int(fields[3]) + int(fields[11])
        except (OSError, ValueError, IndexError):  # the process ended: ESRCH
            return None

    def _close_io(self) -> None:
        self._io = (-1, -1)
        if self._io_close is not None:
            self._io_close()
            self._io_close = None

    def _check_memory(self) -> None:
        """Over ``memory_limit`` together, the tree's largest process is killed, as the
        memory cgroup's OOM killer would (the worker itself, when it is the largest: its
        state is lost); the run's result says why."""
        if self.memory_limit is None or not self.inner.alive:
            return
        used, biggest = tree_memory(self.inner.pid)
        if used <= self.memory_limit or biggest is None:
            return
        with contextlib.suppress(OSError):
            os.kill(biggest, signal.SIGKILL)
        self._memory_notes.append(
            f"the session's processes used {used >> 20} MB together, over its memory limit "
            f"of {self.memory_limit >> 20} MB: its largest process ({biggest}) was killed "
            "(no memory cgroup here: the host adds up the processes' memory every "
            f"{self.interval:g} s)"
        )

    def _grew_over(self, usage: Usage, before: Usage) -> str | None:
        """The quota problem, if this usage is over it *and* the run added to it (a run
        that only deletes files from a workspace over its quota is never stopped)."""
        problem = self.quota.problem(usage)
        if problem is None or (usage.bytes <= before.bytes and usage.files <= before.files):
            return None
        return problem

    async def _watch(self, before: Usage, breach: list[str]) -> None:
        """Sweep while the code runs; stop it when it takes the workspace over its quota.
        Started one interval into the run (see ``run``)."""
        while True:
            began = time.monotonic()
            usage = await asyncio.to_thread(self._sweep)
            if self.memory_limit is not None:
                await asyncio.to_thread(self._check_memory)
            problem = self._grew_over(usage, before)
            if problem is not None:
                breach.append(problem)
                self.inner.stop_run(f"the run was stopped: {problem}")
                return
            # a big tree costs more to walk: never spend more than ~1/5 of the time on it
            await asyncio.sleep(max(self.interval, 5 * (time.monotonic() - began)))

    async def _watch_idle(self, after: Usage, mark: int | None) -> None:
        """Sweep between runs: a thread or a process a run left behind writes on while no
        run is active, and waiting for the next run (maybe hours) to count would let it
        fill the host's disk. Over the quota, the worker is killed, since nothing but its
        end stops such code; the next run says why.

        The workspace is swept only once the worker's processes used CPU or wrote since
        the last look (~0.1 ms to read, against ~0.8 ms for a sweep), so an idle session
        costs next to nothing. Which worker is the culprit: over the byte quota, one that
        wrote (``written``: ``write()`` calls and pages dirtied in files); over the file
        count, one that also used CPU while the count grew (creating a file writes
        nothing). So a session sharing the workspace with the writer keeps its worker,
        even one busy computing, unless files pile up while it computes. Where the write
        counts cannot be read, any CPU time counts as writing. Looks back off to
        ``IDLE_MAX`` while nothing changes; a big workspace is swept ~1/20 of the time.

        Such code may also use no more CPU than the run it outlived could have (its
        timeout): a run's end is the worker's word (a ``done`` frame), which the code,
        sharing its process, can forge to escape the timeout; the kernel's count of the
        tree's CPU time it cannot change."""
        delay = self.interval
        pid = self.inner.pid
        ticks, wrote_so_far = cpu_ticks(pid), written(pid)
        # One interval after the run (see run): what was written meanwhile. ``mark``, the
        # worker's own count (its threads') at the run's end, tells whether it wrote since:
        # a thread left behind that wrote its burst within this interval and stopped is
        # stopped here. Its child processes were not counted then (listing them cost
        # every run): bytes they wrote past the quota need their writes from now on.
        alone = self._own_writes()
        usage = await asyncio.to_thread(self._sweep)
        problem = self._grew_over(usage, after)
        wrote = mark is not None and alone is not None and alone != mark
        if problem is not None and (wrote or not self.quota.bytes_over(usage)):
            self.inner.end(
                "the worker was stopped between runs: code a run left running wrote "
                f"past the quota. {problem}"
            )
            return
        if problem is None:
            after = usage
        spent = 0  # clock ticks used since the watch began (a process that ends takes
        # its own ticks out of the sum: only increases count)
        while self.inner.alive:
            await asyncio.sleep(delay)
            now, wrote_now = cpu_ticks(pid), written(pid)
            if now == ticks and wrote_now == wrote_so_far:
                delay = min(delay * 2, IDLE_MAX)
                continue
            wrote = wrote_now is None or wrote_now != wrote_so_far
            spent += max(0, now - ticks)
            ticks, wrote_so_far = now, wrote_now
            if self._timeout is not None and spent > self._timeout * _HZ:
                self.inner.end(
                    "the worker was stopped between runs: code a run left running (a thread, "
                    f"a process, or code that forged its run's end) used {spent / _HZ:.1f} s "
                    f"of CPU after that run, more than a run may ({self._timeout:g} s, its "
                    "timeout)"
                )
                return
            if self.memory_limit is not None:  # it moved: a process left running
                await asyncio.to_thread(self._check_memory)  # said at the next run
            began = time.monotonic()
            usage = await asyncio.to_thread(self._sweep)
            problem = self._grew_over(usage, after)
            if problem is not None and (wrote or not self.quota.bytes_over(usage)):
                self.inner.end(
                    "the worker was stopped between runs: code a run left running wrote "
                    f"past the quota. {problem}"
                )
                return
            same = (usage.bytes, usage.files) == (after.bytes, after.files)
            delay = min(delay * 2, IDLE_MAX) if same else self.interval
            delay = max(delay, 20 * (time.monotonic() - began))
            after = usage

    async def _stop_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        task, self._idle = self._idle, None
        if task is not None:
            task.cancel()
            # wait, not `await task` under suppress(CancelledError): that also swallowed
            # the caller's own cancellation (a run cancelled as soon as it was sent ran on)
            await asyncio.wait([task])

    async def run(self, code: str, timeout: float) -> ExecutionResult:
        await self._stop_idle()
        self._timeout = timeout
        before = self.last_usage
        if before is None:
            small = self.hints.small(self.workspace)
            before = self._sweep() if small else await asyncio.to_thread(self._sweep)
        breach: list[str] = []
        loop = asyncio.get_running_loop()
        watch: list[asyncio.Task[None]] = []
        # The watch starts one interval in, from a timer: a short run (most of them) only
        # cancels the timer, where a task to cancel and wait for cost it two turns of the
        # loop, which a saturated loop makes long.
        timer = loop.call_later(
            self.interval, lambda: watch.append(loop.create_task(self._watch(before, breach)))
        )
        try:
            result: ExecutionResult = await self.inner.run(code, timeout)
        finally:
            timer.cancel()
            for task in watch:
                task.cancel()
                await asyncio.wait([task])  # (see _stop_idle)
        small = self.last_usage is not None and self.last_usage.files < INLINE_FILES
        # Counted before the sweep: what is written in between is in both (not blamed).
        mark = self._own_writes() if self.inner.alive else None
        usage = self._sweep() if small else await asyncio.to_thread(self._sweep)
        notes: list[str] = self._memory_notes
        self._memory_notes = []
        if usage.stripped:
            shown = ", ".join(usage.stripped[:5]) + (" ..." if len(usage.stripped) > 5 else "")
            notes.append(f"setuid/setgid bits were removed from: {shown}")
        problem = breach[0] if breach else self._grew_over(usage, before)
        still = self.quota.problem(usage)
        if problem is None and still is not None:
            notes.append(still)
        if notes:
            result = replace(result, warnings=(*result.warnings, *notes))
        if problem is not None and not result.timed_out:
            stopped = "the run was stopped: " if breach else ""
            result = replace(result, error=ErrorInfo("QuotaExceeded", stopped + problem))
        if self.inner.alive:
            # From a timer one interval in: back-to-back runs (a busy session) only cancel
            # it, where a task started at once (and its /proc reads) cost every run ~1 ms
            # of the event loop's time under load.
            def watch_idle() -> None:
                self._idle_timer = None
                self._idle = loop.create_task(self._watch_idle(usage, mark))

            self._idle_timer = loop.call_later(self.interval, watch_idle)
        return result

    async def reset(self) -> None:
        await self.inner.reset()

    async def close(self) -> None:
        await self._stop_idle()
        self._close_io()
        await self.inner.close()


__all__ = ["GuardedWorker", "SizeHints", "WorkspaceQuota"]
