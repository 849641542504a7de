"""A cancelled run is stopped for real, as a timed-out one is, and never holds up the next.

The caller of ``Session.run`` goes away (an MCP client's cancellation, a closed request):
the code is interrupted at once and its worker killed after the grace period if it does
not stop; the session's next run starts without waiting for the abandoned code.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Awaitable, Callable

import pytest

from codemode import Session

from .conftest import Arena

pytestmark = [pytest.mark.anyio, pytest.mark.security]

INTERRUPTIBLE = {
    "a tight loop": "while True: pass",
    "a blocking read": "r, w = os.pipe()\nos.read(r, 1)",
    "a long sleep": "import time\ntime.sleep(3600)",
}
STUBBORN = {  # each arms itself before it says it started (MARK): no race with the cancel
    "a loop that ignores SIGINT": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    "MARK\nwhile True: pass",
    "a loop whose SIGINT handler does nothing": "import signal\n"
    "signal.signal(signal.SIGINT, lambda *a: None)\nMARK\nwhile True: pass",
    "a sleep with SIGINT blocked": "import signal, time\n"
    "signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])\nMARK\ntime.sleep(3600)",
}


Cancel = Callable[[Session, str, str, str], Awaitable[None]]
# For runs that must stop by their interrupt: a loaded machine may take seconds to deliver
# it, and the arena's 0.5 s grace would then kill the worker (the state lost) instead.
GENEROUS_GRACE = 30.0


async def _cancel(arena: Arena, cancel: Cancel, code: str) -> None:
    marker = f"started-{uuid.uuid4().hex}"
    await cancel(arena.attacker, code, marker, os.path.join(arena.host.attacker_ws, marker))


def _worker_pid(session: Session) -> int:
    worker = session._worker
    assert worker is not None
    return int(worker.pid)  # type: ignore[attr-defined]


@pytest.mark.parametrize("code", list(INTERRUPTIBLE.values()), ids=list(INTERRUPTIBLE))
async def test_a_cancelled_run_is_interrupted_and_the_state_survives(
    arena: Arena, code: str, cancel_when_started: Cancel
) -> None:
    arena.executor.interrupt_grace = GENEROUS_GRACE
    await arena.attacker.run("kept = 'state'")
    await _cancel(arena, cancel_when_started, code)
    r = await asyncio.wait_for(arena.attacker.run("kept"), 60)
    assert r.value == "state", r.to_text()


@pytest.mark.parametrize("code", list(STUBBORN.values()), ids=list(STUBBORN))
async def test_a_cancelled_run_that_ignores_the_interrupt_is_killed_without_a_next_run(
    arena: Arena,
    code: str,
    cancel_when_started: Cancel,
    process_gone: Callable[[int], Awaitable[bool]],
) -> None:
    pid = _worker_pid(arena.attacker)
    await _cancel(arena, cancel_when_started, code)
    assert await process_gone(pid), "the worker of the cancelled run is still running"
    r = await asyncio.wait_for(arena.attacker.run("'next'"), 60)
    assert r.value == "next", r.to_text()
    assert any("state was lost" in w for w in r.warnings), r.warnings


async def test_a_run_cancelled_as_soon_as_it_is_sent_does_not_hold_up_the_next(
    arena: Arena,
) -> None:
    arena.executor.interrupt_grace = GENEROUS_GRACE
    await arena.attacker.run("kept = 'state'")
    task = asyncio.create_task(arena.attacker.run("import time\ntime.sleep(3600)", 3600))
    await asyncio.sleep(0)  # the run's frame is on its way; the worker may not have it yet
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 120)
    # Bounded by the grace (then the worker is killed and the state is lost): an interrupt
    # that missed a run not yet started would show as a lost state.
    r = await asyncio.wait_for(arena.attacker.run("kept"), 120)
    assert r.value == "state", r.to_text()


async def test_an_interrupt_the_code_did_not_take_is_sent_again_until_it_does(
    arena: Arena, cancel_when_started: Cancel
) -> None:
    """A SIGINT whose Python handler never ran (here the code ignored SIGINT for a moment;
    on CPython 3.11 one can also be lost to a race between threads, and the run then sleeps
    through it) is sent again until it is taken: the run stops and the state survives."""
    arena.executor.interrupt_grace = GENEROUS_GRACE
    await arena.attacker.run("kept = 'state'")
    code = (
        "import signal, time\nold = signal.signal(signal.SIGINT, signal.SIG_IGN)\nMARK\n"
        "time.sleep(2)\nsignal.signal(signal.SIGINT, old)\ntime.sleep(3600)"
    )
    await _cancel(arena, cancel_when_started, code)
    r = await asyncio.wait_for(arena.attacker.run("kept"), 60)
    assert r.value == "state", r.to_text()
    assert not r.warnings, r.warnings
