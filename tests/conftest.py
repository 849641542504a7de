"""Shared fixtures: every test runs on asyncio through anyio's pytest plugin."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(REPO.parent / "shared" / "tiktoken"))


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def session() -> AsyncIterator[Session]:
    async with Session(SubprocessExecutor(memory_limit_mb=1024)) as s:
        yield s


async def _cancel_when_started(session: Session, code: str, marker: str, seen_at: str) -> None:
    """Run ``code`` with an hour's timeout; cancel the call once it runs: once it has
    created ``marker`` (seen by the host at ``seen_at``), first thing, or where the code
    says ``MARK``, or itself (the code then names the path ``MARKER``)."""
    mark = f"open({marker!r}, 'w').close()"
    if "MARKER" in code:
        code = code.replace("MARKER", repr(marker))
    else:
        code = code.replace("MARK", mark) if "MARK" in code else f"{mark}\n{code}"
    task = asyncio.create_task(session.run(code, 3600))
    deadline = time.monotonic() + 30
    while not os.path.exists(seen_at):
        assert time.monotonic() < deadline and not task.done(), "the run never started"
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


@pytest.fixture
def cancel_when_started() -> Callable[[Session, str, str, str], Awaitable[None]]:
    return _cancel_when_started


async def _process_gone(pid: int, within: float = 30.0) -> bool:
    """True once ``pid`` no longer exists (waits at most ``within`` seconds)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.fixture
def process_gone() -> Callable[[int], Awaitable[bool]]:
    return _process_gone
