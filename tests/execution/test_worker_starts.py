"""Workers start off the event loop, a few at a time, and pools refill by demand.

A sandbox start (cgroups, sh, setpriv, bwrap) is blocking work; done on the loop it
stalls every session of the host. These tests watch the loop with a ticker task while
workers start, and record each start from inside the executor.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor
from codemode.execution.pool import WorkerPool, get_pool
from codemode.execution.sandbox import SandboxExecutor

pytestmark = pytest.mark.anyio

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


class RecordingSandbox(SandboxExecutor):
    """The real sandbox executor, noting when each worker start begins and ends."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.starts: list[tuple[float, float]] = []
        self.busy = 0
        self.most_at_once = 0
        self._count = threading.Lock()

    def spawn(self, *, background: bool = False) -> Any:
        with self._count:
            self.busy += 1
            self.most_at_once = max(self.most_at_once, self.busy)
        began = time.monotonic()
        try:
            return super().spawn(background=background)
        finally:
            self.starts.append((began, time.monotonic()))
            with self._count:
                self.busy -= 1


class Ticker:
    """A task that notes the time every millisecond, as long as the loop lets it run."""

    def __init__(self) -> None:
        self.ticks: list[float] = []
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            self.ticks.append(time.monotonic())
            await asyncio.sleep(0.001)

    def __enter__(self) -> Ticker:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()


@needs_bwrap
async def test_the_loop_keeps_running_while_20_sandboxed_workers_start() -> None:
    ex = RecordingSandbox(pool_size=0)
    await ex.warm()  # the one-off probe, so every start below is a plain worker start
    sessions = [Session(ex) for _ in range(20)]
    try:
        with Ticker() as ticker:
            await asyncio.gather(*(s.start() for s in sessions))
        ticked_during_a_start = [
            (a, b) for a, b in ex.starts if any(a < t < b for t in ticker.ticks)
        ]
        assert len(ex.starts) == 20
        assert ticked_during_a_start, "the loop never ran while a worker was starting"
        results = await asyncio.gather(*(s.run("6 * 7") for s in sessions))
        assert [r.value for r in results] == [42] * 20
    finally:
        await asyncio.gather(*(s.close() for s in sessions))


@needs_bwrap
async def test_concurrent_starts_run_side_by_side_up_to_the_bound() -> None:
    ex = RecordingSandbox(pool_size=0)
    await ex.warm()
    sessions = [Session(ex) for _ in range(12)]
    try:
        await asyncio.gather(*(s.start() for s in sessions))
        assert ex.most_at_once > 1, "the workers started one after the other"
        from codemode.execution.spawn import MAX_STARTS

        assert ex.most_at_once <= MAX_STARTS
    finally:
        await asyncio.gather(*(s.close() for s in sessions))


async def test_a_burst_that_empties_the_pool_leaves_more_warm_workers_for_the_next() -> None:
    ex = SubprocessExecutor(pool_size=1, memory_limit_mb=555)  # a pool of its own
    await ex.warm()
    pool = get_pool(ex.pool_key(), ex.spawn, ex.pool_size)

    async def burst() -> int:
        """Start four sessions at once; how many got a pre-started worker."""
        warm = {s.proc.pid for s in pool._ready}
        sessions = [Session(ex) for _ in range(4)]
        await asyncio.gather(*(s.start() for s in sessions))
        pids = [(await s.run("import os; os.getpid()")).value for s in sessions]
        await asyncio.gather(*(s.close() for s in sessions))
        return sum(pid in warm for pid in pids)

    try:
        first = await burst()
        deadline = time.monotonic() + 60
        while len(pool) < 4:  # refilled in the background, to the demand just seen
            assert time.monotonic() < deadline, f"the pool holds {len(pool)} workers"
            await asyncio.sleep(0.05)
        assert first == 1 and await burst() == 4
    finally:
        pool.close()


async def test_a_warm_worker_is_handed_out_without_waiting_for_a_turn_of_the_loop() -> None:
    """Its "ready" was written long ago: a session start from the pool reads it at once,
    so under load a new session does not wait behind every other session's callbacks."""
    ex = SubprocessExecutor(pool_size=1, memory_limit_mb=556)  # a pool of its own
    await ex.warm()
    pool = get_pool(ex.pool_key(), ex.spawn, ex.pool_size)
    deadline = time.monotonic() + 60
    while not select.select([s.from_fd for s in pool._ready], [], [], 0.05)[0]:
        assert time.monotonic() < deadline, "the pre-started worker never said it was ready"
    other_ran = asyncio.Event()
    asyncio.get_running_loop().call_soon(other_ran.set)
    session = Session(ex)
    try:
        await session.start()
        assert not other_ran.is_set(), "the start waited for the loop"
        assert (await session.run("6 * 7")).value == 42
    finally:
        await session.close()
        pool.close()


