"""Real ``codemode serve`` processes and the official MCP client talking to them.

The workspace used by these tests has one upstream server: the real
``@modelcontextprotocol/server-filesystem`` (installed by ``.ci/install-test-servers.sh``),
serving a small directory of notes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from serve_process import INITIALIZE as INITIALIZE
from serve_process import launch_serve

from .browser import browser  # noqa: F401 - the fixture of the web console's tests

REPO = Path(__file__).resolve().parents[2]
NODE_DIR = REPO / ".ci" / "node"
FS_SERVER = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist"
INSTALL_HINT = "run .ci/install-test-servers.sh to install the real test servers"
TOKEN = "test-token-0123456789"
"""A raw MCP ``initialize`` request, for tests that speak HTTP without a client."""
NOTES = {f"note{i}.txt": f"note number {i}\n" for i in range(6)} | {"todo.md": "- write tests\n"}


def serve_argv(base: Path | None, *extra: str) -> list[str]:
    where = ("--base", str(base)) if base is not None else ()
    return [sys.executable, "-m", "codemode", "serve", *where, *extra]


def make_workspace(root: Path) -> tuple[Path, Path]:
    """A workspace whose mcp.json names the filesystem server; returns (base, files dir)."""
    entry = FS_SERVER / "index.js"
    if not entry.exists():
        pytest.skip(f"{entry.relative_to(REPO)} is missing: {INSTALL_HINT}")
    files = root / "files"
    files.mkdir(parents=True)
    for name, text in NOTES.items():
        (files / name).write_text(text)
    base = root / "ws"
    base.mkdir()
    servers = {"mcpServers": {"fs": {"command": "node", "args": [str(entry), str(files)]}}}
    (base / "mcp.json").write_text(json.dumps(servers))
    return base, files.resolve()


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    return make_workspace(tmp_path)


@asynccontextmanager
async def stdio_client(
    base: Path, *extra: str, mode: Any = "auto", executor: str | None = "subprocess"
) -> AsyncIterator[Client]:
    chosen = ("--executor", executor) if executor is not None else ()
    params = StdioServerParameters(
        command=sys.executable,
        args=serve_argv(base, *chosen, *extra)[1:],
        env=dict(os.environ),
    )
    async with Client(params, mode=mode, read_timeout_seconds=60) as client:
        yield client


@asynccontextmanager
async def http_client(
    url: str,
    *,
    token: str | None = TOKEN,
    headers: dict[str, str] | None = None,
    mode: Any = "auto",
    local_address: str | None = None,
) -> AsyncIterator[Client]:
    """``local_address`` (e.g. ``127.0.0.2``): connect from it, as another client would."""
    sent = dict(headers or {})
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    timeout = httpx2.Timeout(30, read=60)
    transport = httpx2.AsyncHTTPTransport(local_address=local_address)
    async with (
        httpx2.AsyncClient(headers=sent, timeout=timeout, transport=transport) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@dataclass
class HttpServer:
    """One ``codemode serve --transport http`` process."""

    proc: subprocess.Popen[str]
    url: str
    lines: list[str] = field(default_factory=list)
    files: Path | None = None
    drain: threading.Thread | None = None

    @property
    def health_url(self) -> str:
        return self.url.removesuffix("/mcp") + "/healthz"

    def health(self) -> dict[str, Any]:
        response = httpx2.get(self.health_url, timeout=10)
        response.raise_for_status()
        data: dict[str, Any] = response.json()
        return data

    def ready(self) -> tuple[int, str]:
        """``/readyz``: its HTTP status and its ``status`` field."""
        response = httpx2.get(self.url.removesuffix("/mcp") + "/readyz", timeout=10)
        return response.status_code, str(response.json()["status"])

    def wait_health(self, key: str, value: Any, timeout: float = 15.0) -> None:
        """Poll /healthz until ``key`` has ``value`` (bounded)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.health().get(key) == value:
                return
            time.sleep(0.05)
        raise AssertionError(f"/healthz {key} never became {value!r}: {self.health()}")

    def stop(self, timeout: float = 75.0) -> int:
        # Generous: a graceful stop waits for running calls (up to the grace period) and
        # drains answers; on a loaded machine that alone can pass 20 s. The server's own
        # watchdog ends a stop that hangs (grace + 40 s) and prints where it hung.
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            raise AssertionError(f"codemode serve did not stop on SIGTERM{self._tail()}") from None
        if self.drain is not None:
            self.drain.join(timeout=10)
        if any("stopping took longer than" in line for line in self.lines):
            raise AssertionError(f"codemode serve's stop hung{self._tail()}")
        return code

    def _tail(self, most: int = 120) -> str:
        return ":\n" + "".join(self.lines[-most:]) if self.lines else ""


def start_http_server(
    base: Path | None,
    *extra: str,
    token: str | None = TOKEN,
    executor: str | None = "subprocess",
    env: dict[str, str] | None = None,
) -> HttpServer:
    env = {**os.environ, **(env or {})}
    env.pop("CODEMODE_TOKEN", None)
    if token is not None:
        env["CODEMODE_TOKEN"] = token
    chosen = ("--executor", executor) if executor is not None else ()
    argv = serve_argv(base, "--transport", "http", "--port", "0", *chosen, *extra)
    served = launch_serve(argv, env, timeout=60)
    return HttpServer(served.proc, served.url, served.lines, drain=served.drain)


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """A token-protected server shared by a test module."""
    base, files = make_workspace(tmp_path_factory.mktemp("http"))
    server = start_http_server(base)
    server.files = files
    try:
        yield server
    finally:
        server.stop()


# --------------------------------------------------------------------------- leftovers


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time) of a live process, from /proc (a zombie is not live)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[19])


def descendants(root: int) -> dict[int, int]:
    """Every live process below ``root``: pid -> start time (to tell a reused pid apart)."""
    parents: dict[int, tuple[int, int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = info
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, start) in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = start
                frontier.append(pid)
    return found


def still_alive(processes: dict[int, int]) -> list[int]:
    return [pid for pid, start in processes.items() if (s := _stat(pid)) and s[1] == start]


CGROUP_PARENTS = [Path("/sys/fs/cgroup", c, "codemode") for c in ("memory", "pids", "cpu")]


def worker_cgroups(processes: dict[int, int]) -> set[Path]:
    """The per-worker cgroup directories holding any of ``processes``."""
    found: set[Path] = set()
    for parent in CGROUP_PARENTS:
        for group in parent.glob("w-*") if parent.is_dir() else ():
            try:
                pids = {int(p) for p in (group / "cgroup.procs").read_text().split()}
            except OSError:
                continue
            if pids & processes.keys():
                found.add(group)
    return found


def sandbox_root() -> Iterator[Path]:
    """A temporary directory the sandbox's unprivileged uid can traverse (pytest's are
    private to their owner). Skips when the sandbox cannot start on this machine."""
    import shutil
    import tempfile

    from codemode.execution.sandbox import SandboxExecutor

    failed = [c for c in SandboxExecutor(pool_size=0).checks() if not c.ok and c.required]
    if failed:
        pytest.skip("; ".join(f"{c.name}: {c.detail}" for c in failed))
    root = Path(tempfile.mkdtemp(prefix="codemode-serve-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def open_root() -> Iterator[Path]:
    yield from sandbox_root()
