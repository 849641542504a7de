"""Under ``--tenants`` nothing of a tenant runs unjailed unless the operator allows it.

A tenant writes its own ``mcp.json`` and ``tools/``. An ``"isolation": "none"`` server or a
``host: true`` tool of it ran as the server's own user (root), outside any jail: the
tenant's code could read every other tenant's workspace and the server's env files.
``tenants.<name>.allow_unjailed`` is the operator's explicit word that it may.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import REPO, HttpServer, http_client, start_http_server

pytestmark = pytest.mark.anyio

TOKENS = {"acme": "acme-token-" + "a" * 32, "globex": "globex-token-" + "g" * 32}
NOTES = REPO / "tests" / "fixtures" / "servers" / "notes_server.py"
HOST_TOOL = {
    "name": "hostly",
    "tools": [{"name": "whoami", "command": ["id", "-u"], "host": True, "output": "text"}],
}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[HttpServer, Path]]:
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-unjailed-"))
    root.chmod(0o755)
    spec: dict[str, dict[str, object]] = {}
    for name in TOKENS:
        ws = root / name
        (ws / "files").mkdir(parents=True)
        (ws / "tools").mkdir()
        notes = {"command": sys.executable, "args": [str(NOTES)], "isolation": "none"}
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"notes": notes}}))
        (ws / "tools" / "hostly.json").write_text(json.dumps(HOST_TOOL))
        spec[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
    spec["globex"]["allow_unjailed"] = True
    (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
    server = start_http_server(
        None,
        "--tenants",
        str(root / "tenants.json"),
        token=None,
        executor="subprocess",
        env={f"{n.upper()}_TOKEN": t for n, t in TOKENS.items()},
    )
    try:
        yield server, root
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _run(server: HttpServer, tenant: str, code: str) -> str:
    async with http_client(server.url, token=TOKENS[tenant]) as client:
        result = await client.call_tool("run_code", {"code": code})
    return " ".join(getattr(b, "text", "") for b in result.content)


async def test_a_tenants_unisolated_server_is_refused_naming_the_setting(
    served: tuple[HttpServer, Path],
) -> None:
    server, _ = served
    shown = await _run(server, "acme", "print(tools.notes.list_notes())")
    assert '"isolation": "none" is refused' in shown, shown
    assert "tenants.acme.allow_unjailed" in shown, shown


async def test_a_tenants_host_tool_is_refused_naming_the_setting(
    served: tuple[HttpServer, Path],
) -> None:
    server, _ = served
    shown = await _run(server, "acme", "print(tools.hostly.whoami())")
    assert "host: true" in shown and "tenants.acme.allow_unjailed" in shown, shown


async def test_a_tenant_the_operator_allows_runs_both(served: tuple[HttpServer, Path]) -> None:
    server, _ = served
    code = "print(tools.notes.list_notes()); print('uid', tools.hostly.whoami().strip())"
    shown = await _run(server, "globex", code)
    assert "hello" in shown and "refused" not in shown, shown
    assert "uid 0" in shown, shown  # the operator's word: it ran as the server's user
