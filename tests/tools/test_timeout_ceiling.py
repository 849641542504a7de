"""A server's ``timeout`` in mcp.json is the longest any call to it takes.

It is the operator's defence against a server wedged by what the sandbox planted (a FIFO
in /workspace read by the filesystem server: docs/isolation.md). Neither the agent's code
(through the raw bridge) nor a workflow step with a longer ``timeout`` may outlast it.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from codemode import Session, SubprocessExecutor, Workspace
from codemode.workflows import arun_workflow

pytestmark = pytest.mark.anyio

EDGE_SERVER = Path(__file__).resolve().parents[1] / "fixtures" / "servers" / "edge_server.py"


def _workspace(root: Path) -> Path:
    base = root / "ws"
    base.mkdir()
    edge = {"command": sys.executable, "args": [str(EDGE_SERVER)], "timeout": 1}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"edge": edge}}))
    (base / "config.json").write_text(json.dumps({"executor": "subprocess"}))
    return base


async def test_the_code_cannot_give_a_tool_call_a_longer_timeout(tmp_path: Path) -> None:
    forged = (
        "from codemode_worker import bridge\n"
        "bridge.call('tools.call', {'server': 'edge', 'tool': 'slow',"
        " 'args': {'seconds': 5}, 'timeout': 1e9})"
    )
    workspace = Workspace.open(_workspace(tmp_path))
    async with Session.for_workspace(workspace, executor=SubprocessExecutor()) as s:
        started = time.monotonic()
        r = await s.run(forged, timeout=30)
        took = time.monotonic() - started
        honest = await s.run("tools.edge.slow(seconds=5)", timeout=30)
    assert r.error is not None and "timeout" in r.error.message, r.to_text()
    assert took < 4
    assert honest.error is not None and honest.error.type == "ToolTimeout"


async def test_a_workflow_steps_timeout_does_not_outlast_the_servers(tmp_path: Path) -> None:
    base = _workspace(tmp_path)
    wf = {"steps": [{"tool": "edge.slow", "args": {"seconds": 5}, "timeout": 30}]}
    started = time.monotonic()
    result = await arun_workflow(wf, base=base, executor=SubprocessExecutor())
    assert result.status == "failed" and "no answer within 1 s" in (result.error or "")
    assert time.monotonic() - started < 4.5
