"""CallTracker: calls end quietly, with a reason, when their client goes or at shutdown."""

from __future__ import annotations

import anyio
import pytest

from codemode.server.calls import CLIENT_GONE, CallTracker, ClientLink

pytestmark = pytest.mark.anyio


async def test_a_lost_link_cancels_its_own_calls_only() -> None:
    calls = CallTracker()
    mine, other = ClientLink("a"), ClientLink("b")
    reasons: dict[str, str | None] = {}

    async def call(name: str, link: ClientLink) -> None:
        with calls.track(link) as running:
            await anyio.sleep(30 if name == "mine" else 0.05)
        reasons[name] = running.reason

    async with anyio.create_task_group() as tg:
        tg.start_soon(call, "mine", mine)
        tg.start_soon(call, "other", other)
        with anyio.fail_after(10):
            while len(calls) < 2:
                await anyio.sleep(0.001)
        mine.lost()
    assert reasons == {"mine": CLIENT_GONE, "other": None}
    assert len(calls) == 0


async def test_a_call_for_a_client_already_gone_is_cancelled_at_once() -> None:
    link = ClientLink()
    link.lost()
    with CallTracker().track(link) as running:
        await anyio.sleep(30)
    assert running.reason == CLIENT_GONE


async def test_cancel_all_ends_every_call_and_wait_idle_sees_it() -> None:
    calls = CallTracker()
    done: list[str | None] = []

    async def call() -> None:
        with calls.track() as running:
            await anyio.sleep(30)
        done.append(running.reason)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(call)
            while len(calls) < 3:
                await anyio.sleep(0.001)
            assert calls.cancel_all("stopping") == 3
            await calls.wait_idle()
    assert done == ["stopping"] * 3
