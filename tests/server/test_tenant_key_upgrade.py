"""Upgrading to per-tenant keys under ``--tenants`` loses nothing.

A tenant's keys are now its ``env_file``'s, else the server's derived for its name. Its
vault and audit log written before, with the server's key as it is (whatever its
``env_file`` said), then stopped working: saved tokens became "unknown token", the same
value got a new token, and its audit chain verified BROKEN at the first new line. Now
such a tenant keeps the server's key, with a warning at start; a new tenant gets its own
key. The old state is written here through the library's own classes with the server's
key, as the old ``serve --tenants`` wrote it.
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
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode.audit.config import AuditConfig
from codemode.audit.keys import Keys
from codemode.audit.log import AuditLog
from codemode.audit.trail import head_path
from codemode.privacy.layers import vault_dir
from codemode.privacy.vault import FileStore, MemoryStore, RedisStore, Vault, new_key
from codemode.tenants.keys import derive

from .conftest import REPO, HttpServer, http_client, start_http_server

sys.path.insert(0, str(REPO / "tests" / "storage"))
from redis_server import RedisServer

pytestmark = pytest.mark.anyio

TOKENS = {
    "acme": "acme-token-" + "a" * 32,  # an old file vault and an old audit log
    "globex": "globex-token-" + "g" * 32,  # an old Redis vault and log; keys in its env_file
    "initech": "initech-token-" + "i" * 32,  # new: nothing written before
    "hooli": "hooli-token-" + "h" * 32,  # an old file vault, rekeyed before the start
}
EMAIL = "ada.lovelace@example.com"
SERVER_KEY = new_key()
AUDIT_KEY = "server-audit-key-" + "s" * 32
CLI = (sys.executable, "-m", "codemode")
OUTBOX = REPO / "tests" / "fixtures" / "servers" / "outbox_server.py"


@dataclass
class Upgraded:
    server: HttpServer
    root: Path
    env: dict[str, str]
    old_tokens: dict[str, str]


def _write_old_vault(name: str, store: FileStore | RedisStore) -> str:
    vault = Vault(SERVER_KEY.encode(), store)
    token = vault.token("EMAIL", EMAIL)
    vault.flush()
    return token


def _write_old_log(ws: Path, state: Path) -> None:
    path = ws / "audit" / "audit.jsonl"
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(state)  # where the server finds the heads
    try:
        head = head_path(AuditConfig(enabled=True), path)
    finally:
        if before is None:
            del os.environ["XDG_STATE_HOME"]
        else:
            os.environ["XDG_STATE_HOME"] = before
    old = AuditLog(path, Keys.derive(AUDIT_KEY.encode(), ""), head=head, max_bytes=1 << 20)
    old.append({"kind": "run", "code": "print(1)", "outcome": "ok"})
    old.append({"kind": "run", "code": "print(2)", "outcome": "ok"})
    old.close()


@pytest.fixture(scope="module")
def upgraded() -> Iterator[Upgraded]:
    redis = RedisServer().start()
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-upgrade-"))
    root.chmod(0o755)
    spec: dict[str, dict[str, str]] = {}
    for name in TOKENS:
        ws = root / name
        (ws / "files").mkdir(parents=True)
        outbox = {
            "command": sys.executable,
            "args": [str(OUTBOX)],
            "env": {"OUTBOX_FILE": str(root / f"{name}-outbox.jsonl")},
        }
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"outbox": outbox}}))
        config = {"privacy": True, "audit": {"enabled": True}}
        (ws / "config.json").write_text(json.dumps(config))
        spec[name] = {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}
    (root / "globex.env").write_text(
        f"CODEMODE_STORAGE=redis\nCODEMODE_REDIS_URL={redis.url}\nCODEMODE_REDIS_PREFIX=globex\n"
        f"CODEMODE_PRIVACY_KEY={new_key()}\nCODEMODE_AUDIT_KEY=globex-audit-key-{'g' * 32}\n"
    )
    spec["globex"]["env_file"] = str(root / "globex.env")
    (root / "tenants.json").write_text(json.dumps({"tenants": spec}))
    old_tokens = {
        "acme": _write_old_vault(
            "acme", FileStore(vault_dir(root / "acme", "acme"), SERVER_KEY.encode())
        ),
        "globex": _write_old_vault(
            "globex", RedisStore(redis.url, "globex:privacy:globex:vault", SERVER_KEY.encode())
        ),
    }
    old_tokens["hooli"] = _write_old_vault(
        "hooli", FileStore(vault_dir(root / "hooli", "hooli"), SERVER_KEY.encode())
    )
    _write_old_log(root / "acme", root / "state")
    _write_old_log(root / "globex", root / "state")
    env = {
        **{f"{n.upper()}_TOKEN": t for n, t in TOKENS.items()},
        "CODEMODE_PRIVACY_KEY": SERVER_KEY,
        "CODEMODE_AUDIT_KEY": AUDIT_KEY,
        "XDG_STATE_HOME": str(root / "state"),
    }
    rekeyed = subprocess.run(
        [*CLI, "privacy", "rekey", "--base", str(root / "hooli"), "--tenant", "hooli"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rekeyed.returncode == 0 and "rekeyed 1 entries" in rekeyed.stdout, rekeyed
    server = start_http_server(
        None, "--tenants", str(root / "tenants.json"), token=None, executor="subprocess", env=env
    )
    try:
        yield Upgraded(server, root, env, old_tokens)
    finally:
        server.stop()
        redis.stop()
        shutil.rmtree(root, ignore_errors=True)


async def _run(up: Upgraded, tenant: str, code: str) -> str:
    async with http_client(up.server.url, token=TOKENS[tenant]) as client:
        result = await client.call_tool("run_code", {"code": code})
    shown = " ".join(getattr(b, "text", "") for b in result.content)
    assert not result.is_error, shown
    return shown


def _outbox(up: Upgraded, tenant: str) -> list[dict[str, str]]:
    path = up.root / f"{tenant}-outbox.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("tenant", ["acme", "globex", "hooli"])
async def test_an_old_token_still_reaches_a_sink_as_its_value(
    upgraded: Upgraded, tenant: str
) -> None:
    old = upgraded.old_tokens[tenant]
    code = f"print(tools.outbox.send(to={old!r}, subject='hi', body='saved earlier'))"
    await _run(upgraded, tenant, code)
    sent = [e for e in _outbox(upgraded, tenant) if e["body"] == "saved earlier"]
    assert sent and sent[-1]["to"] == EMAIL, sent


@pytest.mark.parametrize("tenant", ["acme", "globex", "hooli"])
async def test_a_value_seen_again_gets_its_old_token(upgraded: Upgraded, tenant: str) -> None:
    shown = await _run(upgraded, tenant, f"print({EMAIL!r})")
    found = re.findall(r"\[EMAIL_[a-z0-9]+\]", shown)
    assert found == [upgraded.old_tokens[tenant]], shown


async def test_a_new_tenant_gets_the_derived_key(upgraded: Upgraded) -> None:
    shown = await _run(upgraded, "initech", f"print({EMAIL!r})")
    master = base64.urlsafe_b64decode(SERVER_KEY)
    own = base64.urlsafe_b64encode(derive(master, "privacy-vault", "initech"))
    assert Vault(own, MemoryStore()).token("EMAIL", EMAIL) in shown, shown
    assert upgraded.old_tokens["acme"] not in shown


def test_the_start_says_which_tenants_keep_the_servers_key(upgraded: Upgraded) -> None:
    said = " ".join("".join(upgraded.server.lines).split())  # rich wraps its lines
    said = re.sub(r" \S+\.py:\d+ ", " ", said)  # and names the source on a record's first
    assert said.count("privacy: the vault key of tenant") == 2, said[-3000:]
    assert said.count("audit: the key of tenant") == 2, said[-3000:]
    server = "$CODEMODE_PRIVACY_KEY of the server as it is, instead of its own key"
    assert f"tenant acme is {server} ($CODEMODE_PRIVACY_KEY of the server, derived" in said
    assert "tenant acme is $CODEMODE_AUDIT_KEY as it is, instead of its own key" in said
    assert f"tenant globex is {server} ($CODEMODE_PRIVACY_KEY of tenant globex's env_file)" in said
    assert "tenant initech" not in said and "tenant hooli" not in said


def _cli(up: Upgraded, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv],
        env={**os.environ, **up.env},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def test_an_old_audit_log_goes_on_intact(upgraded: Upgraded) -> None:
    for tenant in ("acme", "globex", "initech"):
        await _run(upgraded, tenant, "print('after the upgrade')")
    for tenant in ("acme", "globex"):
        log = upgraded.root / tenant / "audit" / "audit.jsonl"
        deadline = time.monotonic() + 15
        while len(log.read_text().splitlines()) <= 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # the two old lines, then the new ones
        assert len(log.read_text().splitlines()) > 2
    env_file = ("--env-file", str(upgraded.root / "globex.env"))
    for tenant, extra in [("acme", ()), ("globex", env_file), ("initech", ())]:
        base = str(upgraded.root / tenant)
        done = _cli(upgraded, "audit", "verify", "--base", base, "--tenant", tenant, *extra)
        assert done.returncode == 0 and done.stdout.startswith("ok:"), done.stdout + done.stderr
        kept = "as it is, instead of its own key" in done.stdout
        assert kept == (tenant != "initech"), done.stdout


def test_privacy_status_says_the_tenant_keeps_the_servers_key(upgraded: Upgraded) -> None:
    base = str(upgraded.root / "acme")
    done = _cli(upgraded, "privacy", "status", "--base", base, "--tenant", "acme")
    assert done.returncode == 0, done.stderr
    assert "of the server as it is, instead of its own key" in done.stdout, done.stdout


def test_a_rekeyed_tenant_uses_its_own_key(upgraded: Upgraded) -> None:
    base = str(upgraded.root / "hooli")
    done = _cli(upgraded, "privacy", "status", "--base", base, "--tenant", "hooli")
    assert "derived for tenant hooli" in done.stdout and "as it is" not in done.stdout, done.stdout
    master = base64.urlsafe_b64decode(SERVER_KEY)
    own = base64.urlsafe_b64encode(derive(master, "privacy-vault", "hooli"))
    entries = FileStore(vault_dir(upgraded.root / "hooli", "hooli"), own).load()
    assert entries[upgraded.old_tokens["hooli"]].value == EMAIL
    kept = list((upgraded.root / "hooli" / "privacy" / "vault").glob(".hooli.before-rekey-*"))
    assert len(kept) == 1  # the old vault, for the operator to remove
