"""RedisStorage specifics: tenants, lost connections, damaged entries."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator

import pytest
from redis_server import RedisServer, free_port

from codemode.errors import StorageUnavailable
from codemode.storage.redis import RedisStorage

pytestmark = [pytest.mark.anyio, pytest.mark.redis]


def prefix() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_prefixes_isolate_tenants(redis_server: RedisServer) -> None:
    a, b = RedisStorage(redis_server.url, prefix()), RedisStorage(redis_server.url, prefix())
    try:
        await a.put("skills", "shared_name", b"from a")
        await b.put("skills", "shared_name", b"from b")
        assert (await a.read("skills", "shared_name"))[1] == b"from a"
        assert (await b.read("skills", "shared_name"))[1] == b"from b"
        await a.delete("skills", "shared_name")
        assert (await b.list("skills")).names() == ["shared_name"]
    finally:
        await a.aclose()
        await b.aclose()


async def test_an_unreachable_server_gives_storage_unavailable() -> None:
    store = RedisStorage(f"redis://127.0.0.1:{free_port()}/0", "x", connect_timeout=0.5)
    try:
        with pytest.raises(StorageUnavailable, match="unreachable"):
            await store.put("artifacts", "a", b"data")
        with pytest.raises(StorageUnavailable):
            await store.list("artifacts")
    finally:
        await store.aclose()


async def test_a_damaged_entry_is_named_and_the_listing_still_returns_the_others(
    redis_server: RedisServer,
) -> None:
    store = RedisStorage(redis_server.url, prefix())
    try:
        await store.put("skills", "good", b"1")
        await store._r().hset(f"{store.prefix}:skills:meta", "bad", b"{not json")
        listing = await store.list("skills")
        assert listing.names() == ["good"]
        assert listing.bad[0].name == "bad"
        assert f"{store.prefix}:skills:meta[bad]" in listing.bad[0].where
    finally:
        await store.aclose()


class CuttableProxy:
    """A TCP proxy in front of Redis whose connections the test can cut mid-write."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self.writers: list[asyncio.StreamWriter] = []
        self.server: asyncio.base_events.Server | None = None
        self.forwarded = 0

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _pipe(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await r.read(65536):
                self.forwarded += len(data)
                w.write(data)
                await w.drain()
        w.close()

    async def _handle(self, cr: asyncio.StreamReader, cw: asyncio.StreamWriter) -> None:
        ur, uw = await asyncio.open_connection("127.0.0.1", self.target_port)
        self.writers += [cw, uw]
        await asyncio.gather(self._pipe(cr, uw), self._pipe(ur, cw))

    async def cut(self) -> None:
        """Drop every connection and refuse new ones."""
        assert self.server is not None
        self.server.close()
        for w in self.writers:
            w.transport.abort()
        await self.server.wait_closed()


async def test_a_connection_cut_mid_write_raises_and_writes_nothing(
    redis_server: RedisServer,
) -> None:
    proxy = CuttableProxy(redis_server.port)
    await proxy.start()
    p = prefix()
    store = RedisStorage(f"redis://127.0.0.1:{proxy.port}/0", p, connect_timeout=0.5)
    direct = RedisStorage(redis_server.url, p)
    try:
        await store.put("artifacts", "a", b"old", {"v": 1})

        async def chunks() -> AsyncIterator[bytes]:
            yield b"n" * (1 << 20)
            yield b"n" * (1 << 20)
            await proxy.cut()
            yield b"n" * (1 << 20)

        with pytest.raises(StorageUnavailable, match="nothing was written"):
            await store.put("artifacts", "a", chunks(), {"v": 2})
        info, data = await direct.read("artifacts", "a")
        assert (data, info.meta) == (b"old", {"v": 1})
    finally:
        await store.aclose()
        await direct.aclose()
