"""Shared sessions (``codemode.cluster.shared``) on a real cluster and a real Redis: what
two replicas do when they reach the same session at the same moment."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from codemode.cluster import RayConfig, RayExecutor
from codemode.cluster.directory import SessionDirectory
from codemode.cluster.shared import SharedSessions

from .conftest import SESSION_RESOURCES, RayCluster, RedisServer, ray

pytestmark = [pytest.mark.anyio, pytest.mark.ray]


def replica(cluster: RayCluster, redis: RedisServer, tenant: str) -> SharedSessions:
    """What one ``serve`` replica holds: its executor and its view of the directory."""
    config = RayConfig(
        address=cluster.address, resources=SESSION_RESOURCES, memory_mb=200, start_timeout=120
    )
    executor = RayExecutor(config, tenant=tenant, pool_size=0)
    return SharedSessions(executor, SessionDirectory(redis.url, tenant=tenant))


async def no_calls(method: str, params: dict[str, Any]) -> Any:
    raise RuntimeError(method)


def actors(namespace: str) -> list[str]:
    named = ray.util.list_named_actors(all_namespaces=True)
    return [n["name"] for n in named if n["namespace"] == namespace]


async def test_two_replicas_starting_one_session_at_once_share_one_interpreter(
    cluster: RayCluster, redis: RedisServer
) -> None:
    a, b = replica(cluster, redis, "race"), replica(cluster, redis, "race")
    first, second = await asyncio.gather(
        a.for_key("mcp:s1").start(no_calls), b.for_key("mcp:s1").start(no_calls)
    )
    try:
        assert first.info["name"] == second.info["name"]
        assert (await first.run("x = 'set on a'", 30)).error is None
        assert (await second.run("x", 30)).value == "set on a"
        # The actor the losing replica started is gone, not left to idle out.
        assert actors(a.executor.namespace) == [first.info["name"]]
    finally:
        await a.end("mcp:s1")
        await first.close()
        await second.close()
        await a.directory.aclose()
        await b.directory.aclose()


async def test_a_recorded_actor_that_died_is_replaced_by_the_next_start(
    cluster: RayCluster, redis: RedisServer
) -> None:
    a = replica(cluster, redis, "stale")
    worker = await a.for_key("mcp:s2").start(no_calls)
    dead = worker.info["name"]
    worker.detached = False
    await worker.close()  # the actor ends; its name stays recorded
    again = await a.for_key("mcp:s2").start(no_calls)
    try:
        assert again.info["name"] != dead
        assert await a.directory.actor("mcp:s2") == again.info["name"]
    finally:
        await a.end("mcp:s2")
        await a.directory.aclose()
