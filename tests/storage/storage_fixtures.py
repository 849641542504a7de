"""The storage fixtures (a real redis-server; every storage backend as a parameter),
shared by the conftests of the suites that run against both backends."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer

from codemode.storage import FileStorage, Storage
from codemode.storage.redis import RedisStorage


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    if shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists():
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with RedisServer() as server:
        yield server


@pytest.fixture(params=["file", pytest.param("redis", marks=pytest.mark.redis)])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Storage]:
    if request.param == "file":
        yield FileStorage(tmp_path / "store")
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    store = RedisStorage(server.url, prefix=f"t-{uuid.uuid4().hex[:8]}")
    try:
        yield store
    finally:
        await store.aclose()
