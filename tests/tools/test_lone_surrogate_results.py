"""A tool result holding a lone surrogate (``"\\ud800"`` escaped in a server's JSON, a Python
tool's ``surrogateescape``d name) has no UTF-8 form. It reaches the code with each one as
U+FFFD and a warning naming the tool; the whole answer was lost (a parse error, then a
HostError or a hang until the call's timeout)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.config import parse_servers
from codemode.tools.registry import ToolRegistry
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.sources.python import PythonSource

pytestmark = pytest.mark.anyio

SERVERS = Path(__file__).resolve().parents[1] / "fixtures" / "servers"
HOSTILE = SERVERS / "hostile_server.py"
WARNING = "4 lone surrogate(s)"


def hostile(protocol: str) -> ToolRegistry:
    raw = {"command": sys.executable, "args": [str(HOSTILE)], "protocol": protocol}
    config = parse_servers({"mcpServers": {"hostile": raw}}, source="test", env={})["hostile"]
    return ToolRegistry([MCPSource("hostile", config)])


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
async def test_an_upstream_result_with_lone_surrogates_reaches_the_code_replaced(
    protocol: str,
) -> None:
    registry = hostile(protocol)
    try:
        async with Session(SubprocessExecutor(), tools=registry) as s:
            r = await s.run("x = tools.hostile.lone_surrogate()\nx")
            again = await s.run("tools.hostile.redos_in(s='a')")  # the connection lives on
    finally:
        await registry.aclose()
    assert r.error is None, r.to_text()
    assert r.value == {
        "name": "caf\ufffd \U0001f600",  # a valid pair stays what it is
        "mail": "ada@example.com",
        "keys": {"k\ufffd": ["\ufffd"]},
    }
    assert [w for w in r.warnings if w.startswith("hostile.lone_surrogate: ")], r.warnings
    assert any(WARNING in w for w in r.warnings), r.warnings
    assert again.value == "ok" and not again.warnings, again.to_text()


async def test_a_python_tool_returning_a_lone_surrogate_reaches_the_code_replaced() -> None:
    def listing() -> dict[str, list[str]]:
        """File names, one of them not UTF-8 (read with ``surrogateescape``)."""
        return {"names": ["ok.txt", b"caf\xe9.txt".decode("utf-8", "surrogateescape")]}

    source = PythonSource("files")
    source.add(listing)
    registry = ToolRegistry([source])
    async with Session(SubprocessExecutor(), tools=registry) as s:
        r = await s.run("tools.files.listing()['names']")
    assert r.value == ["ok.txt", "caf\ufffd.txt"], r.to_text()
    assert r.warnings == (
        "files.listing: its result held 1 lone surrogate(s) (\\ud800-\\udfff, which no UTF-8 "
        "text can carry); each is shown as U+FFFD",
    )


def _listening(proc: subprocess.Popen[bytes]) -> int:
    """The port the server printed once it listens (it binds port 0: any free one)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"the server exited with {proc.wait(timeout=10)} before listening")
    return int(line)


@pytest.fixture(params=["json", "events", "legacy"])
def surrogate_server(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A real HTTP server answering lone surrogates: streamable HTTP with a JSON body, with
    an event stream (in 7-byte pieces), and the legacy SSE transport."""
    mode = request.param
    script = str(SERVERS / "surrogate_http_server.py")
    proc = subprocess.Popen([sys.executable, script, mode], stdout=subprocess.PIPE)
    try:
        port = _listening(proc)
        if mode == "legacy":
            yield {"type": "sse", "url": f"http://127.0.0.1:{port}/sse"}
        else:
            yield {"url": f"http://127.0.0.1:{port}/mcp", "protocol": "legacy"}
    finally:
        proc.kill()  # (a graceful stop waits for the legacy transport's open stream)
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()


async def test_an_http_upstream_result_with_lone_surrogates_reaches_the_code_replaced(
    surrogate_server: dict[str, str],
) -> None:
    """Over HTTP the SDK parses the answer's bytes itself (it refused the whole answer):
    they are repaired before, as the stdio reader repairs a line."""
    config = parse_servers({"mcpServers": {"up": surrogate_server}}, source="test", env={})["up"]
    registry = ToolRegistry([MCPSource("up", config)])
    try:
        async with Session(SubprocessExecutor(), tools=registry) as s:
            r = await s.run("x = tools.up.lone_surrogate()\nx")
            again = await s.run("tools.up.plain()")  # the connection lives on
    finally:
        await registry.aclose()
    assert r.error is None, r.to_text()
    assert r.value == {
        "name": "caf\ufffd \U0001f600",  # a valid pair stays what it is
        "mail": "ada@example.com",
        "keys": {"k\ufffd": ["\ufffd"]},
    }
    assert any(w.startswith("up.lone_surrogate: ") and WARNING in w for w in r.warnings), r
    assert again.value == "ok" and not again.warnings, again.to_text()
