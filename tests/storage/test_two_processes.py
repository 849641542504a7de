"""Two processes writing skills, artifacts and state at once lose nothing."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from redis_server import RedisServer

from codemode.memory.artifacts import Artifacts
from codemode.memory.skills import Skills
from codemode.memory.state import State
from codemode.storage import Storage, open_storage

pytestmark = pytest.mark.anyio

SRC = str(Path(__file__).resolve().parents[2] / "src")
N = 20

WRITER = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {src!r})
    from codemode.memory.artifacts import Artifacts
    from codemode.memory.skills import Skills
    from codemode.memory.state import State
    from codemode.storage import open_storage

    async def main(me):
        store = open_storage({target!r}, prefix={prefix!r})
        skills, artifacts, state = Skills(store), Artifacts(store), State(store)
        for i in range({n}):
            await skills.create(f"p{{me}}_s{{i}}", f"def run():\\n    return {{i}}", f"skill {{i}}")
            await artifacts.save(f"p{{me}}_a{{i}}", {{"me": me, "i": i}})
            await skills.update("shared", code=f"def run():\\n    return ({{me}}, {{i}})")
            await state.set(f"p{{me}}_{{i}}", i)
        await store.aclose()

    asyncio.run(main(int(sys.argv[1])))
    """
)


async def run_two_writers(target: str, prefix: str, store: Storage) -> None:
    await Skills(store).create("shared", "def run():\n    return 0", "shared by both")
    code = WRITER.format(src=SRC, target=target, prefix=prefix, n=N)
    procs = [
        await asyncio.create_subprocess_exec(sys.executable, "-c", code, str(me)) for me in (1, 2)
    ]
    codes = await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), 120)
    assert codes == [0, 0]

    skills, artifacts, state = Skills(store), Artifacts(store), State(store)
    names = {r["name"] for r in await skills.list()}
    assert names == {"shared"} | {f"p{m}_s{i}" for m in (1, 2) for i in range(N)}
    assert len(await artifacts.list()) == 2 * N
    assert await artifacts.load("p2_a7") == {"me": 2, "i": 7}
    versions = [v["version"] for v in await skills.versions("shared")]
    assert versions == list(range(1, 2 * N + 2))  # every update kept, none lost
    assert len(await state.get()) == 2 * N


async def test_two_processes_on_file_storage_lose_nothing(tmp_path: Path) -> None:
    store = open_storage(str(tmp_path))
    await run_two_writers(str(tmp_path), "unused", store)


@pytest.mark.redis
async def test_two_processes_on_redis_lose_nothing(redis_server: RedisServer) -> None:
    prefix = f"two-{uuid.uuid4().hex[:6]}"
    store = open_storage(redis_server.url, prefix=prefix)
    try:
        await run_two_writers(redis_server.url, prefix, store)
    finally:
        await store.aclose()
