"""A task's state travels through the client between rounds (2026-07-28 sampling): the
server's limits apply to it whatever it says, and a state the server did not write is
refused with a clear error."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from codemode.agent.loop import BadTaskState, Limits, TaskRun

SERVER = Limits(max_steps=3, max_seconds=30.0, run_timeout=5.0, output_limit=2000)


def _state() -> dict[str, Any]:
    run = TaskRun("compute x", mode="tools", limits=SERVER, provider="sampling", model="client")
    state: dict[str, Any] = json.loads(json.dumps(run.to_state()))  # as it comes back
    return state


def test_limits_a_client_writes_into_the_state_are_ignored() -> None:
    state = _state()
    state["limits"] = {
        "max_steps": 200,
        "max_seconds": 1e9,
        "run_timeout": 1e9,
        "output_limit": 10**9,
        "max_total_tokens": None,
        "max_tokens": 10**6,
        "temperature": None,
    }
    run = TaskRun.from_state(state, limits=SERVER)
    assert run.limits == SERVER
    assert run.remaining <= SERVER.max_seconds


def test_the_state_the_server_writes_carries_no_limits_to_trust() -> None:
    assert "limits" not in _state()


def test_a_task_cannot_be_given_more_time_by_moving_its_start_into_the_future() -> None:
    state = _state() | {"started": time.time() + 3600}
    with pytest.raises(BadTaskState, match="starts in the future"):
        TaskRun.from_state(state, limits=SERVER)


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda s: [1, 2], "expected an object"),
        (lambda s: {k: v for k, v in s.items() if k != "messages"}, "missing 'messages'"),
        (lambda s: s | {"mode": "shell"}, "unknown mode 'shell'"),
        (lambda s: s | {"started": "yesterday"}, "not a task state this server wrote"),
        (lambda s: s | {"started": float("nan")}, "not a time"),
        (lambda s: s | {"messages": [{"text": "hi"}]}, "missing 'role'"),
    ],
)
def test_a_tampered_state_is_refused_with_what_is_wrong(edit: Any, says: str) -> None:
    with pytest.raises(BadTaskState, match="not a task state this server wrote") as info:
        TaskRun.from_state(edit(_state()), limits=SERVER)
    assert says in str(info.value)


def test_the_state_names_its_task_and_a_state_without_a_name_is_refused() -> None:
    state = _state()
    assert TaskRun.from_state(state, limits=SERVER).id == state["id"]
    for bad in ({k: v for k, v in state.items() if k != "id"}, state | {"id": 7}):
        with pytest.raises(BadTaskState, match="not a task state this server wrote"):
            TaskRun.from_state(bad, limits=SERVER)
