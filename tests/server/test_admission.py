"""Admission over HTTP: more clients than sessions wait their turn or are told to retry;
health and readiness answer from counters."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from .conftest import http_client, make_workspace, start_http_server
from .test_stdio import text_of

pytestmark = pytest.mark.anyio


async def test_a_burst_of_12_clients_against_4_sessions_all_get_served(open_root: Path) -> None:
    base, _ = make_workspace(open_root)
    server = start_http_server(base, "--max-sessions", "4", executor="sandbox")
    results: list[str] = []
    errors: list[str] = []

    async def client(i: int) -> None:
        try:
            async with http_client(server.url) as c:
                await c.list_tools()
                r = await c.call_tool("run_code", {"code": f"import time\ntime.sleep(0.3)\n{i}"})
                (errors if r.is_error else results).append(text_of(r))
        except Exception as exc:  # noqa: BLE001 - every failure is reported below
            errors.append(repr(exc))

    try:
        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(client, i)
        peak = server.health()
    finally:
        server.stop()
    assert errors == []
    assert sorted(results, key=int) == [str(i) for i in range(12)]
    assert peak["sessions"] <= 4 and peak["queued"] == 0


async def test_readiness_says_busy_when_a_new_client_could_not_get_in(tmp_path: Path) -> None:
    base, _ = make_workspace(tmp_path)
    server = start_http_server(base, "--max-sessions", "1", "--queue-size", "0")
    try:
        before = server.ready()
        async with http_client(server.url) as client:
            await client.call_tool("run_code", {"code": "1"})
            full = server.ready()
            health = server.health()
        server.wait_health("sessions", 0)
        after = server.ready()
    finally:
        server.stop()
    assert (before, full, after) == ((200, "ready"), (503, "busy"), (200, "ready"))
    assert health["status"] == "ok" and health["sessions"] == 1


async def test_a_client_over_its_share_is_refused_while_another_waits_and_yields_freed_slots(
    tmp_path: Path,
) -> None:
    # Two clients: 127.0.0.1 holds both sessions (nobody waited when it took them) and
    # queues for a third; 127.0.0.2 then waits too. Before, the holder's next request
    # queued as well, and the first freed slot went to the holder's older waiter.
    base, _ = make_workspace(tmp_path)
    argv = ("--max-sessions", "2", "--client-share", "0.5", "--queue-timeout", "60")
    server = start_http_server(base, *argv)
    release = [anyio.Event(), anyio.Event()]
    done: dict[str, anyio.Event] = {name: anyio.Event() for name in ("a3", "b")}
    texts: dict[str, str] = {}

    async def hold(i: int) -> None:
        async with http_client(server.url) as c:
            await c.call_tool("run_code", {"code": "1"})
            await release[i].wait()  # leaving sends DELETE: its slot frees

    async def wait_for_one(name: str, address: str) -> None:
        async with http_client(server.url, local_address=address) as c:
            r = await c.call_tool("run_code", {"code": f"{name!r}"})
            texts[name] = ("error: " if r.is_error else "") + text_of(r)
            done[name].set()

    async def health(key: str, value: int) -> None:
        await anyio.to_thread.run_sync(server.wait_health, key, value, 30.0)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(hold, i)
            await health("sessions", 2)
            tg.start_soon(wait_for_one, "a3", "127.0.0.1")
            await health("queued", 1)
            tg.start_soon(wait_for_one, "b", "127.0.0.2")
            await health("queued", 2)
            with anyio.fail_after(30):  # refused at once, not queued
                async with http_client(server.url) as c:
                    refused = await c.call_tool("run_code", {"code": "4"})
            release[0].set()
            with anyio.fail_after(30):
                await done["b"].wait()
            b_first = not done["a3"].is_set()
            release[1].set()
            with anyio.fail_after(30):
                await done["a3"].wait()
    finally:
        for event in release:
            event.set()
        server.stop()
    assert refused.is_error, text_of(refused)
    text = text_of(refused)
    assert "busy" in text and "(127.0.0.1) already holds 2" in text, text
    assert "--client-share 0.5: 1" in text and "Retry after" in text, text
    assert b_first, "the freed slot went to the client over its share"
    assert texts == {"a3": "a3", "b": "b"}
