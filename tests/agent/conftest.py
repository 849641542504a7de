"""Fixtures for the agent runner: a scripted model on a real local HTTP server, driven by
the real ``openai`` and ``anthropic`` SDKs, and workspaces with a real upstream MCP server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.agent import Agent, create_agent
from codemode.agent.testing import FakeLLMServer

REPO = Path(__file__).resolve().parents[2]
FS_SERVER = REPO / ".ci" / "node" / "node_modules" / "@modelcontextprotocol" / "server-filesystem"
INSTALL_HINT = "run .ci/install-test-servers.sh to install the real test servers"
KEY = "sk-test-0123456789abcdef"
NOTES = {
    "paris.txt": "Trip notes: Paris in May, the Louvre, then Lyon.\n",
    "rome.txt": "Rome in June; the Colosseum.\n",
    "todo.md": "- book the Paris hotel\n- renew passport\n",
}


@pytest.fixture
def llm() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(api_key=KEY) as server:
        yield server


@pytest.fixture
def base(tmp_path: Path) -> Path:
    """An empty workspace (no upstream servers)."""
    path = tmp_path / "ws"
    path.mkdir()
    (path / "mcp.json").write_text('{"mcpServers": {}}')
    return path


@pytest.fixture
def fs_base(tmp_path: Path) -> Path:
    """A workspace whose only upstream server is the real npm filesystem server."""
    entry = FS_SERVER / "dist" / "index.js"
    if not entry.exists():
        pytest.skip(f"{entry} is missing: {INSTALL_HINT}")
    files = tmp_path / "notes"
    files.mkdir()
    for name, text in NOTES.items():
        (files / name).write_text(text)
    path = tmp_path / "fsws"
    path.mkdir()
    servers = {"mcpServers": {"fs": {"command": "node", "args": [str(entry), str(files)]}}}
    (path / "mcp.json").write_text(json.dumps(servers))
    return path


def provider_args(llm: FakeLLMServer, provider: str) -> dict[str, Any]:
    """create_agent() arguments that point ``provider`` at the fake server."""
    if provider == "openai":
        return {"llm_provider": "openai", "llm_base_url": llm.openai_url, "llm_api_key": KEY}
    if provider == "anthropic":
        return {"llm_provider": "anthropic", "llm_base_url": llm.anthropic_url, "llm_api_key": KEY}
    return {
        "llm_provider": "azure_openai",
        "llm_azure_endpoint": llm.azure_endpoint,
        "llm_azure_deployment": "chat-dep",
        "llm_api_key": KEY,
    }


def make_agent(llm: FakeLLMServer, base: Path, provider: str = "openai", **kw: Any) -> Agent:
    """An agent on the fake model; the process environment is not consulted."""
    kw.setdefault("executor", "subprocess")
    kw.setdefault("env", {})
    return create_agent(base=base, **(provider_args(llm, provider) | kw))
