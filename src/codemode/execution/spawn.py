"""Starting and reaping worker processes, off the event loop.

A sandbox start is blocking work: cgroup directories, a fork/exec of sh, setpriv and
bwrap. Done on the event loop, it stalls every session of the host, longer as more start
at once. Here starts run on a few threads of their own (which also bounds how many run at
once), and so do the reaping and cleanup of dead workers (waiting for the process,
removing its cgroups and scratch directories).

File descriptors are passed to the worker by number, never at fixed numbers: a pipe of
the host can have any number, including 9 or 0-2 when the host's stdio is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import resource
import shutil
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

T = TypeVar("T")


class CpuGroup(Protocol):
    """Moves a worker's processes between the background cpu group and its own."""

    def background(self, pid: int) -> None: ...

    def foreground(self, pids: list[int]) -> None: ...


@dataclass(slots=True)
class LaunchSpec:
    """How to start one worker; executors that wrap the worker (sandbox) rewrite it."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None = None
    pass_fds: tuple[int, ...] = ()
    close_after_spawn: tuple[int, ...] = ()
    cleanup: Callable[[], None] | None = None
    workspace: str | None = None
    """The host directory the worker sees as /workspace (sandbox only): swept by the host."""
    cpu_group: CpuGroup | None = None
    """Where a worker started ahead of demand waits, then works (sandbox with cgroups)."""


@dataclass(slots=True)
class Spawned:
    """A started worker process, not yet tied to an event loop (so it can be pooled)."""

    proc: subprocess.Popen[bytes]
    to_fd: int
    from_fd: int
    err_fd: int
    out_fd: int
    ctrl_fd: int
    cleanup: Callable[[], None] | None = None
    workspace: str | None = None
    started: float = field(default_factory=time.perf_counter)
    foreground: Callable[[], None] | None = None
    """Gives a worker started in the background (a warm pool's refill) its normal CPU
    priority back; None when it was started at normal priority."""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def boost(self, *, last: bool = False) -> None:
        """Give a background-started worker normal CPU priority (it now serves a session).
        Done when it is taken, and again (``last``) once it said it is ready: by then its
        launcher has surely joined its cgroups. Raises ``OSError`` when the worker could
        not be moved to its own cpu group (it must not run code without its limits)."""
        foreground = self.foreground
        if foreground is not None:
            foreground()
        if last:
            self.foreground = None

    def kill(self) -> None:
        """SIGKILL the worker's process group now (cheap: safe on the event loop)."""
        if self.proc.returncode is not None:
            return  # waited for already: its pid (and group id) may belong to another now
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def reap(self) -> None:
        """Close the pipes, wait for the process, remove its cgroups (blocking: a thread)."""
        fds = (self.to_fd, self.from_fd, self.err_fd, self.out_fd, self.ctrl_fd)
        # Once only, and never again by number: a later close or write (an interrupt sent
        # to a worker already gone) would reach whatever file got the number since.
        self.to_fd = self.from_fd = self.err_fd = self.out_fd = self.ctrl_fd = -1
        for fd in fds:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        while True:  # killed already: it ends, however slowly a loaded machine lets it
            try:
                self.proc.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                self.kill()
        cleanup, self.cleanup = self.cleanup, None
        if cleanup is not None:
            cleanup()

    def destroy(self) -> None:
        self.kill()
        self.reap()


BACKGROUND_NICE = 19
"""Nice value of workers started ahead of demand: they boot on CPU time nobody else
wants, instead of slowing the calls of running sessions (on 2 cores, refilling a pool
after a burst of 50 sessions cost as much CPU as the burst's calls themselves)."""


def in_background(proc: subprocess.Popen[bytes], spec: LaunchSpec) -> Callable[[], None]:
    """Lower a just-started worker's CPU priority; returns what raises it back.

    Three knobs, because each alone is neutralised by the others: the nice value of every
    thread (``background_prefix`` started it niced), the nice value of its autogroup (the
    worker runs in a session of its own, and the kernel shares CPU between autogroups
    before nice values count), and its cpu cgroup (likewise, between cgroups: the sandbox
    starts it in a shared background group, ``spec.cpu_group`` moves it to its own).
    """
    _autogroup(proc.pid, BACKGROUND_NICE)
    if spec.cpu_group is not None:
        spec.cpu_group.background(proc.pid)

    def foreground() -> None:
        tree = _tree(proc.pid)
        if spec.cpu_group is not None:
            spec.cpu_group.foreground(list(tree))
        _autogroup(proc.pid, 0)
        for tids in tree.values():
            for tid in tids:
                with contextlib.suppress(OSError):
                    os.setpriority(os.PRIO_PROCESS, tid, 0)

    return foreground


def _autogroup(pid: int, nice: int) -> None:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/autogroup", "w") as f:
        f.write(str(nice))


def background_prefix() -> list[str]:
    """``nice -n 19`` to start a worker in the background, or ``[]`` when a started
    worker could not be given normal priority back (that needs root or CAP_SYS_NICE)."""
    global _nice
    if _nice is None:  # start threads may race here: each computes the same answer
        path = shutil.which("nice")
        may = path is not None and _may_renice()
        _nice = [path, "-n", str(BACKGROUND_NICE)] if path is not None and may else []
    return _nice


_nice: list[str] | None = None


def _may_renice() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status") as f:
            caps = next((line.split()[1] for line in f if line.startswith("CapEff:")), "0")
    except OSError:
        return False
    return bool(int(caps, 16) >> 23 & 1)  # CAP_SYS_NICE


def _tree(root: int) -> dict[int, list[int]]:
    """``{pid: thread ids}`` of ``root`` and its descendants (Linux /proc; {} elsewhere)."""
    out: dict[int, list[int]] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        out[pid] = [int(t) for t in tids]
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                pass
    return out


def above_stdio(fd: int) -> int:
    """``fd``, or a copy of it numbered 3 or more (closing the original).

    The child's stdin, stdout and stderr are set up on 0-2 before the passed fds are
    kept: a passed pipe with one of those numbers (possible when the host runs with its
    stdio closed) would be overwritten.
    """
    if fd > 2:
        return fd
    new = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return new


def pipe() -> tuple[int, int]:
    r, w = os.pipe()
    return above_stdio(r), above_stdio(w)


def describe_exit(returncode: int | None) -> str:
    if returncode is None:
        return "the worker stopped answering"
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        hint = {
            int(signal.SIGKILL): " (killed: out of memory, or by another process)",
            int(signal.SIGSEGV): " (segmentation fault)",
            int(signal.SIGABRT): " (aborted)",
        }.get(sig, "")
        return f"the worker was killed by signal {sig} ({name}){hint}"
    return f"the worker exited with status {returncode}"


# -- the open files limit --------------------------------------------------------------------

_nofile: tuple[int, int, int] | None = None  # soft before, soft now, hard


def raise_open_files_limit() -> tuple[int, int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit, once.

    Each worker holds five pipes on the host, each MCP server a few more, each client a
    socket: the common default of 1,024 is reached by ~150 sessions. Returns the soft
    limit before, the soft limit now and the hard limit.
    """
    global _nofile
    if _nofile is None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        now = soft
        if hard == resource.RLIM_INFINITY or soft < hard:
            target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
                now = target
            except (ValueError, OSError):
                now = soft
        _nofile = (soft, now, hard)
    return _nofile


# -- threads for starts and reaping ----------------------------------------------------------


def _default_max_starts() -> int:
    env = os.environ.get("CODEMODE_MAX_STARTS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return max(2, min(8, 2 * (os.cpu_count() or 1)))


MAX_STARTS = _default_max_starts()
"""Workers started at once (``CODEMODE_MAX_STARTS``); the others wait their turn."""

_lock = threading.Lock()
_starts: ThreadPoolExecutor | None = None
_refills: ThreadPoolExecutor | None = None
_reapers: ThreadPoolExecutor | None = None


def starts() -> ThreadPoolExecutor:
    """The threads that start workers, for every executor and pool of the process."""
    global _starts
    with _lock:
        if _starts is None:
            _starts = ThreadPoolExecutor(MAX_STARTS, thread_name_prefix="codemode-start")
        return _starts


def refills() -> ThreadPoolExecutor:
    """The one thread that starts workers ahead of demand (warm pools' refills).

    One at a time, apart from :func:`starts`: the host's share of a start (cgroups, the
    launch line, fork) runs in this process and competes with the event loop for the
    GIL, so a refill after a burst is spread out instead of crowding the burst's calls,
    and never delays a start a session waits for."""
    global _refills
    with _lock:
        if _refills is None:
            _refills = ThreadPoolExecutor(1, thread_name_prefix="codemode-refill")
        return _refills


def _reaper() -> ThreadPoolExecutor:
    global _reapers
    with _lock:
        if _reapers is None:
            _reapers = ThreadPoolExecutor(4, thread_name_prefix="codemode-reap")
        return _reapers


async def off_loop(fn: Callable[[], T], *, orphan: Callable[[T], None] | None = None) -> T:
    """Run ``fn`` on a start thread and wait for it without blocking the loop.

    If the caller is cancelled meanwhile, ``fn`` still finishes on its thread; ``orphan``
    then receives its result (e.g. a started worker to destroy) so nothing leaks.
    """
    fut = starts().submit(fn)
    try:
        return await asyncio.wrap_future(fut)
    except asyncio.CancelledError:
        if orphan is not None:
            fut.add_done_callback(lambda f: _hand_over(f, orphan))
        raise


def _hand_over(fut: Future[T], orphan: Callable[[T], None]) -> None:
    if not fut.cancelled() and fut.exception() is None:
        orphan(fut.result())


MAX_BOOTS = max(4, 2 * (os.cpu_count() or 1))
"""Workers booting cold at once (per event loop): more would boot side by side, each
slower, until all of them miss their start timeout; the others wait their turn. Starts
from the warm pool do not count: they boot nothing."""
_gates: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def boot_gate() -> asyncio.Semaphore:
    """This event loop's gate for cold boots (see ``MAX_BOOTS``)."""
    loop = asyncio.get_running_loop()
    gate = _gates.get(loop)
    if gate is None:
        gate = _gates[loop] = asyncio.Semaphore(MAX_BOOTS)
    return gate


def reap_later(spawned: Spawned) -> Future[None]:
    """Kill now; close, wait and clean up on a reaper thread. Returns when that is done."""
    spawned.kill()
    return _reaper().submit(spawned.reap)


__all__ = [
    "BACKGROUND_NICE",
    "MAX_BOOTS",
    "MAX_STARTS",
    "LaunchSpec",
    "Spawned",
    "above_stdio",
    "background_prefix",
    "boot_gate",
    "describe_exit",
    "in_background",
    "off_loop",
    "pipe",
    "raise_open_files_limit",
    "reap_later",
    "refills",
    "starts",
]
