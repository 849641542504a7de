"""Shared fixtures: every test runs on asyncio through anyio's pytest plugin."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
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
