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
