"""``codemode serve`` with privacy on, an upstream server answering lone surrogates: the
replaced text is what privacy sees (the address in it becomes a token), what the code
gets, and the warning names the tool."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .conftest import stdio_client

HOSTILE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "hostile_server.py"


@pytest.mark.anyio
async def test_a_lone_surrogate_result_passes_privacy_replaced_and_warned(tmp_path: Path) -> None:
    servers = {"mcpServers": {"hostile": {"command": sys.executable, "args": [str(HOSTILE)]}}}
    (tmp_path / "mcp.json").write_text(json.dumps(servers))
    (tmp_path / "config.json").write_text(json.dumps({"privacy": {"enabled": True}}))
    code = "x = tools.hostile.lone_surrogate()\nprint(x['name'], x['mail'].startswith('[EMAIL'))"
    async with stdio_client(tmp_path) as client:
        result = await client.call_tool("run_code", {"code": code})
    data = result.structured_content
    assert not result.is_error and data is not None, result.content
    assert data["stdout"] == "caf\ufffd \U0001f600 True\n"
    assert any(
        w.startswith("hostile.lone_surrogate: its result held 4 lone surrogate(s)")
        for w in data["warnings"]
    ), data["warnings"]
    assert "ada@example.com" not in json.dumps(data)
