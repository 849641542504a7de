"""Every entry point runs code in the sandbox unless the user explicitly asks otherwise.

Each test asks the code itself where it runs: its uid, and whether it can reach a server
the test listens with on the host's loopback. A plain subprocess (as root here) answers
``uid 0`` and ``reached``; the sandbox answers an unprivileged uid and ``blocked``.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from codemode import Session
from codemode.bench import cli as bench_cli
from codemode.bench import runner, tokens
from codemode.execution.bwrap import SANDBOX_UID

pytestmark = [pytest.mark.anyio, pytest.mark.security]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on the host's loopback; its port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                s.accept()[0].close()
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield s.getsockname()[1]
    stop.set()
    t.join(5)
    s.close()


def probe(port: int) -> str:
    return (
        "import os, socket, json\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "    net = 'reached'\n"
        "except OSError:\n"
        "    net = 'blocked'\n"
        "print('WHERE=' + json.dumps([os.getuid(), net]))"
    )


def assert_sandboxed(output: str) -> None:
    line = next((x for x in output.splitlines() if x.startswith("WHERE=")), None)
    assert line is not None, output
    uid, net = json.loads(line[len("WHERE=") :])
    assert net == "blocked", "the code reached the host's loopback: not sandboxed"
    if os.getuid() == 0:  # root drops to the sandbox's own unprivileged uid
        assert uid == SANDBOX_UID, f"the code ran as uid {uid}: not sandboxed"


def _base(tmp_path: Path) -> Path:
    base = tmp_path / "base"
    base.mkdir()
    return base


def _cli(*args: str, base: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CODEMODE_EXECUTOR"}
    env["CODEMODE_BASE"] = str(base)
    return subprocess.run(
        [sys.executable, "-m", "codemode", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_codemode_run_uses_the_sandbox_by_default(tmp_path: Path, listener: int) -> None:
    p = _cli("run", "-c", probe(listener), base=_base(tmp_path))
    assert p.returncode == 0, p.stderr
    assert_sandboxed(p.stdout)


def test_codemode_run_without_tools_uses_the_sandbox_by_default(
    tmp_path: Path, listener: int
) -> None:
    p = _cli("run", "--no-tools", "-c", probe(listener), base=_base(tmp_path))
    assert p.returncode == 0, p.stderr
    assert_sandboxed(p.stdout)


def test_codemode_run_reaches_the_host_only_when_asked_to(tmp_path: Path, listener: int) -> None:
    """The probe can tell: an explicit --executor subprocess does reach the listener."""
    args = ("run", "--no-tools", "--executor", "subprocess", "-c", probe(listener))
    p = _cli(*args, base=_base(tmp_path))
    assert p.returncode == 0, p.stderr
    assert '"reached"' in p.stdout


async def test_codemode_serve_uses_the_sandbox_by_default(tmp_path: Path, listener: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CODEMODE_EXECUTOR"}
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "codemode", "serve", "--base", str(_base(tmp_path))],
        env=env,
    )
    async with Client(params, read_timeout_seconds=60) as client:
        result = await client.call_tool("run_code", {"code": probe(listener)})
    text = "".join(getattr(c, "text", "") for c in result.content)
    assert_sandboxed(text)


async def test_a_session_with_no_executor_uses_the_sandbox(listener: int) -> None:
    async with Session() as s:
        r = await s.run(probe(listener))
    assert r.is_ok, r.to_text()
    assert_sandboxed(r.stdout)


async def test_a_session_from_a_base_uses_the_sandbox(
    tmp_path: Path, listener: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CODEMODE_EXECUTOR", raising=False)
    async with Session.from_base(_base(tmp_path)) as s:
        r = await s.run(probe(listener))
    assert r.is_ok, r.to_text()
    assert_sandboxed(r.stdout)


def test_the_token_benchmark_runs_codemode_serve_with_the_sandbox_by_default() -> None:
    option = next(p for p in bench_cli.tokens.params if p.name == "executor")
    assert option.default == "sandbox"
    assert "--executor" in (argv := tokens.serve_command(Path("/nonexistent")).args)
    assert argv[argv.index("--executor") + 1] == "sandbox"
    for fn in (runner.run_benchmark, runner.run_scenario, tokens.codemode_client):
        assert inspect.signature(fn).parameters["executor"].default == "sandbox", fn


def test_the_server_benchmark_uses_the_sandbox_by_default() -> None:
    path = REPO / "benchmarks" / "bench_server.py"
    spec = importlib.util.spec_from_file_location("bench_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    assert module.parse_args([]).executor == "sandbox"
