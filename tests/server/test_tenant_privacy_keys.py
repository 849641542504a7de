"""Privacy under ``--tenants``: each tenant's vault key and storage come from its own side.

Privacy opened a tenant's workspace again with the server's environment: a Redis vault the
tenant's ``env_file`` configured was kept in files, and every tenant used the server's
``CODEMODE_PRIVACY_KEY``, so one tenant's token for a value was every tenant's token for it.
Now a tenant's ``env_file`` key is its own; without one, it gets the server's key derived
for its name (``codemode.tenants.keys``).
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.privacy.vault import MemoryStore, Vault, new_key
from codemode.tenants.keys import derive

from .conftest import REPO, HttpServer, http_client, start_http_server

sys.path.insert(0, str(REPO / "tests" / "storage"))
from redis_server import RedisServer

pytestmark = pytest.mark.anyio

TOKENS = {"acme": "acme-token-" + "a" * 32, "globex": "globex-token-" + "g" * 32}
EMAIL = "ada.lovelace@example.com"
SERVER_KEY = new_key()
GLOBEX_KEY = new_key()


def _token_with(key: bytes) -> str:
    return Vault(key, MemoryStore()).token("EMAIL", EMAIL)


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[HttpServer, Path, RedisServer]]:
    redis = RedisServer().start()
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-privacy-keys-"))
    root.chmod(0o755)
    spec: dict[str, dict[str, str]] = {}
    for name in TOKENS:
        ws = root / name
        (ws / "files").mkdir(parents=True)
        (ws / "mcp.json").write_text('{"mcpServers": {}}')
        (ws / "config.json").write_text(json.dumps({"privacy": True}))
        spec[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
    (root / "globex.env").write_text(
        f"CODEMODE_PRIVACY_KEY={GLOBEX_KEY}\nCODEMODE_STORAGE=redis\n"
        f"CODEMODE_REDIS_URL={redis.url}\nCODEMODE_REDIS_PREFIX=globex\n"
    )
    spec["globex"]["env_file"] = str(root / "globex.env")
    (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
    env = {f"{n.upper()}_TOKEN": t for n, t in TOKENS.items()}
    server = start_http_server(
        None,
        "--tenants",
        str(root / "tenants.json"),
        token=None,
        executor="subprocess",
        env={**env, "CODEMODE_PRIVACY_KEY": SERVER_KEY},
    )
    try:
        yield server, root, redis
    finally:
        server.stop()
        redis.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _token_seen_by(server: HttpServer, tenant: str) -> str:
    async with http_client(server.url, token=TOKENS[tenant]) as client:
        result = await client.call_tool("run_code", {"code": f"print({EMAIL!r})"})
    shown = " ".join(getattr(b, "text", "") for b in result.content)
    found = re.search(r"\[EMAIL_[a-z0-9]+\]", shown)
    assert found is not None and EMAIL not in shown, shown
    return found.group()


async def test_a_tenant_without_a_key_gets_the_servers_derived_for_it(
    served: tuple[HttpServer, Path, RedisServer],
) -> None:
    server, root, _ = served
    token = await _token_seen_by(server, "acme")
    master = base64.urlsafe_b64decode(SERVER_KEY)
    assert token == _token_with(base64.urlsafe_b64encode(derive(master, "privacy-vault", "acme")))
    assert token != _token_with(SERVER_KEY.encode())  # not the key every tenant would share
    assert (root / "acme" / "privacy" / "vault" / "acme").is_dir()


async def test_a_tenants_own_key_and_redis_vault_come_from_its_env_file(
    served: tuple[HttpServer, Path, RedisServer],
) -> None:
    server, root, redis = served
    token = await _token_seen_by(server, "globex")
    assert token == _token_with(GLOBEX_KEY.encode())
    assert token != await _token_seen_by(server, "acme")
    import redis as redis_client

    db = redis_client.Redis.from_url(redis.url)
    try:
        assert db.hlen("globex:privacy:globex:vault") >= 1
    finally:
        db.close()
    assert not (root / "globex" / "privacy" / "vault").exists()


async def test_the_operator_reveals_a_tenants_tokens_with_its_key(
    served: tuple[HttpServer, Path, RedisServer],
) -> None:
    server, root, _ = served
    for name, extra in [("acme", ()), ("globex", ("--env-file", str(root / "globex.env")))]:
        token = await _token_seen_by(server, name)
        argv = [sys.executable, "-m", "codemode", "privacy", "reveal", "--base", str(root / name)]
        shown = subprocess.run(
            [*argv, "--tenant", name, *extra, f"write to {token}"],
            env={**os.environ, "CODEMODE_PRIVACY_KEY": SERVER_KEY},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert shown.stdout.strip() == f"write to {EMAIL}", shown.stdout + shown.stderr
