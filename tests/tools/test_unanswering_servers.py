"""A server that does not answer: connected concurrently, each within its own deadline,
shown on a terminal while waiting, and named (with its redacted stderr) in what the user
and the model read."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from procs import processes_with

from codemode.execution import executor_by_name
from codemode.session import Session
from codemode.workspace import Workspace

EDGE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"

pytestmark = pytest.mark.anyio

HANG = (
    "import sys, time\n"
    "print('loading plugins', file=sys.stderr)\n"
    "print('starting with API_KEY=' + sys.argv[1], file=sys.stderr, flush=True)\n"
    "time.sleep(120)\n"
)
SECRET = "sk-live-0123456789abcdefXYZ"


def workspace(tmp_path: Path, *, working: bool = True, hung: int = 1) -> Path:
    base = tmp_path / "ws"
    base.mkdir()
    servers: dict[str, object] = {}
    if working:
        servers["edge"] = {"command": sys.executable, "args": [str(EDGE_SERVER)]}
    for i in range(hung):
        name = "hung" if i == 0 else f"hung{i + 1}"
        servers[name] = {
            "command": sys.executable,
            "args": ["-c", HANG, "${HUNG_KEY}"],
            "connect_timeout": 2,  # its own deadline; the edge server keeps the default
        }
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    return base


def codemode(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HUNG_KEY": SECRET}
    return subprocess.run(
        [sys.executable, "-m", "codemode", *args],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


EXPECTED = (
    "warning: server 'hung' did not answer within 2 s "
    "(last stderr: loading plugins | starting with API_KEY=[redacted])"
)


def test_tools_servers_names_the_server_that_did_not_answer_and_hides_its_secret(
    tmp_path: Path,
) -> None:
    done = codemode("tools", "servers", "--base", str(workspace(tmp_path)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["edge: 12 tools, ok", "hung: ? tools, failed"]
    assert done.stderr.splitlines() == [EXPECTED]
    assert SECRET not in done.stderr


def test_tools_servers_exits_1_when_no_server_answers(tmp_path: Path) -> None:
    done = codemode("tools", "servers", "--base", str(workspace(tmp_path, working=False)))
    assert done.returncode == 1
    assert done.stdout.splitlines() == ["hung: ? tools, failed"]
    assert done.stderr.splitlines() == [EXPECTED, "Error: no server could be listed"]


def test_a_terminal_shows_which_servers_are_still_connecting(tmp_path: Path) -> None:
    base = workspace(tmp_path)
    argv = [sys.executable, "-m", "codemode", "tools", "servers", "--base", str(base)]
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.environ["HUNG_KEY"] = SECRET
        os.execv(sys.executable, argv)
    screen = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = screen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "\r\x1b[Kconnecting: " in text and "hung waiting" in text
    assert "\r\x1b[Kwarning: server 'hung' did not answer within 2 s" in text
    assert text.rstrip().endswith("hung: ? tools, failed")


async def test_servers_are_connected_concurrently_each_within_its_own_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUNG_KEY", SECRET)
    registry = Workspace.open(workspace(tmp_path, working=True, hung=3)).registry()
    events: list[tuple[str, str]] = []
    registry.progress = lambda server, event: events.append((server, event))
    try:
        problems = await registry.connect_all()
    finally:
        await registry.aclose()
    connecting = [i for i, (_, e) in enumerate(events) if e == "connecting"]
    finished = [i for i, (_, e) in enumerate(events) if e != "connecting"]
    assert len(connecting) == 4 and max(connecting) < min(finished)  # all started at once
    assert sorted(problems) == [
        f"server {name!r} did not answer within 2 s "
        "(last stderr: loading plugins | starting with API_KEY=[redacted])"
        for name in ("hung", "hung2", "hung3")
    ]


async def test_a_failed_server_is_not_retried_by_every_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HUNG_KEY", SECRET)
    registry = Workspace.open(workspace(tmp_path)).registry()
    events: list[tuple[str, str]] = []
    try:
        await registry.search("echo")
        registry.progress = lambda server, event: events.append((server, event))
        rows = await registry.search("echo")
    finally:
        await registry.aclose()
    assert rows and rows[0]["name"] == "edge.echo"
    assert events == []  # the second search waited for nobody
    assert registry.problems()[0].startswith("server 'hung' did not answer within 2 s")


async def test_a_session_closed_after_an_interrupted_call_to_a_hung_server_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    """Closing waits until the cancelled call has stopped the server it was starting: a
    program that exits right after (codemode run on Ctrl-C) has nothing left to cut short."""
    marker = f"codemode-hung-{uuid.uuid4().hex}"
    base = tmp_path / "ws"
    base.mkdir()
    hang = ["-c", "import time; time.sleep(120)", marker]
    servers = {"hung": {"command": sys.executable, "args": hang, "connect_timeout": 120}}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    ws = Workspace.open(base)
    try:
        async with Session.for_workspace(
            ws, executor=executor_by_name("subprocess", workspace=ws)
        ) as s:
            run = asyncio.create_task(s.run("tools.hung.anything()", 3600))
            deadline = time.monotonic() + 60
            while not processes_with(marker):
                assert time.monotonic() < deadline and not run.done(), "the server never started"
                await asyncio.sleep(0.05)
            assert s.interrupt(kill_stuck=False)
            result = await asyncio.wait_for(run, 60)
            assert result.error is not None and result.error.type == "KeyboardInterrupt"
        mine = asyncio.current_task()
        left = [t for t in asyncio.all_tasks() if not t.done() and t is not mine]
        assert not [t for t in left if "mcp" in repr(t) or "_serve_call" in repr(t)], left
        deadline = time.monotonic() + 30
        while processes_with(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not processes_with(marker), "the hung server outlived its session"
    finally:
        await ws.registry().aclose()


async def test_an_in_process_session_closed_during_a_call_to_a_hung_server_stops_the_server(
    tmp_path: Path,
) -> None:
    """The in-process worker tracks its calls as the subprocess one does: closing cancels
    the call that is starting a server and waits until that server has been stopped."""
    marker = f"codemode-hung-{uuid.uuid4().hex}"
    base = tmp_path / "ws"
    base.mkdir()
    hang = ["-c", "import time; time.sleep(120)", marker]
    servers = {"hung": {"command": sys.executable, "args": hang, "connect_timeout": 120}}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    ws = Workspace.open(base)
    try:
        async with Session.for_workspace(ws, executor=executor_by_name("inprocess")) as s:
            run = asyncio.create_task(s.run("tools.hung.anything()", 3600))
            deadline = time.monotonic() + 60
            while not processes_with(marker):
                assert time.monotonic() < deadline and not run.done(), "the server never started"
                await asyncio.sleep(0.05)
        mine = asyncio.current_task()
        left = [t for t in asyncio.all_tasks() if not t.done() and t is not mine and t is not run]
        assert not [t for t in left if "mcp" in repr(t) or "LoopLink" in repr(t)], left
        deadline = time.monotonic() + 30
        while processes_with(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not processes_with(marker), "the hung server outlived its session"
        run.cancel()
        await asyncio.gather(run, return_exceptions=True)
    finally:
        await ws.registry().aclose()
