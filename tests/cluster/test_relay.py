"""The relay's wire between host and actor: a run's request, events and result survive
the trip as they were, whatever the data; a message sent twice or an answer lost (a link
that broke) changes nothing of the run."""

from __future__ import annotations

import asyncio

import pytest

from codemode.cluster.actor import (
    CALL,
    DONE,
    _Session,
    from_result_fields,
    pack,
    result_fields,
    unpack,
)
from codemode.errors import ExecutorError
from codemode.result import ErrorInfo, ExecutionResult


def test_a_result_with_an_error_and_warnings_comes_back_equal() -> None:
    result = ExecutionResult(
        value={"rows": [1, 2.5, None, True], "name": "é\ud800"},
        has_value=True,
        stdout="out",
        error=ErrorInfo("ValueError", "bad", "Traceback ...", 3, 7),
        warnings=("slow",),
        cpu_seconds=0.01,
        peak_memory_bytes=1 << 20,
    )
    event = unpack(pack([(DONE, result_fields(result))]))[0]
    assert from_result_fields(event[1], result.duration_ms) == result


def test_a_request_with_lone_surrogates_and_big_ints_comes_back_equal() -> None:
    request = ("print('\ud83d')", 2**80, 30.0)
    assert unpack(pack(request)) == request


def test_data_marshal_refuses_is_sent_as_is_for_ray_to_pickle() -> None:
    class Tag(str):
        pass

    events = [(CALL, 1, "tools.call", {"x": Tag("a")})]
    assert pack(events) is events
    assert unpack(pack(events)) is events


async def _session() -> _Session:
    s = _Session("subprocess", {}, lambda: None)
    await s.start()
    return s


@pytest.mark.anyio
async def test_a_batch_the_host_missed_is_sent_again_and_a_run_sent_twice_runs_once() -> None:
    s = await _session()
    try:
        await s.run(b"r0", "n = 0", 10, 0)
        first = await s.run(b"r1", "n += 1\nn", 10, 0)
        assert await s.poll(b"r1", 0) == first  # the answer was lost: the same batch
        assert await s.run(b"r1", "n += 1\nn", 10, 0) == first  # the request came twice
        seq, events = unpack(first)
        assert seq == 1 and events[-1][0] == DONE
        assert from_result_fields(events[-1][1], 0).value == 1
    finally:
        await s.close()


@pytest.mark.anyio
async def test_a_poll_left_over_from_an_earlier_run_takes_nothing_of_the_next() -> None:
    s = await _session()
    try:
        seq, _ = unpack(await s.run(b"r1", "1", 10, 0))
        stale = asyncio.ensure_future(s.poll(b"r1", seq))  # a host gone without a word
        await asyncio.sleep(0.01)
        seq, events = unpack(await s.run(b"r2", "41 + 1", 10, 0))
        assert from_result_fields(events[-1][1], 0).value == 42
        with pytest.raises(ExecutorError, match="a poll of a run that is over"):
            await stale
    finally:
        await s.close()
