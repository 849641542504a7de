"""The model reads which upstream server did not answer, in the results it gets."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from .conftest import stdio_client
from .test_stdio import text_of

pytestmark = pytest.mark.anyio

EDGE = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"
HANG = (
    "import sys, time\nprint('token=' + sys.argv[1], file=sys.stderr, flush=True)\ntime.sleep(120)"
)
SECRET = "s3cr3t-value-for-the-hung-server"
PROBLEM = "server 'hung' did not answer within 2 s (last stderr: token=[redacted])"


@pytest.fixture
def base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HUNG_SECRET", SECRET)
    base = tmp_path / "ws"
    base.mkdir()
    servers = {
        "edge": {"command": sys.executable, "args": [str(EDGE)]},
        "hung": {
            "command": sys.executable,
            "args": ["-c", HANG, "${HUNG_SECRET}"],
            "connect_timeout": 2,
        },
    }
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    assert os.environ["HUNG_SECRET"] == SECRET
    return base


async def test_search_list_and_run_code_name_the_server_that_did_not_answer(base: Path) -> None:
    async with stdio_client(base) as client:
        search = await client.call_tool("search_tools", {"query": "echo"})
        listing = await client.call_tool("list_tools", {})
        servers = await client.call_tool("list_servers", {})
        run = await client.call_tool("run_code", {"code": "tools.search('echo')[0]['name']"})
    for result in (search, listing):
        lines = text_of(result).splitlines()
        assert lines[0] == f"[warning] {PROBLEM}"
        assert any(line.startswith("edge.echo") for line in lines)
        assert result.structured_content is not None
        assert result.structured_content["warnings"] == [PROBLEM]
    assert text_of(servers).splitlines() == ["edge: 12 tools, ok", f"hung: ? tools, {PROBLEM}"]
    assert text_of(run).splitlines() == ["edge.echo", f"[warning] {PROBLEM}"]
    for result in (search, listing, servers, run):
        assert SECRET not in json.dumps(result.model_dump(mode="json"))
