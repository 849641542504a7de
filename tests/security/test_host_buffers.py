"""What a worker makes the host hold or do is bounded: unread replies, output floods.

A worker that asks for data and never reads it is stopped once its queued replies pass
the cap; one that floods its output between runs is simply not read (it blocks on a full
pipe) instead of costing the host a core.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from .conftest import Arena
from .forge import FORGE

pytestmark = [pytest.mark.anyio, pytest.mark.security]


async def test_a_worker_that_never_reads_its_replies_is_stopped_at_the_cap(
    arena: Arena,
) -> None:
    blob = "x" * (16 << 20)

    async def big(params: dict[str, Any]) -> str:
        return blob

    arena.attacker.host.register("test.big", big)
    assert (await arena.attacker.run(FORGE)).error is None
    # 32 calls of 16 MB each, written straight to the pipe; their replies are never read
    code = (
        "for i in range(1, 33):\n"
        "    forge({'op': 'call', 'id': i, 'method': 'test.big', 'params': {}})\n"
        "time.sleep(20)"
    )
    r = await arena.attack(code, timeout=60)
    assert r.state_lost and r.error is not None, r.to_text()
    assert "did not read" in r.error.message, r.error.message
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


async def test_output_flooded_between_runs_is_not_read_until_the_next_run(
    arena: Arena,
) -> None:
    code = (
        "import threading\n"
        "written = [0]\n"
        "def flood():\n"
        "    chunk = b'x' * 65536\n"
        "    while True:\n"
        "        written[0] += os.write(1, chunk)\n"
        "threading.Thread(target=flood, daemon=True).start()"
    )
    r = await arena.attack(code)
    assert r.error is None, r.to_text()
    await asyncio.sleep(3)  # between runs: the host reads nothing, so the flood stalls
    r = await arena.attacker.run("written[0]")
    assert isinstance(r.value, int) and r.value < 16 << 20, f"{r.value} bytes were read"
    assert len(r.stdout) <= 1_000_100  # the run sees at most its own max_output of it


async def test_a_frame_left_half_sent_ends_its_worker_without_waiting_for_the_timeout(
    arena: Arena, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codemode.execution import pipes

    monkeypatch.setattr(pipes, "STALL", 2.0)
    assert (await arena.attacker.run(FORGE)).error is None
    # claim a 2 MB call, send 400 KB of it, and stop there (from a thread: the run's own
    # "done" then never arrives as a frame of its own)
    code = (
        "def half():\n"
        "    os.write(bridge._link.fd_out, struct.pack('>I', 2 << 20)\n"
        '             + b\'{"op":"call","id":1,"method":"m","params":{"a":"\'\n'
        "             + b'x' * 400_000)\n"
        "    time.sleep(3600)\n"
        "threading.Thread(target=half, daemon=True).start()\n"
        "time.sleep(1)"
    )
    r = await arena.attack(code, timeout=60)
    assert r.state_lost and not r.timed_out and r.error is not None, r.to_text()
    assert "part of a frame" in r.error.message, r.error.message
    assert (await arena.attacker.run("'fresh'")).value == "fresh"
