from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "storage"))

from redis_server import RedisServer

from codemode.storage import FileStorage, Storage
from codemode.storage.redis import RedisStorage


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


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


@pytest.fixture
def workspace() -> Iterator[str]:
    """A host directory the sandbox uid can reach (pytest's tmp_path is mode 700)."""
    path = tempfile.mkdtemp(prefix="cm-ckpt-ws-", dir="/var/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)
