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
