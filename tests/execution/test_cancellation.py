"""Cancelling ``Session.run`` stops the code, as a timeout does, on every executor."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Awaitable, Callable

import pytest

from codemode import InProcessExecutor, Session, SubprocessExecutor
from codemode.execution.base import Executor

pytestmark = pytest.mark.anyio


Cancel = Callable[[Session, str, str, str], Awaitable[None]]


async def _cancel(cancel: Cancel, s: Session, code: str, tmp: os.PathLike[str]) -> None:
    marker = os.path.join(tmp, "started")
    await cancel(s, code, marker, marker)


@pytest.mark.parametrize("make", [SubprocessExecutor, InProcessExecutor])
async def test_a_cancelled_busy_loop_is_interrupted_and_the_next_run_keeps_the_state(
    make: type[Executor], tmp_path: os.PathLike[str], cancel_when_started: Cancel
) -> None:
    async with Session(make(interrupt_grace=0.5)) as s:  # type: ignore[call-arg]
        await s.run("kept = 'state'")
        await _cancel(cancel_when_started, s, "while True: pass", tmp_path)
        r = await asyncio.wait_for(s.run("kept"), 60)
        assert r.value == "state", r.to_text()


async def test_a_cancelled_run_stuck_in_a_syscall_is_interrupted(
    tmp_path: os.PathLike[str], cancel_when_started: Cancel
) -> None:
    async with Session(SubprocessExecutor(interrupt_grace=0.5)) as s:
        await s.run("kept = 'state'")
        code = "r, w = os.pipe()\nos.read(r, 1)"
        await _cancel(cancel_when_started, s, "import os\n" + code, tmp_path)
        assert (await asyncio.wait_for(s.run("kept"), 60)).value == "state"


async def test_a_cancelled_run_that_will_not_stop_is_killed_and_the_next_run_is_fresh(
    tmp_path: os.PathLike[str],
    cancel_when_started: Cancel,
    process_gone: Callable[[int], Awaitable[bool]],
) -> None:
    async with Session(SubprocessExecutor(interrupt_grace=0.5)) as s:
        pid = (await s.run("import os; os.getpid()")).value
        code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nMARK\nwhile True: pass"
        await _cancel(cancel_when_started, s, code, tmp_path)
        assert await process_gone(pid), "the cancelled run's worker still runs"
        r = await asyncio.wait_for(s.run("'next'"), 60)
        assert r.value == "next" and any("state was lost" in w for w in r.warnings)


async def test_an_inprocess_run_stuck_in_c_code_is_abandoned_and_the_next_run_is_fresh(
    tmp_path: os.PathLike[str], cancel_when_started: Cancel
) -> None:
    async with Session(InProcessExecutor(interrupt_grace=0.3)) as s:
        await s.run("kept = 1")
        # stuck in C (waiting for a shell) from before it says it started
        code = "import os\nos.system('touch ' + MARKER + ' && sleep 30')"
        await _cancel(cancel_when_started, s, code, tmp_path)
        r = await asyncio.wait_for(s.run("'next'"), 60)
        assert r.value == "next" and any("state was lost" in w for w in r.warnings)


async def test_closing_a_session_mid_run_settles_the_run_with_a_clear_error(
    tmp_path: os.PathLike[str],
) -> None:
    s = Session(SubprocessExecutor(interrupt_grace=0.5))
    await s.start()
    marker = os.path.join(tmp_path, "started")
    task = asyncio.create_task(
        s.run(f"open({marker!r}, 'w').close()\nimport time\ntime.sleep(3600)")
    )
    while not os.path.exists(marker):
        assert not task.done(), task.result().to_text()
        await asyncio.sleep(0.02)
    await s.close()  # the worker goes: whatever waited on it must hear why
    r = await asyncio.wait_for(task, 60)
    assert r.state_lost and r.error is not None and "closed" in r.error.message, r.to_text()


async def test_a_close_cancelled_while_it_waits_for_the_worker_still_ends_the_worker(
    tmp_path: os.PathLike[str], process_gone: Callable[[int], Awaitable[bool]]
) -> None:
    s = Session(SubprocessExecutor(interrupt_grace=0.5))
    await s.start()
    pid = (await s.run("import os; os.getpid()")).value
    marker = os.path.join(tmp_path, "started")
    # busy, so the shutdown waits in its pipe and close() waits for the worker to go
    task = asyncio.create_task(s.run(f"open({marker!r}, 'w').close()\nwhile True: pass"))
    while not os.path.exists(marker):
        assert not task.done(), task.result().to_text()
        await asyncio.sleep(0.02)
    closing = asyncio.create_task(s.close())
    await asyncio.sleep(0)  # one step: close() now waits for the worker to exit
    assert not closing.done()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert await process_gone(pid), "the worker outlived a cancelled close()"
    r = await asyncio.wait_for(task, 60)
    assert r.state_lost and r.error is not None and "closed" in r.error.message, r.to_text()
