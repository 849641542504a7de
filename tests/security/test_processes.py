"""Runaway, stubborn and escaping processes are stopped, and nothing outlives the session."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time

import pytest

from .conftest import SUITE_LIMITS, Arena

pytestmark = [pytest.mark.anyio, pytest.mark.security]


async def _stops_growing(path: str, within: float = 3.0) -> bool:
    """True once ``path`` has not grown for 0.3 s (every wait bounded)."""
    deadline = time.monotonic() + within
    last = -1
    while time.monotonic() < deadline:
        size = os.path.getsize(path) if os.path.exists(path) else 0
        if size == last:
            return True
        last = size
        await asyncio.sleep(0.3)
    return False


async def _is_growing(path: str, within: float = 30.0) -> bool:
    """True once ``path`` exists and grew between two looks 0.3 s apart (bounded): a
    process that starts slowly on a loaded machine is not mistaken for one that stopped."""
    deadline = time.monotonic() + within
    last: int | None = None
    while time.monotonic() < deadline:
        size = os.path.getsize(path) if os.path.exists(path) else None
        if size is not None and last is not None and size > last:
            return True
        last = size
        await asyncio.sleep(0.3)
    return False


async def test_forking_stops_at_the_process_limit(arena: Arena) -> None:
    code = (
        "import time\nn = 0\n"
        "while True:\n"
        "    try:\n        pid = os.fork()\n"
        "    except OSError as e:\n        limit = [n, e.errno]\n        break\n"
        "    if pid == 0:\n        time.sleep(60)\n        os._exit(0)\n"
        "    n += 1\n"
        "limit"
    )
    forked, err = await arena.value(code, timeout=30)  # type: ignore[misc]
    assert err == 11  # EAGAIN: the session's pids limit, not the host's
    assert 0 < forked < SUITE_LIMITS.max_pids  # type: ignore[operator]
    assert (await arena.attacker.run("1 + 1", timeout=10)).value == 2


async def test_a_fork_bomb_is_capped_and_cleared(arena: Arena) -> None:
    code = "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    r = await arena.attack(code, timeout=2)
    assert r.timed_out or r.error is not None
    r = await arena.attacker.run("1 + 1", timeout=10)
    assert r.value == 2 or r.state_lost
    # the arena then checks the host can still start processes and the cgroups are gone


async def test_a_cpu_spin_is_stopped_at_the_timeout(arena: Arena) -> None:
    r = await arena.attack("while True: pass", timeout=1)
    assert r.timed_out and r.duration_ms < 4000
    assert (await arena.attacker.run("'alive'")).value == "alive"


async def test_a_spin_inside_c_code_is_killed(arena: Arena) -> None:
    r = await arena.attack("import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", timeout=1)
    assert r.timed_out and r.state_lost and r.duration_ms < 5000


async def test_code_ignoring_sigint_and_sigterm_is_killed(arena: Arena) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "while True:\n    time.sleep(0.01)"
    )
    r = await arena.attack(code, timeout=1)
    assert r.timed_out and r.state_lost and r.duration_ms < 5000
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


async def test_threads_that_outlive_a_run_die_with_the_session(arena: Arena) -> None:
    code = (
        "import threading, time\n"
        "def scribble():\n"
        "    with open('thread.log', 'a') as fh:\n"
        "        while True:\n"
        "            fh.write('x'); fh.flush(); time.sleep(0.01)\n"
        "threading.Thread(target=scribble, daemon=False).start()\n"
    )
    assert (await arena.attack(code)).error is None
    log = os.path.join(arena.host.attacker_ws, "thread.log")
    assert await _is_growing(log), "the thread never ran"
    await arena.attacker.close()
    assert await _stops_growing(log)


async def test_double_forked_daemons_die_with_the_session(arena: Arena) -> None:
    code = (
        "import time\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        "        with open('daemon.log', 'a') as fh:\n"
        "            while True:\n"
        "                fh.write('x'); fh.flush(); time.sleep(0.01)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
        "os.path.getsize('daemon.log') > 0"
    )
    assert await arena.value(code) is True
    log = os.path.join(arena.host.attacker_ws, "daemon.log")
    assert await _is_growing(log), "the daemon never ran"
    await arena.attacker.close()
    assert await _stops_growing(log)


async def test_a_background_process_started_with_subprocess_dies_with_the_session(
    arena: Arena,
) -> None:
    code = (
        "import subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', "
        '\'import time\\nwhile True:\\n    open("sub.log", "a").write("x"); time.sleep(0.01)\'],'
        " start_new_session=True)\n"
        "p.pid > 0"
    )
    assert await arena.value(code) is True
    log = os.path.join(arena.host.attacker_ws, "sub.log")
    assert await _is_growing(log), "the background process never ran"
    await arena.attacker.close()
    assert await _stops_growing(log)


async def test_killing_the_parent_only_reaches_the_sandboxs_own_init(arena: Arena) -> None:
    await arena.value("kept = 'state'")
    r = await arena.attack("os.kill(os.getppid(), 9)\nos.getppid()")
    # the parent is pid 1 of the sandbox's own pid namespace, which ignores the signal
    assert r.error is None and r.value == 1, r.to_text()
    assert (await arena.attacker.run("kept")).value == "state"


async def test_killing_every_process_it_can_only_kills_the_sandbox(
    arena: Arena, victim: subprocess.Popen[bytes]
) -> None:
    r = await arena.attack("os.kill(-1, 9)")
    # inside its pid namespace nothing else is signalable (ESRCH), or it kills itself
    assert r.state_lost or (r.error is not None and r.error.type == "ProcessLookupError")
    assert victim.poll() is None, "a host process of the sandbox's uid was killed"
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


async def test_signalling_a_host_process_of_the_same_uid_fails(
    arena: Arena, victim: subprocess.Popen[bytes]
) -> None:
    code = f"[attempt(os.kill, {victim.pid}, 9), attempt(os.kill, {os.getpid()}, 0)]"
    outcomes = await arena.value(code)
    assert outcomes == ["blocked:ProcessLookupError"] * 2  # those pids do not exist inside
    assert victim.poll() is None


async def test_a_ctypes_segfault_only_crashes_the_attackers_worker(arena: Arena) -> None:
    r = await arena.attack("ctypes.string_at(0)")
    assert r.error is not None and r.error.type == "WorkerCrashed" and r.state_lost
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


async def test_deep_recursion_is_contained(arena: Arena) -> None:
    # through a C function each level uses C stack: this ends in a stack overflow
    code = "sys.setrecursionlimit(10**8)\ndef f(n):\n    return list(map(f, [n + 1]))\nf(0)"
    r = await arena.attack(code, timeout=10)
    assert r.error is not None
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


async def test_a_forged_oversized_frame_only_ends_the_attackers_worker(arena: Arena) -> None:
    code = (
        "from codemode_worker import bridge\nos.write(bridge._link.fd_out, b'\\xff\\xff\\xff\\xff')"
    )
    r = await arena.attack(code)
    assert r.state_lost and r.error is not None
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


async def test_a_forged_garbage_frame_only_ends_the_attackers_worker(arena: Arena) -> None:
    code = (
        "from codemode_worker import bridge\n"
        "os.write(bridge._link.fd_out, b'\\x00\\x00\\x00\\x05{{{{{')\n"
        "import time; time.sleep(2)"
    )
    r = await arena.attack(code)
    assert r.state_lost and r.error is not None
    assert (await arena.attacker.run("'fresh'")).value == "fresh"


@pytest.mark.parametrize(
    "body",
    [
        "b'[' * 200000 + b']' * 200000",  # nesting deep enough to overflow a JSON decoder
        "b'[1, 2, 3]'",  # valid JSON, but not a message
        'b\'{"op": "done", "id": "not-a-number"}\'',  # a message with a forged id
    ],
)
async def test_a_forged_frame_of_any_shape_only_ends_the_attackers_worker(
    arena: Arena, body: str
) -> None:
    code = (
        "import struct\nfrom codemode_worker import bridge\n"
        f"body = {body}\n"
        "os.write(bridge._link.fd_out, struct.pack('>I', len(body)) + body)\n"
        "import time; time.sleep(2)"
    )
    r = await arena.attack(code)
    assert r.state_lost and r.error is not None
    assert "malformed" in r.error.message
    assert (await arena.attacker.run("'fresh'")).value == "fresh"
