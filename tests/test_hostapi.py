"""Host layers: around the worker's calls, in order, and only where they were declared for."""

from __future__ import annotations

from typing import Any

import pytest

from codemode.hostapi import Handler, HostAPI, for_methods

pytestmark = pytest.mark.anyio


def host_with(seen: list[str]) -> HostAPI:
    host = HostAPI()

    async def echo(params: dict[str, Any]) -> Any:
        seen.append("handler")
        return params["x"]

    host.register("tools.call", echo)
    host.register("state.get", echo)
    return host


async def test_a_layer_declared_for_some_methods_wraps_only_those() -> None:
    seen: list[str] = []
    host = host_with(seen)

    async def everywhere(method: str, params: dict[str, Any], call_next: Handler) -> Any:
        seen.append(f"all {method}")
        return await call_next(params)

    @for_methods(lambda m: m.startswith("state."))
    async def memory_only(method: str, params: dict[str, Any], call_next: Handler) -> Any:
        seen.append(f"memory {method}")
        return await call_next(params)

    host.use(everywhere)
    host.use(memory_only)
    assert await host.dispatch("tools.call", {"x": 1}) == 1
    assert await host.dispatch("state.get", {"x": 2}) == 2
    assert seen == ["all tools.call", "handler", "all state.get", "memory state.get", "handler"]


async def test_a_layer_or_handler_added_later_applies_to_the_next_call() -> None:
    seen: list[str] = []
    host = host_with(seen)
    assert await host.dispatch("state.get", {"x": 1}) == 1  # builds and keeps the chain

    async def late(method: str, params: dict[str, Any], call_next: Handler) -> Any:
        seen.append("late")
        return await call_next(params)

    host.use(late)

    async def other(params: dict[str, Any]) -> Any:
        seen.append("other")
        return -params["x"]

    host.register("state.get", other)
    assert await host.dispatch("state.get", {"x": 1}) == -1
    assert seen == ["handler", "late", "other"]


@pytest.mark.parametrize("executor", ["subprocess", "inprocess"])
async def test_a_host_side_bug_reaches_the_code_as_its_type_and_a_reference_only(
    notes_ws: Any, open_notes: Any, executor: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An exception that is not codemode's may quote host paths or secrets (a driver's
    connection string): the code gets its type and a reference, the host's log the text."""
    from codemode import InProcessExecutor, SubprocessExecutor
    from codemode.tools.registry import NextCall, ToolCall

    leak = "cannot read /srv/ops/.db.conf: postgres://admin:hunter2@db.internal/prod"

    async def buggy(call: ToolCall, call_next: NextCall) -> Any:
        raise RuntimeError(leak)

    code = (
        "try:\n"
        "    tools.notes.read_note(name='hello')\n"
        "except Exception as e:\n"
        "    out = (type(e).__name__, str(e), e.reference)\n"
        "out"
    )
    run_in = SubprocessExecutor() if executor == "subprocess" else InProcessExecutor()
    with caplog.at_level("ERROR", logger="codemode.host"):
        async with open_notes(notes_ws, executor=run_in) as s:
            s.tools.use(buggy)
            r = await s.run(code)
    assert r.error is None, r.to_text()
    kind, message, ref = r.value
    assert kind == "HostError"
    assert "RuntimeError" in message and ref in message and len(ref) == 8
    assert "hunter2" not in message and "/srv/ops" not in message
    [record] = [x for x in caplog.records if ref in x.getMessage()]
    assert record.exc_info is not None and leak in str(record.exc_info[1])
