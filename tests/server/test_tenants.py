"""``codemode serve --transport http --tenants FILE``: two tenants on one real server.

Each tenant has its own workspace, its own real filesystem server over its own files, its
own token; the sandbox runs their code. One tenant tries to reach the other's artifacts,
skills, state and files through every tool and from its code.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from codemode.errors import ConfigError
from codemode.isolation.uids import SANDBOX_UID, SERVERS_UID, server_uid
from codemode.tenants.config import load_tenants
from codemode.workspace import Workspace

from .conftest import (
    FS_SERVER,
    INITIALIZE,
    INSTALL_HINT,
    HttpServer,
    http_client,
    start_http_server,
)

pytestmark = pytest.mark.anyio

ACME_TOKEN = "acme-token-" + "a" * 32
GLOBEX_TOKEN = "globex-token-" + "g" * 32
SAVE = """
artifacts.save("plan", {"launch": "acme-secret-plan"})
state.set("secret", "acme-secret-state")
skills.create("acme_skill", "def run():\\n    return 'acme-secret-skill'\\n", "acme's skill")
with open("/workspace/acme.txt", "w") as f:
    f.write("acme-secret-file")
"""


@dataclass
class Tenancy:
    server: HttpServer
    root: Path

    def files(self, tenant: str) -> Path:
        return self.root / tenant / "ws" / "files"

    def ws(self, tenant: str) -> Path:
        return self.root / tenant / "ws"


def _tenant(root: Path, name: str) -> dict[str, Any]:
    entry = FS_SERVER / "index.js"
    ws = root / name / "ws"
    ws.mkdir(parents=True)
    files = ws / "files"
    files.mkdir()
    (files / f"{name}-readme.txt").write_text(f"{name}'s own file\n")
    fs = {"command": "node", "args": [str(entry), str(files)]}
    (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": fs}}))
    return {"workspace": str(ws), "token_env": f"{name.upper()}_TOKEN"}


@pytest.fixture(scope="module")
def tenancy() -> Iterator[Tenancy]:
    from codemode.execution.sandbox import SandboxExecutor

    if not (FS_SERVER / "index.js").exists():
        pytest.skip(f"the filesystem server is missing: {INSTALL_HINT}")
    failed = [c for c in SandboxExecutor(pool_size=0).checks() if not c.ok and c.required]
    if failed:
        pytest.skip("; ".join(f"{c.name}: {c.detail}" for c in failed))
    # The sandbox's uid must reach the workspaces: pytest's temporary directories are root's.
    root = Path(tempfile.mkdtemp(prefix="codemode-tenants-"))
    root.chmod(0o755)
    tenants = {"tenants": {name: _tenant(root, name) for name in ("acme", "globex")}}
    (root / "tenants.json").write_text(json.dumps(tenants))
    env = {"ACME_TOKEN": ACME_TOKEN, "GLOBEX_TOKEN": GLOBEX_TOKEN}
    server = start_http_server(
        None,
        "--tenants",
        str(root / "tenants.json"),
        token=None,
        executor="sandbox",
        env=env,
    )
    try:
        yield Tenancy(server, root)
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)


def _text(result: Any) -> str:
    return " ".join(getattr(b, "text", "") for b in result.content)


async def test_a_tenant_reaches_nothing_of_another_tenants_through_any_tool(
    tenancy: Tenancy,
) -> None:
    url = tenancy.server.url
    async with http_client(url, token=ACME_TOKEN) as acme:
        saved = await acme.call_tool("run_code", {"code": SAVE})
        assert not saved.is_error, _text(saved)
        own = await acme.call_tool("load_artifact", {"name": "plan"})
        assert "acme-secret-plan" in _text(own)  # the data is there, for its owner
    assert (tenancy.files("acme") / "acme.txt").read_text() == "acme-secret-file"

    acme_files = tenancy.files("acme")
    acme_ws = tenancy.ws("acme")
    async with http_client(url, token=GLOBEX_TOKEN) as globex:
        seen = [
            await globex.call_tool("list_artifacts", {}),
            await globex.call_tool("load_artifact", {"name": "plan"}),
            await globex.call_tool("get_state", {}),
            await globex.call_tool("list_skills", {}),
            await globex.call_tool("search_skills", {"query": "acme"}),
            await globex.call_tool("get_skill", {"name": "acme_skill"}),
            await globex.call_tool("invoke_skill", {"name": "acme_skill"}),
        ]
        code = f"""
