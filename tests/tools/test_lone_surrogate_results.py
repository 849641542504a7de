"""A tool result holding a lone surrogate (``"\\ud800"`` escaped in a server's JSON, a Python
tool's ``surrogateescape``d name) has no UTF-8 form. It reaches the code with each one as
U+FFFD and a warning naming the tool; the whole answer was lost (a parse error, then a
HostError or a hang until the call's timeout)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor
from codemode.config import parse_servers
from codemode.tools.registry import ToolRegistry
from codemode.tools.sources.mcp import MCPSource
from codemode.tools.sources.python import PythonSource

pytestmark = pytest.mark.anyio

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"
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
