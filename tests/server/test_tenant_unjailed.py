"""Under ``--tenants`` nothing of a tenant runs unjailed unless the operator allows it.

A tenant writes its own ``mcp.json`` and ``tools/``. An ``"isolation": "none"`` server or a
``host: true`` tool of it ran as the server's own user (root), outside any jail: the
tenant's code could read every other tenant's workspace and the server's env files.
``tenants.<name>.allow_unjailed`` is the operator's explicit word that it may.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_process import launch_serve

from .conftest import REPO, HttpServer, http_client, serve_argv, start_http_server

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


PEEK = """
import json
import sys

TOOL = {"name": "read", "description": "Read any file.",
        "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}

for line in sys.stdin:
    msg = json.loads(line)
    method, rid = msg.get("method"), msg.get("id")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "peek", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [TOOL]}
    elif method == "tools/call":
        try:
            with open(msg["params"]["arguments"]["path"]) as f:
                text = f.read()
        except OSError as exc:
            text = "cannot: " + str(exc.strerror)
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    print(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}), flush=True)
"""


async def test_not_root_a_tenants_server_is_jailed_all_the_same() -> None:
    """Not root, a server given no workspace path ran unjailed as the server's user, who
    reads every tenant's files (here: another tenant's secret)."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv is missing")
    nobody = 65534
    tmp_path = Path(tempfile.mkdtemp(prefix="codemode-tenant-nobody-"))
    root = tmp_path / "tenants"
    for name in TOKENS:
        (root / name / "files").mkdir(parents=True)
    (root / "peek.py").write_text(PEEK)
    # the system's python (the venv's lives under /root, which nobody cannot reach)
    peek = {"command": "/usr/bin/python3", "args": [str(root / "peek.py")]}
    (root / "acme" / "mcp.json").write_text(json.dumps({"mcpServers": {"peek": peek}}))
    (root / "globex" / "mcp.json").write_text('{"mcpServers": {}}')
    secret = root / "globex" / "secret.txt"
    secret.write_text("globex's secret")
    spec = {n: {"workspace": str(root / n), "token_env": f"{n.upper()}_TOKEN"} for n in TOKENS}
    (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
    for path in [tmp_path, *tmp_path.rglob("*")]:
        os.chown(path, nobody, nobody)
    tmp_path.chmod(0o755)
    env = {
        **os.environ,
        **{f"{n.upper()}_TOKEN": t for n, t in TOKENS.items()},
        "HOME": str(tmp_path),
    }
    env.pop("CODEMODE_TOKEN", None)
    argv = [
        "setpriv", f"--reuid={nobody}", f"--regid={nobody}", "--clear-groups",
        *serve_argv(None, "--transport", "http", "--port", "0", "--executor", "inprocess",
                    "--tenants", str(root / "tenants.json")),
    ]  # fmt: skip
    launched = launch_serve(argv, env, timeout=60)
    server = HttpServer(launched.proc, launched.url, launched.lines, drain=launched.drain)
    try:
        shown = await _run(server, "acme", f"print(tools.peek.read(path={str(secret)!r}))")
    finally:
        server.stop()
        shutil.rmtree(tmp_path, ignore_errors=True)
    assert "globex's secret" not in shown, shown
    assert "cannot: No such file" in shown, shown
