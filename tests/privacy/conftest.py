"""A workspace with two real MCP servers of the tests' own: a CRM full of personal data
(``tests/fixtures/servers/crm_server.py``) and an outbox that writes whatever it receives
to a file (``outbox_server.py``), plus, where installed, the real filesystem server given
the workspace's ``files/`` (so it is not a sink)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from codemode.privacy import layers

REPO = Path(__file__).resolve().parents[2]
SERVERS = REPO / "tests" / "fixtures" / "servers"
FS_SERVER = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"
sys.path.insert(0, str(SERVERS))

from crm_server import CUSTOMERS, REAL_VALUES  # noqa: E402

__all__ = ["CUSTOMERS", "REAL_VALUES", "PrivateWorkspace"]


@dataclass
class PrivateWorkspace:
    base: Path
    outbox: Path
    files: Path

    def received(self) -> list[dict[str, Any]]:
        if not self.outbox.exists():
            return []
        return [json.loads(line) for line in self.outbox.read_text().splitlines() if line]


def make_private_workspace(root: Path, privacy: Any = True) -> PrivateWorkspace:
    base = root / "ws"
    files = base / "files"
    files.mkdir(parents=True)
    outbox = root / "outbox.jsonl"
    servers: dict[str, Any] = {
        "crm": {"command": sys.executable, "args": [str(SERVERS / "crm_server.py")]},
        "outbox": {
            "command": sys.executable,
            "args": [str(SERVERS / "outbox_server.py")],
            "env": {"OUTBOX_FILE": str(outbox)},
        },
    }
    entry = FS_SERVER / "dist" / "index.js"
    if entry.exists():
        servers["files"] = {"command": "node", "args": [str(entry), str(files)]}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    config: dict[str, Any] = {"executor": "subprocess"}
    if privacy is not None:
        config["privacy"] = privacy
    (base / "config.json").write_text(json.dumps(config))
    return PrivateWorkspace(base, outbox, files)


@pytest.fixture(autouse=True)
def private_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Default key files live under $XDG_CONFIG_HOME: inside each test's tmp."""
    home = tmp_path / "home"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    for name in ("CODEMODE_PRIVACY_KEY", "CODEMODE_PRIVACY"):
        monkeypatch.delenv(name, raising=False)
    layers.reset_engines()
    yield home
    layers.reset_engines()


@pytest.fixture
def private_ws(tmp_path: Path) -> PrivateWorkspace:
    return make_private_workspace(tmp_path)
