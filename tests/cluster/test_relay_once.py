"""The actor's session (``_Session``, on a real subprocess worker, no cluster) runs each
run once, whichever way and however late its request comes."""

from __future__ import annotations

import marshal
from collections.abc import AsyncIterator

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
