"""The actor's session (``_Session``, on a real subprocess worker, no cluster) runs each
run once, whichever way and however late its request comes."""

from __future__ import annotations

import asyncio
import marshal
from collections.abc import AsyncIterator
from typing import Any

import pytest

from codemode.cluster.actor import DONE, _Session, from_result_fields
from codemode.errors import ExecutorError
from codemode.result import ExecutionResult

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def session() -> AsyncIterator[_Session]:
    s = _Session("subprocess", {"memory_limit_mb": None}, lambda: None)
    await s.start()
    yield s
    await s.close()


async def run(s: _Session, run_id: bytes, code: str) -> ExecutionResult:
    seq, events = marshal.loads(await s.run(run_id, code, 30.0, 0))
    while not any(e[0] == DONE for e in events):
        seq, events = marshal.loads(await s.poll(run_id, seq))
    (done,) = [e for e in events if e[0] == DONE]
    return from_result_fields(done[1], 0)


async def test_a_run_request_that_comes_again_after_a_later_run_is_refused(
    session: _Session,
) -> None:
    """A link's frame delivered late (after the host went on over Ray and began the next
    run) names a run that is over: its code must not run a second time."""
    await run(session, b"run-0001", "n = 0")
    await run(session, b"run-0002", "n += 1")
    await run(session, b"run-0003", "x = 1")
    with pytest.raises(ExecutorError, match="over"):
        await session.run(b"run-0002", "n += 1", 30.0, 0)
    assert (await run(session, b"run-0004", "n")).value == 1


async def started(s: _Session, run_id: bytes, code: str, timeout: float) -> asyncio.Task[Any]:
    """The run under way (its first batch comes only with its end: no calls)."""

    async def whole() -> ExecutionResult:
        seq, events = marshal.loads(await s.run(run_id, code, timeout, 0))
        while not any(e[0] == DONE for e in events):
            seq, events = marshal.loads(await s.poll(run_id, seq))
        (done,) = [e for e in events if e[0] == DONE]
        return from_result_fields(done[1], 0)

    task = asyncio.get_running_loop().create_task(whole())
    await asyncio.sleep(0.3)
    return task


SLOW = "import time; time.sleep(2.5); 'ok'"


async def test_a_hold_holds_the_timeout_and_a_late_or_repeated_one_changes_nothing(
    session: _Session,
) -> None:
    """The host sends the holds in force, numbered: the same state sent over the link and
    again over Ray after a break, or an older one arriving after a newer one, must not
    leave a hold behind (the run's timeout would never fire again)."""
    held = await started(session, b"run-0001", SLOW, 1.5)
    session.hold(b"run-0001", 1, 1)
    assert (await held).value == "ok"  # held past its 1.5 s

    released = await started(session, b"run-0002", SLOW, 1.5)
    session.hold(b"run-0002", 1, 1)
    session.hold(b"run-0002", 2, 0)
    session.hold(b"run-0002", 1, 1)  # the first, again (over Ray, after the link broke)
    session.hold(b"run-0001", 5, 1)  # of the run before, late
    r = await released
    assert r.value != "ok" and r.error is not None  # its timeout fired


async def test_an_interrupt_sent_for_an_earlier_run_does_not_stop_the_next(
    session: _Session,
) -> None:
    await run(session, b"run-0001", "x = 1")
    task = await started(session, b"run-0002", "import time; time.sleep(1); 'done'", 30)
    assert not session.interrupt(b"run-0001", True)
    assert (await task).value == "done"
