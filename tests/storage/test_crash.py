"""Writers killed with SIGKILL half-way through a value leave the previous version intact."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from redis_server import RedisServer

from codemode.storage import FileStorage, Storage
from codemode.storage.redis import RedisStorage

pytestmark = pytest.mark.anyio

SRC = str(Path(__file__).resolve().parents[2] / "src")

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {src!r})
    from codemode.storage import open_storage

    def chunks():
        yield b"new" * 500_000
        print("half-way", flush=True)
        sys.stdin.readline()  # wait here until killed
        yield b"end"

    async def main():
        store = open_storage({target!r}, prefix={prefix!r})
        await store.put("artifacts", "a", chunks(), {{"v": 2}})

    asyncio.run(main())
    """
)


async def kill_writer_half_way(target: str, prefix: str) -> None:
    code = WRITER.format(src=SRC, target=target, prefix=prefix)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 30)  # type: ignore[union-attr]
        assert line.strip() == b"half-way"
    finally:
        proc.kill()
        proc.communicate(timeout=10)


async def check_old_version_intact(store: Storage) -> None:
    info, data = await store.read("artifacts", "a")
    assert (data, info.meta) == (b"old", {"v": 1})
    listing = await store.list("artifacts")
    assert (listing.names(), listing.bad) == (["a"], [])


async def test_a_file_write_killed_half_way_leaves_the_old_record(tmp_path: Path) -> None:
    store = FileStorage(tmp_path)
    await store.put("artifacts", "a", b"old", {"v": 1})
    await kill_writer_half_way(str(tmp_path), "unused")
    await check_old_version_intact(store)
    leftovers = [p.name for p in (tmp_path / "artifacts").iterdir() if p.name.startswith(".tmp-")]
    assert len(leftovers) == 1  # the dead writer's temporary file, never read as a record


@pytest.mark.redis
async def test_a_redis_write_killed_half_way_leaves_the_old_record(
    redis_server: RedisServer,
) -> None:
    prefix = f"crash-{uuid.uuid4().hex[:6]}"
    store = RedisStorage(redis_server.url, prefix)
    try:
        await store.put("artifacts", "a", b"old", {"v": 1})
        await kill_writer_half_way(redis_server.url, prefix)
        await check_old_version_intact(store)
        r = store._r()
        pending = [k for k in await r.keys(f"{prefix}:blob:*") if await r.ttl(k) > 0]
        assert len(pending) == 1  # the orphan blob expires on its own
    finally:
        await store.aclose()
