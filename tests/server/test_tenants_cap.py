"""``serve --tenants``: ``--max-sessions`` is per tenant, ``--max-sessions-total`` bounds
the whole process (its sandbox workers), on a real server with two tenants."""

from __future__ import annotations

import json
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest

from .conftest import http_client, start_http_server
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

TOKENS = {"acme": "acme-token-" + "a" * 32, "globex": "globex-token-" + "g" * 32}


def _tenants(root: Path) -> Path:
    spec = {}
    for name in TOKENS:
        ws = root / name
        ws.mkdir()
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {}}))
        spec[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
    path = root / "tenants.json"
    path.write_text(json.dumps({"tenants": spec}))
    return path


async def test_the_tenants_share_the_process_wide_session_limit(tmp_path: Path) -> None:
    server = start_http_server(
        None,
        "--tenants",
        str(_tenants(tmp_path)),
        "--max-sessions",
        "2",
        "--max-sessions-total",
        "3",
        "--queue-size",
        "0",
        token=None,
        env={f"{name.upper()}_TOKEN": token for name, token in TOKENS.items()},
    )
    try:
        async with AsyncExitStack() as stack:
            acme = [
                await stack.enter_async_context(
                    http_client(server.url, token=TOKENS["acme"], mode="legacy")
                )
                for _ in range(2)
            ]
            for c in acme:
                assert text_of(await c.call_tool("run_code", {"code": "'acme'"})) == "acme"
            async with http_client(server.url, token=TOKENS["globex"], mode="legacy") as g1:
                assert text_of(await g1.call_tool("run_code", {"code": "1"})) == "1"
                async with http_client(server.url, token=TOKENS["globex"], mode="legacy") as g2:
                    refused = await g2.call_tool("run_code", {"code": "2"})
                    assert refused.is_error
                    said = text_of(refused)
                    assert "busy" in said and "--max-sessions-total" in said, said
                    assert "3 concurrent sessions across all tenants" in said
                    assert "Retry after" in said
                async with http_client(server.url, token=TOKENS["acme"], mode="legacy") as a3:
                    refused = await a3.call_tool("run_code", {"code": "3"})  # its own limit
                    assert refused.is_error and "(--max-sessions)" in text_of(refused)
        # every session closed: globex gets its second session
        async with AsyncExitStack() as stack:
            globex = [
                await stack.enter_async_context(
                    http_client(server.url, token=TOKENS["globex"], mode="legacy")
                )
                for _ in range(2)
            ]
            for c in globex:
                assert text_of(await c.call_tool("run_code", {"code": "'g'"})) == "g"
    finally:
        server.stop()
    assert any("at most 2 sessions per tenant, 3 in all" in line for line in server.lines)


async def test_a_tenant_over_its_share_is_refused_while_another_tenant_waits(
    tmp_path: Path,
) -> None:
    # acme takes every slot of the process while nobody waits; globex then waits. acme's
    # next client is refused at once, and the first slot acme frees goes to globex, not
    # to acme's own older waiter. Before, acme queued again and got that slot first.
    server = start_http_server(
        None,
        "--tenants",
        str(_tenants(tmp_path)),
        "--max-sessions",
        "4",
        "--max-sessions-total",
        "2",
        "--client-share",
        "0.5",
        "--queue-timeout",
        "60",
        token=None,
        env={f"{name.upper()}_TOKEN": token for name, token in TOKENS.items()},
    )
    release = [anyio.Event(), anyio.Event()]
    done = {name: anyio.Event() for name in ("acme", "globex")}

    async def hold(i: int) -> None:
        async with http_client(server.url, token=TOKENS["acme"], mode="legacy") as c:
            await c.call_tool("run_code", {"code": "1"})
            await release[i].wait()

    async def wait_for_one(tenant: str) -> None:
        async with http_client(server.url, token=TOKENS[tenant], mode="legacy") as c:
            r = await c.call_tool("run_code", {"code": f"{tenant!r}"})
            assert text_of(r) == tenant, text_of(r)
            done[tenant].set()

    async def health(key: str, value: int) -> None:
        await anyio.to_thread.run_sync(server.wait_health, key, value, 30.0)

    try:
        async with anyio.create_task_group() as tg:
            for i in range(2):
                tg.start_soon(hold, i)
            await health("sessions", 2)
            tg.start_soon(wait_for_one, "acme")
            await health("queued", 1)
            tg.start_soon(wait_for_one, "globex")
            await health("queued", 2)
            with anyio.fail_after(30):  # refused at once, not queued
                async with http_client(server.url, token=TOKENS["acme"], mode="legacy") as c:
                    refused = await c.call_tool("run_code", {"code": "4"})
            release[0].set()
            with anyio.fail_after(30):
                await done["globex"].wait()
            globex_first = not done["acme"].is_set()
            release[1].set()
            with anyio.fail_after(30):
                await done["acme"].wait()
    finally:
        for event in release:
            event.set()
        server.stop()
    said = text_of(refused)
    assert refused.is_error and "this tenant already holds 2" in said, said
    assert "--client-share 0.5: 1" in said and "Retry after" in said, said
    assert globex_first, "the freed slot went to the tenant over its share"