out = []
for attempt in (
    lambda: artifacts.load("plan"),
    lambda: state.get("secret"),
    lambda: skills.acme_skill(),
    lambda: open("/workspace/acme.txt").read(),
    lambda: open({str(acme_files / "acme.txt")!r}).read(),
    lambda: open({str(acme_ws / "artifacts")!r}).read(),
    lambda: tools.fs.read_text_file(path={str(acme_files / "acme.txt")!r}),
    lambda: tools.fs.list_directory(path={str(acme_files)!r}),
):
    try:
        out.append(repr(attempt()))
    except BaseException as exc:
        out.append(type(exc).__name__)
import os
out.append(repr(sorted(os.listdir("/workspace"))))
print("\\n".join(out))
"""
        tried = await globex.call_tool("run_code", {"code": code})
        own_files = await globex.call_tool(
            "run_code",
            {"code": "tools.fs.list_directory(path=" + repr(str(tenancy.files("globex"))) + ")"},
        )
    assert _text(tried).split() == [
        "NotFound",  # artifacts.load
        "None",  # state.get
        "NotFound",  # the skill
        *["FileNotFoundError"] * 3,  # /workspace and the other tenant's host paths
        *["ToolError"] * 2,  # its own filesystem server: outside its allowed directory
        "['globex-readme.txt']",
    ], _text(tried)
    everything = " ".join(_text(r) for r in [*seen, tried])
    assert "acme-secret" not in everything, everything
    assert "acme.txt" not in _text(tried)
    assert "globex-readme.txt" in _text(own_files)  # its own server works


@pytest.mark.skipif(os.geteuid() != 0, reason="uids are switched only when codemode runs as root")
async def test_each_tenants_upstream_servers_run_as_that_tenants_own_uid(tenancy: Tenancy) -> None:
    owners: dict[str, int] = {}
    for name, token in (("acme", ACME_TOKEN), ("globex", GLOBEX_TOKEN)):
        target = tenancy.files(name) / f"{name}-by-its-server.txt"
        code = f"tools.fs.write_file(path={str(target)!r}, content='written by the server')"
        async with http_client(tenancy.server.url, token=token) as client:
            wrote = await client.call_tool("run_code", {"code": code})
        assert not wrote.is_error, _text(wrote)
        owners[name] = target.stat().st_uid
    assert owners == {"acme": server_uid("acme"), "globex": server_uid("globex")}
    assert owners["acme"] != owners["globex"]
    assert not {SANDBOX_UID, SERVERS_UID, 0} & set(owners.values())


def _two_names_with_one_uid() -> tuple[str, str]:
    seen: dict[int, str] = {}
    for i in range(100_000):
        name = f"t{i}"
        other = seen.setdefault(server_uid(name), name)
        if other != name:
            return other, name
    raise AssertionError("no two tenant names share a uid")


def test_tenants_whose_servers_would_share_a_uid_are_refused(tmp_path: Path) -> None:
    pair = _two_names_with_one_uid()
    tenants: dict[str, Any] = {}
    for name in pair:
        (tmp_path / name).mkdir()
        tenants[name] = {"workspace": str(tmp_path / name), "token_env": f"{name.upper()}_TOKEN"}
    path = _tenants_file(tmp_path, tenants)
    with pytest.raises(ConfigError) as refused:
        load_tenants(path, env={f"{n.upper()}_TOKEN": f"token-of-{n}-" + "x" * 32 for n in pair})
    assert f"tenants {pair[0]!r} and {pair[1]!r}" in str(refused.value)
    assert "same uid" in str(refused.value) and "rename one" in str(refused.value)


async def test_a_tenant_cannot_use_another_tenants_mcp_session(tenancy: Tenancy) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx2.Client(timeout=30) as http:
        opened = http.post(
            tenancy.server.url,
            json=INITIALIZE,
            headers={**headers, "Authorization": f"Bearer {ACME_TOKEN}"},
        )
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
        stolen = http.post(
            tenancy.server.url,
            json=call,
            headers={**headers, "Authorization": f"Bearer {GLOBEX_TOKEN}", "mcp-session-id": sid},
        )
    assert stolen.status_code in (400, 404), stolen.text
    assert "run_code" not in stolen.text


async def test_the_web_console_shows_a_tenant_only_its_own_runs_and_no_shared_metrics(
    tenancy: Tenancy,
) -> None:
    url = tenancy.server.url
    async with http_client(url, token=ACME_TOKEN) as acme:
        ran = await acme.call_tool("run_code", {"code": "print('acme-console-secret')"})
        assert not ran.is_error, _text(ran)
    api = url.removesuffix("/mcp") + "/api/console"

    def console(token: str) -> dict[str, Any]:
        got = httpx2.get(api, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert got.status_code == 200, got.text
        data: dict[str, Any] = got.json()
        return data

    mine, theirs = console(ACME_TOKEN), console(GLOBEX_TOKEN)
    assert any("acme-console-secret" in r["output"] for r in mine["runs"])
    assert "acme-console-secret" not in json.dumps(theirs)
    assert all(r["tenant"] == "globex" for r in theirs["runs"])
    assert theirs["metrics"] == [] and "several tenants" in theirs["metrics_note"]


def test_a_browser_gets_the_console_page_without_a_token_and_its_data_only_with_one(
    tenancy: Tenancy,
) -> None:
    """A browser navigating to /ui sends no bearer token: the page (no data in it) must load,
    then its script asks /api/console with the token typed in, routed to that tenant."""
    base = tenancy.server.url.removesuffix("/mcp")
    for path in ("/ui", "/ui/app.js", "/ui/app.css"):
        got = httpx2.get(base + path, timeout=30)
        assert got.status_code == 200, (path, got.status_code, got.text[:200])
        assert "default-src 'none'" in got.headers["content-security-policy"]
    assert "acme" not in httpx2.get(base + "/ui", timeout=30).text
    for path in ("/api/console", "/ui/../api/console", "/metrics"):
        assert httpx2.get(base + path, timeout=30).status_code == 401, path
    posted = httpx2.post(base + "/ui", content=b"{}", timeout=30)
    assert posted.status_code == 401
    mine = httpx2.get(
        base + "/api/console", headers={"Authorization": f"Bearer {GLOBEX_TOKEN}"}, timeout=30
    )
    assert mine.status_code == 200 and all(r["tenant"] == "globex" for r in mine.json()["runs"])


def test_only_the_console_page_s_exact_paths_by_get_or_head_are_open(tenancy: Tenancy) -> None:
    """Raw request targets (no client-side normalisation): near misses of the page's
    paths, encoded dots and other methods still need a token."""
    import http.client
    from urllib.parse import urlsplit

    where = urlsplit(tenancy.server.url)
    assert where.hostname is not None

    def status(method: str, target: str) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(where.hostname or "", where.port, timeout=30)
        try:
            conn.request(method, target)
            got = conn.getresponse()
            return got.status, got.read()
        finally:
            conn.close()

    assert status("GET", "/ui?x=1")[0] == 200
    head = status("HEAD", "/ui")
    assert head == (200, b"")
    for method, target in [
        ("OPTIONS", "/ui"),
        ("DELETE", "/ui"),
        ("GET", "/ui/"),
        ("GET", "/UI"),
        ("GET", "//ui"),
        ("GET", "/ui/%2e%2e/api/console"),
        ("GET", "/ui%2F..%2Fapi%2Fconsole"),
        ("GET", "/ui/app.js/../../api/console"),
        ("GET", "/ui/../api/console"),
        ("GET", "/api/console?/ui"),
        ("GET", "/api/console#/ui"),
        ("GET", "/metrics"),
    ]:
        assert status(method, target)[0] == 401, (method, target)


async def test_a_tenant_cannot_read_the_process_wide_metrics_of_all_tenants(
    tenancy: Tenancy,
) -> None:
    """/metrics counts every tenant's calls by server and tool: one tenant's token must not
    read what the others did (the console leaves metrics out for the same reason)."""
    async with http_client(tenancy.server.url, token=ACME_TOKEN) as acme:
        ran = await acme.call_tool("run_code", {"code": "tools.fs.list_allowed_directories()"})
        assert not ran.is_error, _text(ran)
    url = tenancy.server.url.removesuffix("/mcp") + "/metrics"
    for token in (GLOBEX_TOKEN, ACME_TOKEN):
        got = httpx2.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert got.status_code == 403, got.text[:300]
        assert "list_allowed_directories" not in got.text
        assert "several tenants" in got.json()["error_description"]


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-" + "x" * 40, f"Basic {ACME_TOKEN}"])
def test_without_a_tenants_token_the_answer_is_invalid_token_without_oauth_metadata(
    tenancy: Tenancy, authorization: str | None
) -> None:
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx2.post(tenancy.server.url, json=body, headers=headers, timeout=10)
    assert response.status_code == 401
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
    assert "resource_metadata" not in challenge
    assert response.json()["error"] == "invalid_token"
    metadata = tenancy.server.url.removesuffix("/mcp") + "/.well-known/oauth-protected-resource"
    assert httpx2.get(metadata, timeout=10).status_code == 401  # no OAuth: nothing to discover
    assert tenancy.server.health()["status"] == "ok"


def test_no_token_reaches_the_servers_log(tenancy: Tenancy) -> None:
    httpx2.post(tenancy.server.url, json={}, headers={"Authorization": "Bearer " + "z" * 30})
    log = "".join(tenancy.server.lines)
    assert "serving MCP on" in log
    for secret in (ACME_TOKEN, GLOBEX_TOKEN, "z" * 30):
        assert secret not in log


def _tenants_file(tmp_path: Path, tenants: dict[str, Any]) -> Path:
    path = tmp_path / "tenants.json"
    path.write_text(json.dumps({"tenants": tenants}))
    return path


def test_a_tenants_secrets_come_from_its_own_env_file_never_the_servers_environment(
    tmp_path: Path,
) -> None:
    for name, secret in (("acme", "ACME_API_KEY"), ("globex", "GLOBEX_API_KEY")):
        ws = tmp_path / name
        ws.mkdir()
        server = {"command": "true", "env": {"KEY": "${" + secret + "}"}}
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"api": server}}))
        (tmp_path / f"{name}.env").write_text(f"{secret}={name}-key\n")
    # globex's mcp.json names acme's secret too: it must not resolve.
    (tmp_path / "globex" / "mcp.json").write_text(
        json.dumps({"mcpServers": {"api": {"command": "true", "env": {"KEY": "${ACME_API_KEY}"}}}})
    )
    spec = {
        name: {
            "workspace": str(tmp_path / name),
            "token_env": f"{name.upper()}_TOKEN",
            "env_file": str(tmp_path / f"{name}.env"),
        }
        for name in ("acme", "globex")
    }
    server_env = {"ACME_TOKEN": ACME_TOKEN, "GLOBEX_TOKEN": GLOBEX_TOKEN, "ACME_API_KEY": "leak"}
    tenants = load_tenants(_tenants_file(tmp_path, spec), env=server_env)
    acme_env = tenants.environment("acme")
    assert acme_env["ACME_API_KEY"] == "acme-key"
    assert ACME_TOKEN not in acme_env.values() and GLOBEX_TOKEN not in acme_env.values()
    acme = Workspace.open(tmp_path / "acme", env=acme_env, tenant="acme")
    assert acme.enabled_servers["api"].env["KEY"] == "acme-key"  # type: ignore[union-attr]
    assert acme.settings.tenant == "acme"
    with pytest.raises(ConfigError, match="ACME_API_KEY"):
        Workspace.open(tmp_path / "globex", env=tenants.environment("globex"), tenant="globex")


def test_a_files_directory_that_is_a_symlink_is_checked_where_it_leads(tmp_path: Path) -> None:
    """Tenant a's files/ links to a larger disk: a token file, or tenant b's workspace,
    there is as readable (and writable) by a's code as one inside a/files."""
    disk = tmp_path / "disk"
    (disk / "b").mkdir(parents=True)
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "files").symlink_to(disk)
    secret = disk / "b.token"
    secret.write_text(GLOBEX_TOKEN)
    one = {"workspace": str(tmp_path / "a"), "token_env": "A_TOKEN"}
    by_file = {"workspace": str(tmp_path / "b"), "token_file": str(secret)}
    with pytest.raises(ConfigError, match=r"token_file .* is under tenant .a..s files/"):
        load_tenants(_tenants_file(tmp_path, {"a": one, "b": by_file}), env={"A_TOKEN": ACME_TOKEN})
    inside = {"workspace": str(disk / "b"), "token_env": "B_TOKEN"}
    with pytest.raises(ConfigError, match=r"tenant .b..s workspace .* is inside tenant .a."):
        load_tenants(
            _tenants_file(tmp_path, {"a": one, "b": inside}),
            env={"A_TOKEN": ACME_TOKEN, "B_TOKEN": GLOBEX_TOKEN},
        )


