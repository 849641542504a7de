"""``codemode serve``'s sessions with ``checkpoint.auto``: an idle session evicted from
memory resumes with its variables when its client comes back under the same key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codemode import SubprocessExecutor, Workspace
from codemode.memory import Memory
from codemode.server.custom import server_context

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_an_evicted_served_session_resumes_under_its_key(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"checkpoint": {"auto": True}}))
    ws = Workspace.open(tmp_path)
    memory = Memory.for_workspace(ws)
    clock = Clock()
    ctx = server_context(
        ws,
        SubprocessExecutor(),
        memory=memory,
        run_timeout=60,
        idle_timeout=60,
        max_sessions=4,
        clock=clock,
    )
    manager = ctx.sessions
    try:
        async with manager.lease("client-a") as lease:
            await lease.session.run("import json\nnotes = ['kept']")
        async with manager.lease("client-b") as lease:
            await lease.session.run("notes = ['other client']")
        clock.now += 61
        assert await manager.sweep() == 2  # both evicted: their interpreters are gone
        async with manager.lease("client-a") as again:
            r = await again.session.run("json.dumps(notes)")
        assert again.new and again.notice is not None and "come back" in again.notice
        assert r.value == '["kept"]'
        assert any("resumed" in w for w in r.warnings)
    finally:
        await manager.aclose()
        await memory.aclose()