async def test_a_refill_waits_while_workers_are_taken_and_starts_once_the_pool_is_empty() -> None:
    """Background starts compete with a burst's first calls: they wait for a quiet
    moment (at most ``max_delay``), but never while the pool is empty."""
    ex = SubprocessExecutor(pool_size=2, memory_limit_mb=557)
    spawned: list[float] = []

    def spawn(*, background: bool = False) -> Any:
        if background:
            spawned.append(time.monotonic())
        return ex.spawn(background=background)

    pool = WorkerPool(spawn, 2, quiet=600.0, max_delay=5.0)
    taken = []
    try:
        await pool.fill()
        taken.append(pool.take())
        pool.refill()
        await asyncio.sleep(0.5)
        assert spawned == [], "a refill started while sessions were taking workers"
        emptied = time.monotonic()
        taken.append(pool.take())  # the last one: the next session would boot cold
        pool.refill()
        deadline = time.monotonic() + 60
        while len(pool) < 2:  # one at once, the other after at most max_delay
            assert time.monotonic() < deadline, f"{len(spawned)} of 2 refills started"
            await asyncio.sleep(0.02)
        assert spawned[0] >= emptied, "the first refill did not wait for the pool to empty"
    finally:
        pool.close()
        for worker in taken:
            if worker is not None:
                worker.destroy()


async def test_refills_do_not_wait_for_quiet_once_a_burst_outran_the_pool() -> None:
    """A start that found the pool empty means the burst is larger than the pool: the
    sessions still coming boot cold unless refills keep up, so none waits for quiet."""
    ex = SubprocessExecutor(pool_size=2, memory_limit_mb=557)
    pool = WorkerPool(ex.spawn, 2, quiet=600.0, max_delay=60.0)
    taken = []
    try:
        await pool.fill()
        taken += [pool.take(), pool.take()]
        assert pool.take() is None  # a miss: the target grows to 3
        pool.refill()
        deadline = time.monotonic() + 30  # well inside max_delay: nobody waited for it
        while len(pool) < 3:
            assert time.monotonic() < deadline, f"{len(pool)} of 3 refills landed"
            await asyncio.sleep(0.02)
    finally:
        pool.close()
        for worker in taken:
            if worker is not None:
                worker.destroy()


BACKGROUND = "/sys/fs/cgroup/cpu/codemode-background/cgroup.procs"


def _cpu_group(pid: int) -> str:
    with open(f"/proc/{pid}/cgroup") as f:
        return next(line.split(":", 2)[2].strip() for line in f if ":cpu:" in line)


def _inner(pid: int) -> list[int]:
    """The worker's processes below the launcher (bwrap's children: the Python inside)."""
    tids = os.listdir(f"/proc/{pid}/task")
    return [
        int(c) for t in tids for c in Path(f"/proc/{pid}/task/{t}/children").read_text().split()
    ]


@needs_bwrap
@pytest.mark.skipif(
    os.geteuid() != 0 or not os.path.isdir("/sys/fs/cgroup/cpu"),
    reason="needs root and the cgroup v1 cpu controller",
)
async def test_pool_refills_boot_in_the_background_and_a_taken_worker_gets_a_full_share() -> None:
    """A refill must not slow the running sessions: the workers it starts boot niced in
    the shared background cpu group; the one a session takes gets its own group, nice 0."""
    executor = SandboxExecutor(pool_size=2)
    await executor.warm()  # the first fill: someone waits for it, so at full speed
    async with Session(executor) as session:
        await session.run("1")  # took a worker: the pool refills in the background
        pid = session._worker.pid  # type: ignore[union-attr]
        for p in [pid, *_inner(pid)]:
            assert _cpu_group(p).startswith("/codemode/w-"), _cpu_group(p)
            assert os.getpriority(os.PRIO_PROCESS, p) == 0
        deadline = time.monotonic() + 30
        while not _niced(waiting := _background_pids()):  # the refill waits for quiet first
            assert time.monotonic() < deadline, f"no refilled worker is niced in {waiting}"
            await asyncio.sleep(0.05)


def _background_pids() -> set[int]:
    """Processes in the shared background group (made by the first background start)."""
    try:
        return {int(p) for p in Path(BACKGROUND).read_text().split()}
    except FileNotFoundError:
        return set()


def _niced(pids: set[int]) -> bool:
    """Some of ``pids`` and all at nice 19 (``nice`` sets it right after the exec that
    put its pid in the group; a pid that ended since does not count)."""
    nices = []
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            nices.append(os.getpriority(os.PRIO_PROCESS, pid))
    return bool(nices) and all(n == 19 for n in nices)
