"""Workspaces whose upstream servers are the real npm memory and filesystem servers.

Side effects are counted where they land: the memory server's JSON-lines file
(``MEMORY_FILE_PATH``), the filesystem server's directory.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol"
INSTALL_HINT = "run .ci/install-test-servers.sh to install the real test servers"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _entry(package: str) -> Path:
    path = NODE / package / "dist" / "index.js"
    if not path.exists():
        pytest.skip(f"{path} is missing: {INSTALL_HINT}")
    return path


@dataclass
class Space:
    base: Path
    files: Path
    memory_file: Path

    def write(self, name: str, text: str) -> Path:
        path = self.base / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def entities(self) -> list[str]:
        """Names of the entities the memory server stored, one per creation."""
        if not self.memory_file.exists():
            return []
        rows = [json.loads(line) for line in self.memory_file.read_text().splitlines() if line]
        return [r["name"] for r in rows if r.get("type") == "entity"]

    def codemode(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "codemode", *args],
            capture_output=True, text=True, timeout=timeout,
            env={**os.environ, "CODEMODE_BASE": str(self.base), "CODEMODE_EXECUTOR": "subprocess"},
        )  # fmt: skip

    def run_ids(self) -> list[str]:
        folder = self.base / "workflows" / "runs"
        return sorted(p.stem for p in folder.glob("*.jsonl")) if folder.is_dir() else []

    def journal(self, run_id: str) -> list[dict[str, Any]]:
        text = (self.base / "workflows" / "runs" / f"{run_id}.jsonl").read_text()
        return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture
def space(tmp_path: Path) -> Space:
    base, files = tmp_path / "ws", tmp_path / "files"
    base.mkdir()
    files.mkdir()
    (files / "a.txt").write_text("alpha\n")
    (files / "b.txt").write_text("beta beta\n")
    memory_file = tmp_path / "memory.jsonl"
    servers = {
        "memory": {"command": "node", "args": [str(_entry("server-memory"))],
                   "env": {"MEMORY_FILE_PATH": str(memory_file)}},
        "fs": {"command": "node", "args": [str(_entry("server-filesystem")), str(files)]},
    }  # fmt: skip
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    (base / "config.json").write_text(json.dumps({"executor": "subprocess"}))
    return Space(base, files.resolve(), memory_file)
