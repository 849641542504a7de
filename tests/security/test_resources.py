"""Memory, disk, output and descriptor floods hit the session's limits, not the host's."""

from __future__ import annotations

import os
import shutil

import pytest

from codemode.execution.limits import detect_cgroups

from .conftest import SUITE_LIMITS, Arena, blocked

pytestmark = [pytest.mark.anyio, pytest.mark.security]


async def test_one_huge_allocation_fails_with_memory_error(arena: Arena) -> None:
    r = await arena.attack("x = bytearray(8 * 2**30)")
    assert r.error is not None and r.error.type == "MemoryError"
    assert (await arena.attacker.run("'alive'")).value == "alive"


async def test_a_growing_memory_bomb_is_stopped(arena: Arena) -> None:
    code = "hog = []\nwhile True:\n    hog.append(bytearray(16 * 2**20))"
    r = await arena.attack(code, timeout=10)
    assert r.error is not None and (r.error.type == "MemoryError" or r.state_lost)
    await arena.attacker.run("hog = None")


@pytest.mark.skipif(
    not detect_cgroups().has("memory"), reason="needs a memory cgroup (rlimits are per process)"
)
async def test_memory_spread_over_processes_is_capped_for_the_whole_session(arena: Arena) -> None:
    # each child stays under RLIMIT_AS; together they exceed the session's cgroup limit
    per_child = SUITE_LIMITS.memory_mb // 2 * 2**20  # type: ignore[operator]
    code = (
        "import time\n"
        "kids = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        f"        b = bytearray({per_child})\n"
        "        b[::4096] = b'x' * len(b[::4096])\n"
        "        time.sleep(1)\n"
        "        os._exit(0)\n"
        "    kids.append(pid)\n"
        "[os.waitpid(p, 0)[1] for p in kids]"
    )
    r = await arena.attack(code, timeout=15)
    # the OOM killer ends some of them (SIGKILL), or it ends the worker itself
    assert r.state_lost or 9 in r.value, r.to_text()
    assert (await arena.attacker.run("'alive'", timeout=10)).value == "alive"


async def test_filling_the_disk_through_the_workspace_stops_at_the_file_size_limit(
    arena: Arena,
) -> None:
    code = (
        "def fill():\n"
        "    with open('big.bin', 'wb') as fh:\n"
        "        while True:\n"
        "            fh.write(b'\\0' * 2**20)\n"
        "attempt(fill)"
    )
    assert blocked(await arena.value(code, timeout=20))
    size = os.path.getsize(os.path.join(arena.host.attacker_ws, "big.bin"))
    assert size <= SUITE_LIMITS.file_size_mb * 2**20  # type: ignore[operator]


async def test_filling_tmp_stops_at_its_size_and_costs_the_host_nothing(arena: Arena) -> None:
    free_before = shutil.disk_usage("/tmp").free
    code = (
        "def fill():\n"
        "    for i in range(10_000):\n"
        "        with open(f'/tmp/f{i}', 'wb') as fh:\n"
        "            fh.write(b'\\0' * 2**20)\n"
        "attempt(fill)"
    )
    v = await arena.value(code, timeout=20)
    assert blocked(v)
    assert shutil.disk_usage("/tmp").free > free_before - 16 * 2**20


async def test_printing_a_gigabyte_is_truncated_and_bounded(arena: Arena) -> None:
    code = "chunk = 'x' * 2**20\nfor _ in range(1024):\n    print(chunk)"
    r = await arena.attack(code, timeout=30)
    assert r.stdout_truncated or r.timed_out
    assert len(r.stdout) < 2 * 2**20


async def test_writing_a_gigabyte_to_fd_1_is_truncated_and_bounded(arena: Arena) -> None:
    code = "chunk = b'y' * 2**20\nfor _ in range(1024):\n    os.write(1, chunk)"
    r = await arena.attack(code, timeout=30)
    assert len(r.stdout) < 2 * 2**20
    assert (await arena.attacker.run("'alive'")).value == "alive"


async def test_exhausting_file_descriptors_hits_the_limit(arena: Arena) -> None:
    code = (
        "held = []\n"
        "def grab():\n"
        "    while True:\n"
        "        held.append(open('/dev/null'))\n"
        "outcome = attempt(grab)\n"
        "count = len(held)\n"
        "for f in held: f.close()\n"
        "held = None\n"
        "[outcome, count]"
    )
    v = await arena.value(code)
    assert v[0] == "blocked:OSError"
    assert v[1] < SUITE_LIMITS.open_files
    assert (await arena.attacker.run("'alive'")).value == "alive"
