"""``execute_task`` under ``--tenants``: each tenant's model and key come from its own
``env_file``, never from the server's environment.

The server's environment holds whatever its operator put there (an API key of its own, or
one meant for one tenant). ``execute_task`` read its model settings from it for every
tenant: each tenant spent that key, and a tenant's own key in its ``env_file`` was ignored.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode.agent.testing import Answer, Code, FakeLLMServer

from .conftest import HttpServer, http_client, start_http_server

pytestmark = pytest.mark.anyio

ACME_TOKEN = "acme-token-" + "a" * 32
GLOBEX_TOKEN = "globex-token-" + "g" * 32
OPERATOR_KEY = "sk-operator-0123456789abcdef"
ACME_KEY = "sk-acme-0123456789abcdef"


@dataclass
class Setup:
    server: HttpServer
    operator: FakeLLMServer
    acme: FakeLLMServer


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-models-"))
    root.chmod(0o755)
    with (
        FakeLLMServer(api_key=OPERATOR_KEY) as operator,
        FakeLLMServer([Code("print(6 * 7)"), Answer("42")], api_key=ACME_KEY) as acme,
    ):
        spec = {}
        for name in ("acme", "globex"):
            ws = root / name
            (ws / "files").mkdir(parents=True)
            (ws / "mcp.json").write_text('{"mcpServers": {}}')
            spec[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
        (root / "acme.env").write_text(
            f"LLM_PROVIDER=openai\nOPENAI_API_KEY={ACME_KEY}\nOPENAI_BASE_URL={acme.openai_url}\n"
        )
        spec["acme"]["env_file"] = str(root / "acme.env")
        (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "LLM_"))}
        env |= {
            "ACME_TOKEN": ACME_TOKEN,
            "GLOBEX_TOKEN": GLOBEX_TOKEN,
            "LLM_PROVIDER": "openai",
            "OPENAI_API_KEY": OPERATOR_KEY,
            "OPENAI_BASE_URL": operator.openai_url,
        }
        server = start_http_server(
            None, "--tenants", str(root / "tenants.json"), token=None, env=env
        )
        try:
            yield Setup(server, operator, acme)
        finally:
            server.stop()
            shutil.rmtree(root, ignore_errors=True)


async def test_a_tenant_with_a_key_in_its_env_file_uses_its_own_model(setup: Setup) -> None:
    async with http_client(setup.server.url, token=ACME_TOKEN) as client:
        r = await client.call_tool("execute_task", {"task": "what is 6 times 7?"})
    assert r.structured_content is not None and r.structured_content["result"] == "42", r
    assert len(setup.acme.requests) == 2
    assert setup.operator.requests == []


async def test_a_tenant_without_a_model_never_spends_the_servers_key(setup: Setup) -> None:
    async with http_client(setup.server.url, token=GLOBEX_TOKEN) as client:
        r = await client.call_tool("execute_task", {"task": "book a flight"})
    assert r.is_error
    assert setup.operator.requests == []
