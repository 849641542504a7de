"""With more than 1,024 fds held by the host, runs still work, time out and settle.

``select()`` cannot watch an fd numbered 1,024 or more; a busy host (hundreds of
sessions, sockets, MCP servers) has those. Every pipe of these workers is numbered above.
"""

from __future__ import annotations

import asyncio
import os
import resource
import shutil
from collections.abc import Iterator

import pytest

from codemode import Session, SubprocessExecutor
from codemode.execution.sandbox import SandboxExecutor

pytestmark = pytest.mark.anyio


@pytest.fixture
def many_fds() -> Iterator[list[int]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4096 and (hard == resource.RLIM_INFINITY or hard >= 4096):
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        yield held
    finally:
        for fd in held:
            os.close(fd)


async def _exercise(s: Session) -> None:
    code = "import os\nos.write(1, b'fd-level')\nkept = 41\nkept + 1"
    r = await asyncio.wait_for(s.run(code), 60)
    assert r.value == 42 and r.stdout == "fd-level", r.to_text()
    r = await asyncio.wait_for(s.run("while True: pass", timeout=1), 60)
    assert r.timed_out and not r.state_lost, r.to_text()
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass"
    r = await asyncio.wait_for(s.run(code, timeout=1), 60)
    assert r.timed_out and r.state_lost, r.to_text()
    assert (await asyncio.wait_for(s.run("'fresh'"), 60)).value == "fresh"


async def test_subprocess_runs_work_and_time_out_above_fd_1024(many_fds: list[int]) -> None:
    assert max(many_fds) > 1024
    async with Session(SubprocessExecutor(pool_size=0, interrupt_grace=0.5)) as s:
        await _exercise(s)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")
async def test_sandboxed_runs_work_and_time_out_above_fd_1024(many_fds: list[int]) -> None:
    assert max(many_fds) > 1024
    async with Session(SandboxExecutor(pool_size=0, interrupt_grace=0.5)) as s:
        await _exercise(s)


def test_the_open_files_limit_is_raised_to_the_hard_limit_at_start() -> None:
    import subprocess
    import sys

    code = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))\n"
        "from codemode import SubprocessExecutor\n"
        "SubprocessExecutor()\n"
        "print(*resource.getrlimit(resource.RLIMIT_NOFILE))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    soft, hard = (int(x) for x in out.stdout.split())
    assert soft == hard, out.stderr


def test_doctor_reports_the_open_files_limit() -> None:
    from codemode.execution.doctor import diagnose

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lines = {p.name: p for p in diagnose(SandboxExecutor(pool_size=0))}
    line = lines["limit: host open files"]
    assert str(soft) in line.detail and line.active == (soft == hard or soft >= 1 << 16)