def test_a_bad_tenants_file_is_refused_with_the_reason(tmp_path: Path) -> None:
    one = {"workspace": str(tmp_path / "a"), "token_env": "A_TOKEN"}
    two = {"workspace": str(tmp_path / "b"), "token_env": "B_TOKEN"}
    path = _tenants_file(tmp_path, {"a": one, "b": two})
    with pytest.raises(ConfigError, match="'a' and 'b' have the same token"):
        load_tenants(path, env={"A_TOKEN": ACME_TOKEN, "B_TOKEN": ACME_TOKEN})
    with pytest.raises(ConfigError, match="shorter than 24 characters"):
        load_tenants(path, env={"A_TOKEN": "short", "B_TOKEN": GLOBEX_TOKEN})
    with pytest.raises(ConfigError, match="B_TOKEN is unset"):
        load_tenants(path, env={"A_TOKEN": ACME_TOKEN})
    shared = _tenants_file(tmp_path, {"a": one, "b": {**two, "workspace": one["workspace"]}})
    with pytest.raises(ConfigError, match="two tenants share one workspace"):
        load_tenants(shared, env={"A_TOKEN": ACME_TOKEN, "B_TOKEN": GLOBEX_TOKEN})
    inside = {**two, "workspace": str(tmp_path / "a" / "files" / "b")}
    nested = _tenants_file(tmp_path, {"a": one, "b": inside})
    with pytest.raises(ConfigError, match=r"tenant .b..s workspace .* is inside tenant .a."):
        load_tenants(nested, env={"A_TOKEN": ACME_TOKEN, "B_TOKEN": GLOBEX_TOKEN})
    secret = tmp_path / "a" / "files" / "b.token"
    secret.parent.mkdir(parents=True)
    secret.write_text(GLOBEX_TOKEN)
    readable = _tenants_file(
        tmp_path, {"a": one, "b": {"workspace": two["workspace"], "token_file": str(secret)}}
    )
    with pytest.raises(ConfigError, match=r"token_file .* is under tenant .a..s files/"):
        load_tenants(readable, env={"A_TOKEN": ACME_TOKEN})
    bad = _tenants_file(tmp_path, {"A B": one})
    with pytest.raises(ConfigError, match=r"tenants: Value error, tenant name 'A B'"):
        load_tenants(bad, env={"A_TOKEN": ACME_TOKEN})
    newline = _tenants_file(tmp_path, {"a\n": one})  # "$" would let a trailing newline in
    with pytest.raises(ConfigError, match=r"tenant name 'a\\n'"):
        load_tenants(newline, env={"A_TOKEN": ACME_TOKEN})


