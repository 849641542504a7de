"""A tenant's secrets are redacted in its own text, and are no oracle for another tenant.

Values a tenant's ``mcp.json`` takes from its ``env_file`` (``${DB_PASSWORD}``) never reach
its model: the credentials net redacts them. That net was one list for the whole process:
another tenant whose code printed a list of common passwords saw which one came back
``[redacted]``, and so learnt the first tenant's password.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import HttpServer, http_client, start_http_server

pytestmark = pytest.mark.anyio

ACME_TOKEN = "acme-token-" + "a" * 32
GLOBEX_TOKEN = "globex-token-" + "g" * 32
ACME_PASSWORD = "Summer2024!acme"
GLOBEX_PASSWORD = "Winter2025!globex"
GUESSES = ["password123", ACME_PASSWORD, "letmein2024", GLOBEX_PASSWORD]


@pytest.fixture(scope="module")
def tenancy() -> Iterator[HttpServer]:
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-secrets-"))
    root.chmod(0o755)
    spec: dict[str, Any] = {}
    for name, password in (("acme", ACME_PASSWORD), ("globex", GLOBEX_PASSWORD)):
        ws = root / name
        (ws / "files").mkdir(parents=True)
        db = {"command": "true", "env": {"DB_PASSWORD": "${DB_PASSWORD}"}}
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"db": db}}))
        (ws / "config.json").write_text(json.dumps({"privacy": True}))
        (root / f"{name}.env").write_text(f"DB_PASSWORD={password}\n")
        spec[name] = {
            "workspace": str(ws),
            "token_env": f"{name.upper()}_TOKEN",
            "env_file": str(root / f"{name}.env"),
        }
    (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
    server = start_http_server(
        None,
        "--tenants",
        str(root / "tenants.json"),
        token=None,
        executor="subprocess",
        env={"ACME_TOKEN": ACME_TOKEN, "GLOBEX_TOKEN": GLOBEX_TOKEN},
    )
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _printed(server: HttpServer, token: str) -> list[str]:
    async with http_client(server.url, token=token) as client:
        result = await client.call_tool("run_code", {"code": f"print('\\n'.join({GUESSES!r}))"})
    text = " ".join(getattr(b, "text", "") for b in result.content)
    assert not result.is_error, text
    return [line for line in text.splitlines() if line.strip()]


async def test_a_tenants_own_secret_is_redacted_in_its_own_output(tenancy: HttpServer) -> None:
    seen = " ".join(await _printed(tenancy, ACME_TOKEN))
    assert ACME_PASSWORD not in seen and "password123" in seen


async def test_another_tenants_secret_is_no_oracle(tenancy: HttpServer) -> None:
    seen = " ".join(await _printed(tenancy, GLOBEX_TOKEN))
    assert ACME_PASSWORD in seen, seen  # not acme's to hide here: printed as it was typed
    assert GLOBEX_PASSWORD not in seen  # its own is
