"""Graceful stop, and runs and sessions that end when their client goes away.

Everything here runs a real ``codemode serve`` process; clients are the official SDK,
in-process or in their own process when the test kills them.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from .conftest import (
    TOKEN,
    HttpServer,
    descendants,
    http_client,
    make_workspace,
    serve_argv,
    start_http_server,
    still_alive,
    worker_cgroups,
)
from .rawclient import RawClient
from .rawclient import text as raw_text
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

# A client in a process of its own: it connects, runs CODE, and waits forever (until
# the test kills it, which closes its connections without a DELETE).
CLIENT = textwrap.dedent(
    """
    import sys, anyio, httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main(url, code, token):
        headers = {"Authorization": "Bearer " + token}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                await client.list_tools()
                result = await client.call_tool("run_code", {"code": code})
                print(result.content[0].text, flush=True)
                await anyio.sleep_forever()

    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3])
    """
)


def client_process(url: str, code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CLIENT, url, code, TOKEN], stdout=subprocess.PIPE, text=True
    )


def end(client: subprocess.Popen[str]) -> None:
    client.kill()
    client.wait(timeout=10)
    if client.stdout is not None:
        client.stdout.close()


def wait_for(predicate: object, what: str, timeout: float = 30.0) -> float:
    """Poll ``predicate()`` until true (bounded); returns the seconds it took."""
    assert callable(predicate)
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.02)
    return time.monotonic() - start


async def run_codes(url: str, codes: list[str]) -> list[object]:
    """One client per code, all at once; each lists its tools first, as clients do."""
    results: list[object] = [None] * len(codes)

    async def one(i: int) -> None:
        async with http_client(url) as client:
            await client.list_tools()
            results[i] = await client.call_tool("run_code", {"code": codes[i]})

    async with anyio.create_task_group() as tg:
        for i in range(len(codes)):
            tg.start_soon(one, i)
    return results


# --------------------------------------------------------------------------- graceful stop


@dataclass
class Stopped:
    results: list[Any]
    status: int
    processes: dict[int, int]
    """The server's processes at the signal."""
    cgroups: set[Path]
    """The cgroups of its workers at the signal."""


async def sigterm_while_running(server: HttpServer, codes: list[str]) -> Stopped:
    """Start one client per code and SIGTERM the server once all of them run."""
    results: list[Any] = []
    async with anyio.create_task_group() as tg:

        async def clients() -> None:
            results.extend(await run_codes(server.url, codes))

        tg.start_soon(clients)
        await anyio.to_thread.run_sync(lambda: server.wait_health("calls", len(codes), 60))
        processes = descendants(server.proc.pid)
        cgroups = worker_cgroups(processes)
        server.proc.send_signal(signal.SIGTERM)
    status = await anyio.to_thread.run_sync(lambda: server.proc.wait(timeout=60))
    return Stopped(results, status, processes, cgroups)


async def test_sigterm_lets_ten_running_calls_finish_then_exits_0_leaving_nothing(
    open_root: Path,
) -> None:
    base, _ = make_workspace(open_root)
    server = start_http_server(base, "--max-sessions", "16", executor="sandbox")
    try:
        code = "import time\ntime.sleep(3)\n'finished'"
        stopped = await sigterm_while_running(server, [code] * 10)
    finally:
        server.stop()
    assert [text_of(r) for r in stopped.results] == ["finished"] * 10
    assert stopped.status == 0
    assert stopped.cgroups, "the sandbox put its workers in cgroups"
    assert still_alive(stopped.processes) == []
    assert [g for g in stopped.cgroups if g.exists()] == []


