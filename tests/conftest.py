"""Shared fixtures: every test runs on asyncio through anyio's pytest plugin."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from codemode import Session, SubprocessExecutor

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "support"))  # helpers shared by test folders
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


NOTES_SERVER = REPO / "tests" / "fixtures" / "servers" / "notes_server.py"


class NotesWorkspace:
    """A workspace whose only upstream server is the real ``notes_server.py`` (tools that
    declare MCP annotations), which logs every call it receives to ``calls_file``."""

    def __init__(self, root: Path) -> None:
        import sys

        self.base = root / "ws"
        self.base.mkdir(parents=True)
        # Not created here: the server creates it, so it is the server's own file even when
        # the server runs in its jail as another uid (codemode.isolation.servers).
        self.calls_file = root / "calls.jsonl"
        self._python = sys.executable
        self.configure({})

    def configure(self, config: dict[str, object], *, trusted: bool = True) -> NotesWorkspace:
        """Write ``config.json`` and ``mcp.json`` (the notes server, trusted or not)."""
        import json

        entry = {
            "command": self._python,
            "args": [str(NOTES_SERVER), str(self.calls_file)],
            "trusted": trusted,
        }
        (self.base / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": entry}}))
        (self.base / "config.json").write_text(json.dumps(config))
        return self

    def calls(self) -> list[str]:
        """The tools the notes server was called with, in order."""
        import json

        if not self.calls_file.exists():
            return []
        lines = self.calls_file.read_text().splitlines()
        return [json.loads(line)["tool"] for line in lines if line.strip()]


@pytest.fixture
def notes_ws(tmp_path: Path) -> NotesWorkspace:
    return NotesWorkspace(tmp_path)


@asynccontextmanager
async def notes_session(ws: NotesWorkspace, **kwargs: object) -> AsyncIterator[Session]:
    """A session on the notes workspace (subprocess worker); closes its upstream server."""
    from codemode.workspace import Workspace

    workspace = Workspace.open(ws.base)
    kwargs.setdefault("executor", SubprocessExecutor())
    try:
        async with Session.for_workspace(workspace, **kwargs) as s:  # type: ignore[arg-type]
            yield s
    finally:
        await workspace.registry().aclose()


@pytest.fixture
def open_notes() -> Any:
    """``async with open_notes(notes_ws, **session_kwargs) as session``."""
    return notes_session
