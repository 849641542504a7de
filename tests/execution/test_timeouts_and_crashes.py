"""Runaway code is stopped for real, crashes are reported, and nothing hangs."""

from __future__ import annotations

import pytest

from codemode import Session, SubprocessExecutor

pytestmark = pytest.mark.anyio


async def test_busy_loop_is_interrupted_and_the_state_survives(session: Session) -> None:
    await session.run("kept = 'yes'")
    r = await session.run("while True: pass", timeout=1)
    assert r.timed_out and not r.state_lost
    assert r.error is not None and r.error.type == "Timeout"
    assert (await session.run("kept")).value == "yes"


async def test_sleep_is_interrupted_by_the_timeout(session: Session) -> None:
    r = await session.run("import time\ntime.sleep(100)", timeout=1)
    assert r.timed_out and r.duration_ms < 5000
    assert (await session.run("2")).value == 2


async def test_code_swallowing_keyboard_interrupt_is_killed_and_state_loss_reported(
    session: Session,
) -> None:
    await session.run("kept = 1")
    code = (
        "import time\n"
        "while True:\n"
        "    try:\n"
        "        time.sleep(100)\n"
        "    except KeyboardInterrupt:\n"
        "        pass"
    )
    r = await session.run(code, timeout=1)
    assert r.timed_out and r.state_lost
    assert "state was lost" in r.error.message  # type: ignore[union-attr]
    r2 = await session.run("kept")
    assert r2.error is not None and r2.error.type == "NameError"
    assert (await session.run("1 + 1")).value == 2


async def test_a_hang_inside_c_code_is_killed() -> None:
    async with Session(SubprocessExecutor(interrupt_grace=0.5)) as s:
        r = await s.run("import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", timeout=1)
        assert r.timed_out and r.state_lost
        assert (await s.run("'fresh'")).value == "fresh"


async def test_output_of_a_stopped_run_never_appears_in_a_later_result(session: Session) -> None:
    code = (
        "import threading, time\n"
        "def spam():\n"
        "    while True:\n"
        "        print('leak'); time.sleep(0.005)\n"
        "threading.Thread(target=spam, daemon=True).start()\n"
        "while True: pass"
    )
    r = await session.run(code, timeout=0.5)
    assert r.timed_out
    for _ in range(5):
        r = await session.run("import time; time.sleep(0.05); print('clean')")
        assert r.stdout == "clean\n"


async def test_threads_of_a_finished_run_still_report_into_later_runs(session: Session) -> None:
    await session.run(
        "import threading, time\n"
        "ev = threading.Event()\n"
        "t = threading.Thread(target=lambda: (ev.wait(), print('late')))\n"
        "t.start()"
    )
    r = await session.run("ev.set(); t.join()")
    assert r.stdout == "late\n"


async def test_os_exit_reports_the_exit_status_and_the_next_run_gets_a_fresh_worker(
    session: Session,
) -> None:
    await session.run("kept = 1")
    r = await session.run("import os\nos._exit(3)")
    assert r.error is not None and r.error.type == "WorkerCrashed"
    assert "status 3" in r.error.message and r.state_lost
    assert (await session.run("'again'")).value == "again"


async def test_a_segfault_is_reported_with_its_signal(session: Session) -> None:
    r = await session.run("import ctypes\nctypes.string_at(0)")
    assert r.error is not None and r.error.type == "WorkerCrashed"
    assert "SIGSEGV" in r.error.message
    assert "Fatal Python error" in r.error.message  # the worker's stderr tail
    assert (await session.run("1")).value == 1


async def test_a_memory_bomb_raises_memory_error_within_the_limit() -> None:
    async with Session(SubprocessExecutor(memory_limit_mb=512)) as s:
        r = await s.run("x = bytearray(4 * 1024**3)")
        assert r.error is not None and r.error.type == "MemoryError"
        assert "512 MB" in r.error.message
        r = await s.run("chunks = []\nwhile True:\n    chunks.append(bytearray(10**7))", timeout=30)
        assert r.error is not None and r.error.type == "MemoryError"
        await s.reset()
        assert (await s.run("sum(range(10))")).value == 45


async def test_a_dead_worker_between_runs_is_replaced_with_a_warning(session: Session) -> None:
    import os
    import signal

    pid = (await session.run("import os; os.getpid()")).value
    os.kill(pid, signal.SIGKILL)
    import anyio

    await anyio.sleep(0.2)
    r = await session.run("'ok'")
    assert r.value == "ok"
    assert any("restarted" in w for w in r.warnings)


@pytest.mark.parametrize("how", ["ignored", "blocked"])
async def test_a_worker_started_with_sigint_ignored_or_blocked_still_stops_at_its_timeout(
    how: str,
) -> None:
    """A launcher that ignores or blocks SIGINT (a Ray worker process, nohup) passes that
    on to its children; the worker restores the interrupt, so a timeout keeps its state."""
    import signal

    previous = signal.getsignal(signal.SIGINT)
    if how == "ignored":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    else:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        session = Session(SubprocessExecutor(pool_size=0))
        await session.start()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    async with session:
        await session.run("kept = 'yes'")
        r = await session.run("while True: pass", timeout=1)
        assert r.timed_out and not r.state_lost
        assert (await session.run("kept")).value == "yes"
