"""Workspaces with tools defined in YAML, opened as users open them."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor, Workspace


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def write_tools(base: Path, name: str, text: str) -> Path:
    folder = base / "tools"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@asynccontextmanager
async def open_session(base: Path) -> AsyncIterator[Session]:
    """A session on the workspace (the agent's code in a plain subprocess: the tools
    decide for themselves where they run)."""
    ws = Workspace.open(base)
    async with Session.for_workspace(ws, executor=SubprocessExecutor()) as s:
        yield s
    await ws.registry().aclose()


@pytest.fixture
def tools_dir(tmp_path: Path) -> Callable[[str, str], Path]:
    def make(name: str, text: str) -> Path:
        return write_tools(tmp_path, name, text)

    return make