async def test_a_call_still_running_after_the_grace_is_cancelled_with_a_clear_error(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    server = start_http_server(base, "--shutdown-grace", "1")
    try:
        stopped = await sigterm_while_running(server, ["import time\ntime.sleep(120)"])
    finally:
        server.stop()
    (result,) = stopped.results
    assert result.is_error
    assert "shutting down" in text_of(result) and "1 s grace period" in text_of(result)
    assert stopped.status == 0
    assert still_alive(stopped.processes) == []


async def test_while_stopping_new_clients_are_refused_and_readiness_says_so(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    server = start_http_server(base, "--shutdown-grace", "30")
    try:
        async with anyio.create_task_group() as tg:

            async def long_call() -> None:
                await run_codes(server.url, ["import time\ntime.sleep(2)"])

            tg.start_soon(long_call)
            await anyio.to_thread.run_sync(lambda: server.wait_health("calls", 1, timeout=60))
            server.proc.send_signal(signal.SIGTERM)
            await anyio.to_thread.run_sync(lambda: server.wait_health("stopping", True))
            ready = await anyio.to_thread.run_sync(server.ready)
            with pytest.raises(Exception) as refused:
                async with http_client(server.url) as late:
                    await late.list_tools()
        code_at_exit = await anyio.to_thread.run_sync(lambda: server.proc.wait(timeout=60))
    finally:
        server.stop()
    assert ready == (503, "stopping")
    assert "shutting down" in repr(refused.value) or "503" in repr(refused.value)
    assert code_at_exit == 0


def test_sigterm_lets_a_running_stdio_call_finish_and_exits_0(
    workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = workspace
    marker = tmp_path / "started"
    code = f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(2)\n'finished'"
    reply, status, workers = _stdio_call_then_sigterm(base, marker, code)
    assert reply["result"]["isError"] is False
    assert reply["result"]["content"][0]["text"] == "finished"
    assert status == 0
    assert still_alive(workers) == []


def test_a_stdio_call_past_the_grace_is_cancelled_with_a_clear_error(
    workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = workspace
    marker = tmp_path / "started"
    code = f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)"
    reply, status, workers = _stdio_call_then_sigterm(base, marker, code, "--shutdown-grace", "1")
    assert reply["result"]["isError"] is True
    assert "shutting down" in reply["result"]["content"][0]["text"]
    assert status == 0
    assert still_alive(workers) == []


def _stdio_call_then_sigterm(
    base: Path, marker: Path, code: str, *extra: str
) -> tuple[dict[str, Any], int, dict[int, int]]:
    argv = serve_argv(base, "--executor", "subprocess", *extra)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t"}}
    run = {"name": "run_code", "arguments": {"code": code}}
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": run},
        ):
            proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        wait_for(marker.exists, "the run started", timeout=60)
        workers = descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        reply = json.loads(proc.stdout.readline())
        status = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        proc.stdin.close()
        proc.stdout.close()
    return reply, status, workers


# --------------------------------------------------------------------------- clients gone


async def test_the_run_of_a_killed_client_is_cancelled(
    workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = workspace
    server = start_http_server(base)
    marker = tmp_path / "started"
    code = f"import time\nopen({str(marker)!r}, 'w').close()\ntime.sleep(120)"
    client = client_process(server.url, code)
    try:
        wait_for(marker.exists, "the run started", timeout=60)
        assert server.health()["calls"] == 1
        client.kill()
        took = wait_for(lambda: server.health()["calls"] == 0, "the run was cancelled", 20)
        print(f"cancelled {took:.3f} s after the client was killed")
    finally:
        end(client)
        server.stop()


async def test_the_code_of_a_killed_client_stops_running(
    workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    base, _ = workspace
    server = start_http_server(base)
    started, stopped = tmp_path / "started", tmp_path / "stopped"
    # Ten minutes of sleep: only a stop (an interrupt, or the worker killed) ends it sooner.
    code = (
        f"import os, time\nopen({str(started)!r}, 'w').write(str(os.getpid()))\n"
        f"try:\n    time.sleep(600)\nfinally:\n    open({str(stopped)!r}, 'w').close()"
    )
    client = client_process(server.url, code)
    try:
        wait_for(lambda: started.exists() and started.read_text(), "the run started", 60)
        worker = {int(started.read_text()): _start_time(int(started.read_text()))}
        client.kill()
        wait_for(lambda: server.health()["calls"] == 0, "the run was cancelled", 60)
        wait_for(
            lambda: stopped.exists() or not still_alive(worker), "the cancelled code stopped", 60
        )
    finally:
        end(client)
        server.stop()


async def test_a_vanished_client_loses_its_session_after_the_reclaim_grace(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    server = start_http_server(base, "--reclaim-after", "1")
    client = client_process(server.url, "import os\nos.getpid()")
    try:
        assert client.stdout is not None
        worker = int(client.stdout.readline())
        assert server.health()["sessions"] == 1
        client.kill()  # no DELETE: its connections just close
        server.wait_health("sessions", 0, timeout=30)
        wait_for(lambda: not still_alive({worker: _start_time(worker)}), "worker stopped")
    finally:
        end(client)
        server.stop()


def _start_time(pid: int) -> int:
    from .conftest import _stat

    info = _stat(pid)
    return info[1] if info else -1


async def test_a_connected_client_keeps_its_session_past_the_reclaim_grace(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    server = start_http_server(base, "--reclaim-after", "0.5")
    try:
        async with http_client(server.url) as client:
            await client.call_tool("run_code", {"code": "kept = 'yes'"})
            await anyio.sleep(2)  # idle, its event stream open: it is still there
            result = await client.call_tool("run_code", {"code": "kept"})
    finally:
        server.stop()
    assert text_of(result) == "yes"


async def test_a_codemode_session_client_between_sparse_requests_keeps_its_session(
    workspace: tuple[Path, Path],
) -> None:
    base, _ = workspace
    server = start_http_server(base, "--reclaim-after", "0.5")
    headers = {"Codemode-Session": "sparse-agent"}
    try:
        async with http_client(server.url, headers=headers, mode="2026-07-28") as client:
            await client.call_tool("run_code", {"code": "kept = 'yes'"})
            await anyio.sleep(2)  # no connection at all meanwhile: the idle timeout applies
            result = await client.call_tool("run_code", {"code": "kept"})
    finally:
        server.stop()
    assert text_of(result) == "yes"


def test_a_client_without_an_event_stream_is_reclaimed_and_told_when_it_comes_back(
    workspace: tuple[Path, Path],
) -> None:
    """Requests alone do not keep a session attached: between them the client is gone."""
    base, _ = workspace
    server = start_http_server(base, "--reclaim-after", "0.5")
    try:
        with RawClient(server.url, token=TOKEN, era="handshake") as client:
            client.initialize()
            client.call("run_code", {"code": "kept = 'yes'"})
            server.wait_health("sessions", 0, timeout=30)
            result = client.call("run_code", {"code": "kept"})
            assert client.end() == 200
    finally:
        server.stop()
    assert result["isError"] and "NameError" in raw_text(result)
    assert "connection was gone for more than 0.5 s" in raw_text(result)


# A stop whose every step is bounded can still be held up by a thread stuck in a read
# or a library that ignores cancellation; the watchdog must end the process anyway.
_STUCK_STOP = """
import threading
import codemode.server.lifecycle as lifecycle

lifecycle.STOP_BUDGET = 0.5
stop = lifecycle.GracefulStop(0.0, watchdog=True)
stop.request()

def stuck_in_a_read() -> None:
    threading.Event().wait()

stuck_in_a_read()
"""


def test_a_stop_that_hangs_ends_the_process_with_status_1_and_says_where_it_hung() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _STUCK_STOP], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "stopping took longer than 0.5 s; exiting now" in done.stderr
    assert "stuck_in_a_read" in done.stderr  # the stack of the thread that held it up


def test_without_a_watchdog_a_stop_request_never_ends_the_process_by_itself() -> None:
    script = _STUCK_STOP.replace("watchdog=True", "watchdog=False").replace(
        "stuck_in_a_read()\n", "threading.Event().wait(2.0)\nprint('still here')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "still here" in done.stdout


# An upstream server that never answers the MCP handshake (it reads its stdin forever).
_NEVER_ANSWERS = "import sys\nfor _ in sys.stdin:\n    pass\n"


def test_sigterm_while_an_upstream_server_is_still_connecting_exits_0_leaving_nothing(
    tmp_path: Path,
) -> None:
    base = tmp_path / "ws"
    base.mkdir()
    slow = {"command": sys.executable, "args": ["-c", _NEVER_ANSWERS], "connect_timeout": 120}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"slow": slow}}))
    server = start_http_server(base)
    deadline = time.monotonic() + 60
    below = descendants(server.proc.pid)
    while not any(_runs(pid, _NEVER_ANSWERS) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.1)  # the server connects in the background: wait for its process
        below = descendants(server.proc.pid)
    assert any(_runs(pid, _NEVER_ANSWERS) for pid in below), "the upstream server never started"
    code = server.stop()  # raises if the stop hung (the server's watchdog fired)
    assert code == 0, "".join(server.lines)
    assert still_alive(below) == [], "an upstream server outlived codemode serve"


def _runs(pid: int, script: str) -> bool:
    try:
        return script.splitlines()[1] in Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return False