async def test_a_tenants_server_given_a_directory_above_the_secrets_reads_them_empty() -> None:
    """The tenants file, token files and env files of serve --tenants are shown empty to
    every tenant's servers, even one given the directory that holds them all."""
    if not (FS_SERVER / "index.js").exists():
        pytest.skip(f"the filesystem server is missing: {INSTALL_HINT}")
    root = Path(tempfile.mkdtemp(prefix="codemode-tenant-secrets-"))
    try:
        secrets = root / "secrets"
        secrets.mkdir()
        (secrets / "acme.token").write_text(ACME_TOKEN)
        (secrets / "acme.env").write_text("API_KEY=acme-env-secret\n")
        (secrets / "notes.txt").write_text("public notes")
        ws = root / "acme"
        (ws / "files").mkdir(parents=True)
        fs = {"command": "node", "args": [str(FS_SERVER / "index.js"), str(root)]}
        (ws / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": fs}}))
        spec = {
            "workspace": str(ws),
            "token_file": str(secrets / "acme.token"),
            "env_file": str(secrets / "acme.env"),
        }
        (secrets / "tenants.json").write_text(json.dumps({"tenants": {"acme": spec}}))
        for path in root.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)  # only the jail hides them
        root.chmod(0o755)
        server = start_http_server(
            None, "--tenants", str(secrets / "tenants.json"), token=None, executor="sandbox"
        )
        code = f"""
def attempt(name):
    try:
        return str(tools.fs.read_text_file(path={str(secrets)!r} + '/' + name))
    except Exception as e:
        return "refused: " + str(e)
[attempt(n) for n in ('acme.token', 'acme.env', 'tenants.json', 'notes.txt')]
"""
        try:
            async with http_client(server.url, token=ACME_TOKEN) as client:
                result = await client.call_tool("run_code", {"code": code})
        finally:
            server.stop()
        said = _text(result)
        assert not result.is_error, said
        assert "public notes" in said, said
        assert said.count("'content': ''") == 3, said  # shown as empty files
        for secret in (ACME_TOKEN, "acme-env-secret", '"tenants"'):
            assert secret not in said
    finally:
        shutil.rmtree(root, ignore_errors=True)
