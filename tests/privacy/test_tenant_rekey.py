"""``codemode privacy rekey --tenant``: a vault written with the server's key moves to the
tenant's own key, keeping its tokens; anything else is left as it is, saying why."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codemode.privacy.layers import vault_dir
from codemode.privacy.vault import FileStore, RedisStore, Vault, new_key
from codemode.tenants.keys import derive

SERVER_KEY = new_key()
EMAIL = "ada.lovelace@example.com"


def _own(tenant: str) -> bytes:
    master = base64.urlsafe_b64decode(SERVER_KEY)
    return base64.urlsafe_b64encode(derive(master, "privacy-vault", tenant))


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "acme"
    (ws / "files").mkdir(parents=True)
    (ws / "mcp.json").write_text('{"mcpServers": {}}')
    (ws / "config.json").write_text(json.dumps({"privacy": True}))
    return ws


def _old_token(store: FileStore | RedisStore, key: str = SERVER_KEY) -> str:
    vault = Vault(key.encode(), store)
    token = vault.token("EMAIL", EMAIL)
    vault.flush()
    return token


def _codemode(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codemode", *argv],
        env={**os.environ, "CODEMODE_PRIVACY_KEY": SERVER_KEY},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def redis() -> Iterator[Any]:
    if shutil.which("redis-server") is None:
        pytest.skip("redis-server is not installed (scripts/setup.sh installs it)")
    sys.path.insert(0, str(Path(__file__).parents[1] / "storage"))
    from redis_server import RedisServer

    server = RedisServer().start()
    try:
        yield server
    finally:
        server.stop()


def test_a_redis_vault_moves_to_the_tenants_key_keeping_its_tokens(
    tmp_path: Path, redis: Any
) -> None:
    ws = _workspace(tmp_path)
    env_file = tmp_path / "acme.env"
    env_file.write_text(
        f"CODEMODE_STORAGE=redis\nCODEMODE_REDIS_URL={redis.url}\nCODEMODE_REDIS_PREFIX=acme\n"
    )
    name = "acme:privacy:acme:vault"
    token = _old_token(RedisStore(redis.url, name, SERVER_KEY.encode()))
    tenant = ("--base", str(ws), "--tenant", "acme", "--env-file", str(env_file))
    done = _codemode("privacy", "rekey", *tenant)
    assert done.returncode == 0 and "rekeyed 1 entries" in done.stdout, done.stdout + done.stderr
    assert RedisStore(redis.url, name, _own("acme")).load()[token].value == EMAIL
    assert "acme:privacy:acme:vault:before-rekey-" in done.stdout
    shown = _codemode("privacy", "reveal", *tenant, f"to {token}")
    assert shown.stdout.strip() == f"to {EMAIL}", shown.stdout + shown.stderr
    again = _codemode("privacy", "rekey", *tenant)
    assert again.returncode == 0 and "already uses its own key" in again.stdout, again.stdout


def test_a_vault_of_another_key_is_left_as_it_is(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    directory = vault_dir(ws, "acme")
    _old_token(FileStore(directory, new_key().encode()))
    before = sorted(p.name for p in directory.iterdir())
    done = _codemode("privacy", "rekey", "--base", str(ws), "--tenant", "acme")
    assert done.returncode == 1 and "none of the keys tried" in done.stderr, done.stderr
    assert sorted(p.name for p in directory.iterdir()) == before
    assert [p.name for p in directory.parent.iterdir()] == ["acme"]


def test_a_tenants_own_key_replaces_the_servers_once_rekeyed(tmp_path: Path) -> None:
    # Its env_file's key was ignored before: its vault was written with the server's.
    ws = _workspace(tmp_path)
    token = _old_token(FileStore(vault_dir(ws, "acme"), SERVER_KEY.encode()))
    own = new_key()
    env_file = tmp_path / "acme.env"
    env_file.write_text(f"CODEMODE_PRIVACY_KEY={own}\n")
    tenant = ("--base", str(ws), "--tenant", "acme", "--env-file", str(env_file))
    status = _codemode("privacy", "status", *tenant)
    assert "as it is, instead of its own key ($CODEMODE_PRIVACY_KEY of tenant acme" in status.stdout
    done = _codemode("privacy", "rekey", *tenant)
    assert done.returncode == 0 and "rekeyed 1 entries" in done.stdout, done.stdout + done.stderr
    assert FileStore(vault_dir(ws, "acme"), own.encode()).load()[token].value == EMAIL
    again = _codemode("privacy", "rekey", *tenant)
    assert "already uses its own key" in again.stdout, again.stdout + again.stderr


def test_a_file_vault_left_behind_moves_into_the_tenants_redis(tmp_path: Path, redis: Any) -> None:
    # Its env_file chose Redis, but the server's environment chose the storage before.
    ws = _workspace(tmp_path)
    token = _old_token(FileStore(vault_dir(ws, "acme"), SERVER_KEY.encode()))
    env_file = tmp_path / "acme.env"
    env_file.write_text(
        f"CODEMODE_STORAGE=redis\nCODEMODE_REDIS_URL={redis.url}\nCODEMODE_REDIS_PREFIX=acme\n"
    )
    tenant = ("--base", str(ws), "--tenant", "acme", "--env-file", str(env_file))
    status = _codemode("privacy", "status", *tenant)
    assert "WARNING: tenant acme's vault is in redis" in status.stdout, status.stdout
    done = _codemode("privacy", "rekey", *tenant)
    assert done.returncode == 0 and "moved 1 entries" in done.stdout, done.stdout + done.stderr
    name = "acme:privacy:acme:vault"
    assert RedisStore(redis.url, name, _own("acme")).load()[token].value == EMAIL
    shown = _codemode("privacy", "reveal", *tenant, f"to {token}")
    assert shown.stdout.strip() == f"to {EMAIL}", shown.stdout + shown.stderr
    assert not vault_dir(ws, "acme").exists()  # kept aside, named in the output
    assert "moved-to-redis" in done.stdout
