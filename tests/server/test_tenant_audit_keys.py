"""The audit under ``--tenants``: each tenant's chain and argument HMACs have a key of its own.

Every tenant's log was keyed with the server's ``CODEMODE_AUDIT_KEY``: equal arguments of
two tenants had equal HMACs, and a tenant's ``env_file`` key was ignored. Now a tenant's
``env_file`` key is its own; without one, it gets the server's key derived for its name.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.audit.keys import Keys
from codemode.audit.log import canonical
from codemode.tenants.keys import derive

from .conftest import REPO, HttpServer, http_client, start_http_server

pytestmark = pytest.mark.anyio

TOKENS = {"acme": "acme-token-" + "a" * 32, "globex": "globex-token-" + "g" * 32}
SERVER_KEY = "server-audit-key-" + "s" * 32
GLOBEX_KEY = "globex-audit-key-" + "g" * 32
NOTES = REPO / "tests" / "fixtures" / "servers" / "notes_server.py"
ARGS = {"name": "hello"}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[HttpServer, Path, dict[str, str]]]:
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-audit-"))
    root.chmod(0o755)
    spec: dict[str, dict[str, str]] = {}
    for name in TOKENS:
        ws = root / name
        (ws / "files").mkdir(parents=True)
        notes = {"command": sys.executable, "args": [str(NOTES)]}
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": notes}}))
        (ws / "config.json").write_text(json.dumps({"audit": {"enabled": True}}))
        spec[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
    (root / "globex.env").write_text(f"CODEMODE_AUDIT_KEY={GLOBEX_KEY}\n")
    spec["globex"]["env_file"] = str(root / "globex.env")
    (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
    env = {
        **{f"{n.upper()}_TOKEN": t for n, t in TOKENS.items()},
        "CODEMODE_AUDIT_KEY": SERVER_KEY,
        "XDG_STATE_HOME": str(root / "state"),  # the heads, out of the real home
    }
    server = start_http_server(
        None, "--tenants", str(root / "tenants.json"), token=None, executor="subprocess", env=env
    )
    try:
        yield server, root, env
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _tool_line(server: HttpServer, root: Path, tenant: str) -> dict[str, Any]:
    async with http_client(server.url, token=TOKENS[tenant]) as client:
        result = await client.call_tool(
            "run_code", {"code": "print(tools.notes.read_note(**" + repr(ARGS) + "))"}
        )
    shown = " ".join(getattr(b, "text", "") for b in result.content)
    assert "hello world" in shown, shown
    log = root / tenant / "audit" / "audit.jsonl"
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        lines = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
        tools = [r for r in lines if r.get("kind") == "tool" and r.get("tool") == "read_note"]
        if tools:
            last: dict[str, Any] = tools[-1]
            return last
        time.sleep(0.1)
    raise AssertionError(f"no tool line in {log}")


def _hmac_with(keys: Keys) -> str:
    return hmac.digest(keys.args, canonical(ARGS), hashlib.sha256).hex()


def _verify(root: Path, env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "codemode", "audit", "verify", *extra]
    return subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )


async def test_each_tenant_hashes_arguments_with_its_own_key(
    served: tuple[HttpServer, Path, dict[str, str]],
) -> None:
    server, root, _ = served
    acme = await _tool_line(server, root, "acme")
    globex = await _tool_line(server, root, "globex")
    derived = Keys.derive(derive(SERVER_KEY.encode(), "audit", "acme"), "")
    assert acme["args_hmac"] == _hmac_with(derived)
    assert globex["args_hmac"] == _hmac_with(Keys.derive(GLOBEX_KEY.encode(), ""))
    assert acme["args_hmac"] != _hmac_with(Keys.derive(SERVER_KEY.encode(), ""))


async def test_a_tenants_log_verifies_with_its_key_only(
    served: tuple[HttpServer, Path, dict[str, str]],
) -> None:
    server, root, env = served
    await _tool_line(server, root, "acme")
    await _tool_line(server, root, "globex")
    for name, extra in [("acme", ()), ("globex", ("--env-file", str(root / "globex.env")))]:
        ok = _verify(root, env, "--base", str(root / name), "--tenant", name, *extra)
        assert ok.returncode == 0 and ok.stdout.startswith("ok:"), ok.stdout + ok.stderr
    alone = _verify(root, env, "--base", str(root / "acme"))  # the server's key as it is
    assert alone.returncode == 1 and "BROKEN" in alone.stderr, alone.stdout + alone.stderr
