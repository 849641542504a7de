"""The MCP Inspector CLI (a client that is not ours) talks to ``codemode serve``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import INSTALL_HINT, NODE_DIR, serve_argv

INSPECTOR = NODE_DIR / "node_modules" / ".bin" / "mcp-inspector"


def inspector(base: Path, *method: str) -> dict[str, object]:
    if not INSPECTOR.exists() or shutil.which("node") is None:
        pytest.skip(f"the MCP Inspector CLI is missing: {INSTALL_HINT}")
    server = serve_argv(base, "--executor", "subprocess")
    argv = [str(INSPECTOR), "--cli", *server, *method]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=NODE_DIR)
    assert done.returncode == 0, done.stderr[-2000:]
    data: dict[str, object] = json.loads(done.stdout)
    return data


def test_the_inspector_lists_codemode_tools(tmp_path: Path) -> None:
    listed = inspector(tmp_path / "ws", "--method", "tools/list")
    names = {t["name"] for t in listed["tools"]}  # type: ignore[attr-defined,index]
    assert {"run_code", "search_tools", "get_tool", "reset_session"} <= names


def test_the_inspector_runs_code(tmp_path: Path) -> None:
    called = inspector(
        tmp_path / "ws",
        "--method", "tools/call", "--tool-name", "run_code", "--tool-arg", "code=print(6*7)",
    )  # fmt: skip
    assert called["isError"] is False
    assert called["content"] == [{"type": "text", "text": "42"}]
