"""The MCP Inspector CLI (another vendor's client, on the TypeScript SDK) over HTTP.

It negotiates the 2025 handshake and exits without ``DELETE``: the server must serve it
and reclaim each abandoned session soon after its connections close.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import INSTALL_HINT, NODE_DIR, start_http_server

INSPECTOR = NODE_DIR / "node_modules" / ".bin" / "mcp-inspector"
"""The Inspector CLI 0.15 (on the machine's Node): it speaks streamable HTTP."""


def inspector_over_http(url: str, *method: str) -> dict[str, object]:
    if not INSPECTOR.exists() or shutil.which("node") is None:
        pytest.skip(f"the MCP Inspector CLI is missing: {INSTALL_HINT}")
    argv = [str(INSPECTOR), "--cli", url, "--transport", "http", *method]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180, cwd=NODE_DIR)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    data: dict[str, object] = json.loads(done.stdout)
    return data


def test_inspector_clients_that_never_end_their_session_each_get_served_in_turn(
    tmp_path: Path,
) -> None:
    # One slot; each Inspector run leaves its session behind. Without reclaiming, the
    # second run would wait in the queue until it is told the server is busy.
    server = start_http_server(
        tmp_path / "ws", "--no-auth", "--max-sessions", "1", "--reclaim-after", "1",
        "--queue-timeout", "90", token=None,
    )  # fmt: skip
    try:
        call = ("--method", "tools/call", "--tool-name", "run_code", "--tool-arg")
        results = [
            inspector_over_http(server.url, *call, f"code=print({i} * 7)") for i in (1, 2, 3)
        ]
    finally:
        server.stop()
    assert [r["content"] for r in results] == [
        [{"type": "text", "text": str(i * 7)}] for i in (1, 2, 3)
    ]
    assert all(r["isError"] is False for r in results)
