"""Privacy under ``--tenants``: a server that writes into a tenant's files gets tokens.

Privacy read a tenant's ``mcp.json`` again with the server's environment rather than the
tenant's ``env_file``: a ``${VAR}`` only the ``env_file`` holds made that reading fail, so
privacy knew none of the tenant's servers, and its filesystem server (given ``files/``)
counted as a sink. Told to copy a tokenized address, it wrote the real one into ``files/``,
where the agent's code reads it back.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import FS_SERVER, INSTALL_HINT, HttpServer, http_client, start_http_server

pytestmark = pytest.mark.anyio

TOKEN = "acme-token-" + "a" * 32
EMAIL = "ada.lovelace@example.com"


@pytest.fixture(scope="module")
def acme() -> Iterator[tuple[HttpServer, Path]]:
    if not (FS_SERVER / "index.js").exists():
        pytest.skip(f"the filesystem server is missing: {INSTALL_HINT}")
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-privacy-"))
    root.chmod(0o755)
    ws = root / "acme"
    files = ws / "files"
    files.mkdir(parents=True)
    (files / "contact.txt").write_text(f"write to {EMAIL}\n")
    fs = {
        "command": "node",
        "args": [str(FS_SERVER / "index.js"), str(files)],
        "env": {"FS_API_KEY": "${FS_API_KEY}"},  # held by the tenant's env_file only
    }
    (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": fs}}))
    (ws / "config.json").write_text(json.dumps({"privacy": True}))
    (root / "acme.env").write_text("FS_API_KEY=fs-key-0123456789\n")
    env_file = str(root / "acme.env")
    tenants = {"acme": {"workspace": str(ws), "token_env": "ACME_TOKEN", "env_file": env_file}}
    (root / "tenants.json").write_text(json.dumps({"tenants": tenants}))
    server = start_http_server(
        None,
        "--tenants",
        str(root / "tenants.json"),
        token=None,
        executor="subprocess",
        env={"ACME_TOKEN": TOKEN},
    )
    try:
        yield server, files
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


async def test_a_tenants_filesystem_server_writes_tokens_into_its_files(
    acme: tuple[HttpServer, Path],
) -> None:
    server, files = acme
    code = f"""
text = tools.fs.read_text_file(path={str(files / "contact.txt")!r})
text = text if isinstance(text, str) else str(text)
tools.fs.write_file(path={str(files / "copy.txt")!r}, content=text)
print(open("copy.txt").read())
"""
    async with http_client(server.url, token=TOKEN) as client:
        result = await client.call_tool("run_code", {"code": code})
    shown = " ".join(getattr(b, "text", "") for b in result.content)
    assert not result.is_error, shown
    written = (files / "copy.txt").read_text()
    assert EMAIL not in written, written  # a real value never lands where the code reads
    assert "[EMAIL_" in written
    assert EMAIL not in shown
