"""Real MCP servers for the tools tests.

The npm and PyPI servers are installed by ``.ci/install-test-servers.sh`` (CI runs it);
tests that need one skip with that instruction only when it has not been run. The edge
server (``tests/fixtures/servers/edge_server.py``) runs from this repository's venv.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.config import ServerConfig, parse_servers
from codemode.tools.sources.mcp import MCPSource

REPO = Path(__file__).resolve().parents[2]
CI = REPO / ".ci"
NODE_PKGS = CI / "node" / "node_modules" / "@modelcontextprotocol"
VENVS = CI / "venvs"
EDGE_SERVER = REPO / "tests" / "fixtures" / "servers" / "edge_server.py"
INSTALL_HINT = "run .ci/install-test-servers.sh to install the real test servers"


def _need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path.relative_to(REPO)} is missing: {INSTALL_HINT}")
    return path


def node_server(package: str) -> Path:
    """Entry point of an installed npm server, e.g. ``server-memory``."""
    return _need(NODE_PKGS / package / "dist" / "index.js")


def venv_python(name: str) -> Path:
    """Python of the dedicated venv of a PyPI server, e.g. ``mcp-server-time``."""
    return _need(VENVS / name / "bin" / "python")


def server_config(
    name: str, raw: dict[str, Any], env: dict[str, str] | None = None
) -> ServerConfig:
    """Build a config through the same parser users' mcp.json goes through."""
    return parse_servers({"mcpServers": {name: raw}}, source="test", env=env or {})[name]


# ---------------------------------------------------------------------------- configs

ConfigFactory = Callable[..., ServerConfig]


@pytest.fixture
def make_config() -> ConfigFactory:
    """``make_config(name, raw, env=None)``: a ServerConfig parsed like a user's mcp.json."""
    return server_config


@pytest.fixture
def unused_port() -> int:
    return free_port()


@pytest.fixture
def edge_raw() -> dict[str, Any]:
    return {"command": sys.executable, "args": [str(EDGE_SERVER)]}


@pytest.fixture
def edge_config(edge_raw: dict[str, Any]) -> ServerConfig:
    return server_config("edge", edge_raw)


@pytest.fixture
def unjailed_edge_config(edge_raw: dict[str, Any]) -> ServerConfig:
    """For tests that signal the server by the pid it reports: a jail's pid namespace
    would hide its host pid (the jail itself is tested in tests/security)."""
    return server_config("edge", {**edge_raw, "isolation": "none"})


@pytest.fixture
def fs_root(tmp_path: Path) -> Path:
    root = tmp_path / "files"
    root.mkdir()
    (root / "hello.txt").write_text("hello from codemode\n")
    return root.resolve()


@pytest.fixture
def filesystem_config(fs_root: Path) -> ServerConfig:
    entry = node_server("server-filesystem")
    return server_config("filesystem", {"command": "node", "args": [str(entry), str(fs_root)]})


@pytest.fixture
def memory_config(tmp_path: Path) -> ServerConfig:
    entry = node_server("server-memory")
    return server_config(
        "memory",
        {
            "command": "node",
            "args": [str(entry)],
            "env": {"MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")},
        },
    )


@pytest.fixture
def everything_config() -> ServerConfig:
    entry = node_server("server-everything")
    return server_config("everything", {"command": "node", "args": [str(entry), "stdio"]})


@pytest.fixture
def time_config() -> ServerConfig:
    py = venv_python("mcp-server-time")
    return server_config(
        "time", {"command": str(py), "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    )


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True, timeout=30)
    (repo / "README.md").write_text("# test repo\n")
    subprocess.run([*git, "add", "README.md"], check=True, timeout=30)
    subprocess.run([*git, "commit", "-q", "-m", "first commit"], check=True, timeout=30)
    return repo


@pytest.fixture
def git_config(git_repo: Path) -> ServerConfig:
    py = venv_python("mcp-server-git")
    return server_config(
        "git", {"command": str(py), "args": ["-m", "mcp_server_git", "--repository", str(git_repo)]}
    )


# ---------------------------------------------------------------------------- HTTP edge server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_listening(port: int, proc: subprocess.Popen[bytes], deadline: float) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"edge server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"edge server did not listen on port {port} in time")


class EdgeProcess:
    """The edge server as a network server on 127.0.0.1 (``--http`` or ``--sse``)."""

    def __init__(self, flag: str, port: int | None = None) -> None:
        self.flag = flag
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        path = "/sse" if flag == "--sse" else "/mcp"
        self.url = f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> EdgeProcess:
        self.proc = subprocess.Popen(
            [sys.executable, str(EDGE_SERVER), self.flag, str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        _wait_listening(self.port, self.proc, time.monotonic() + 120)
        return self

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        self.proc = None


@pytest.fixture(scope="session")
def edge_http_url() -> Iterator[str]:
    """The edge server over streamable HTTP (one process for the test run)."""
    edge = EdgeProcess("--http").start()
    try:
        yield edge.url
    finally:
        edge.stop()


@pytest.fixture(scope="session")
def edge_sse_url() -> Iterator[str]:
    """The edge server over the legacy SSE transport (one process for the test run)."""
    edge = EdgeProcess("--sse").start()
    try:
        yield edge.url
    finally:
        edge.stop()


@pytest.fixture(scope="session")
def edge_json_url() -> Iterator[str]:
    """The edge server over streamable HTTP answering with JSON bodies, not event streams."""
    edge = EdgeProcess("--json-http").start()
    try:
        yield edge.url
    finally:
        edge.stop()


@pytest.fixture
def edge_http_process() -> Iterator[EdgeProcess]:
    """A private HTTP edge server this test may stop and restart."""
    edge = EdgeProcess("--http").start()
    try:
        yield edge
    finally:
        edge.stop()


@pytest.fixture
def edge_http_config(edge_http_url: str) -> ServerConfig:
    return server_config("edge_http", {"type": "http", "url": edge_http_url})


# ---------------------------------------------------------------------------- sources


@pytest.fixture
async def make_source() -> AsyncIterator[Callable[..., MCPSource]]:
    """Build MCPSources that are closed (children stopped) when the test ends."""
    made: list[MCPSource] = []

    def make(name: str, config: ServerConfig, **kw: Any) -> MCPSource:
        src = MCPSource(name, config, **kw)
        made.append(src)
        return src

    yield make
    for src in made:
        await src.aclose()
