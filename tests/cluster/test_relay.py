"""The relay's wire between host and actor: a run's request, events and result survive
the trip as they were, whatever the data."""

from __future__ import annotations

from codemode.cluster.actor import (
    CALL,
    DONE,
    from_result_fields,
    pack,
    result_fields,
    unpack,
)
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
