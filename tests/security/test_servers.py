"""Upstream servers on the host are not handed a race by the sandbox.

The real npm filesystem server is given the workspace's ``files/`` directory. The
attacker's sandboxed code swaps paths there for symlinks to root-only canaries in a loop
while it asks the server to read and write through them, plants FIFOs, and the host plants
a device node. A bystander session on the same server must keep working throughout.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode import Session
from codemode.config import StdioServerConfig, parse_servers
from codemode.execution.doctor import server_isolation_lines
from codemode.execution.sandbox import SandboxExecutor
from codemode.isolation import acl
from codemode.isolation.servers import HOMES_ROOT, Isolation, ServerLaunch, plan
from codemode.isolation.uids import SANDBOX_UID, SERVERS_UID
from codemode.tools.sources.mcp import MCPSource
from codemode.workspace import Workspace

from .conftest import SUITE_LIMITS

pytestmark = [pytest.mark.anyio, pytest.mark.security]

REPO = Path(__file__).resolve().parents[2]
FS_SERVER = REPO / ".ci/node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
GIT_PYTHON = REPO / ".ci/venvs/mcp-server-git/bin/python"
EDGE = REPO / "tests/fixtures/servers/edge_server.py"
ROOT = os.geteuid() == 0


def _need(path: Path) -> None:
    if not path.exists():
        pytest.fail(f"{path} is missing: run .ci/install-test-servers.sh")


@dataclass
class Canaries:
    secret: str
    file: str
    dir: str


@pytest.fixture
def canaries() -> Iterator[Canaries]:
    """A root-only file and a root-only directory (in /root when the tests run as root)."""
    home = os.path.expanduser("~")
    tag = uuid.uuid4().hex
    secret = f"canary-{tag}"
    path = os.path.join(home, f".codemode-canary-{tag}")
    with open(path, "w") as fh:
        fh.write(secret)
    os.chmod(path, 0o600)
    folder = os.path.join(home, f".codemode-canary-dir-{tag}")
    os.mkdir(folder, 0o700)
    yield Canaries(secret, path, folder)
    os.unlink(path)
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Arena:
    base: Path
    files: str
    attacker: Session
    bystander: Session

    async def calm(self) -> None:
        """The bystander lists the directory through the same server, and it answers."""
        r = await self.bystander.run(f"str(tools.fs.list_directory(path={self.files!r}))", 60)
        assert r.is_ok and "readme.txt" in str(r.value), r.to_text()


def _workspace(root: Path, timeout: float = 60.0) -> tuple[Path, str]:
    _need(FS_SERVER)
    base = root / "base"
    files = base / "files"
    files.mkdir(parents=True)
    (files / "readme.txt").write_text("hello")
    server = {"command": "node", "args": [str(FS_SERVER), str(files)], "timeout": timeout}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": server}}))
    return base, str(files.resolve())


@pytest.fixture
async def arena(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Arena]:
    root = Path(tmp_path_factory.mktemp("srv", numbered=True))
    base, files = _workspace(root, timeout=4.0)
    ws = Workspace.open(base)

    def sandbox() -> SandboxExecutor:
        return SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)

    attacker = Session.from_base(base, executor=sandbox())
    bystander = Session.from_base(base, executor=sandbox())
    await asyncio.gather(attacker.start(), bystander.start())
    try:
        yield Arena(base, files, attacker, bystander)
    finally:
        await asyncio.gather(attacker.close(), bystander.close())
        await ws.registry().aclose()


# -- symlink races --------------------------------------------------------------------------

TOGGLE = r"""
import os, threading
stop = threading.Event()
def toggle(name, real, target):
    while not stop.is_set():
        try:
            real()
            os.symlink(target, name + '.lnk')
            os.replace(name + '.lnk', name)
        except OSError:
            pass
"""


async def test_a_symlink_swapped_in_a_loop_never_reads_a_root_only_file(
    arena: Arena, canaries: Canaries
) -> None:
    target = f"{arena.files}/x"
    code = (
        TOGGLE + "def real():\n"
        "    open('x.tmp', 'w').write('decoy')\n    os.replace('x.tmp', 'x')\n"
        f"t = threading.Thread(target=toggle, args=('x', real, {canaries.file!r}))\n"
        "t.start()\nhits, answers = [], 0\n"
        "for i in range(300):\n"
        "    try:\n"
        f"        text = str(tools.fs.read_text_file(path={target!r}))\n"
        "        answers += 1\n"
        f"        if {canaries.secret!r} in text:\n            hits.append(i)\n"
        "    except Exception:\n        pass\n"
        "stop.set(); t.join()\n[hits, answers]"
    )
    r = await arena.attacker.run(code, timeout=300)
    assert r.is_ok, r.to_text()
    hits, answers = r.value
    assert hits == [], f"the root-only canary was read {len(hits)} times"
    assert answers > 0  # the race ran: the decoy was read between the swaps
    await arena.calm()


async def test_a_directory_swapped_for_a_symlink_never_leads_a_write_outside(
    arena: Arena, canaries: Canaries
) -> None:
    target = f"{arena.files}/d/pwned.txt"
    code = (
        TOGGLE + "import shutil\n"
        "def real():\n"
        "    shutil.rmtree('d.tmp', ignore_errors=True)\n    os.mkdir('d.tmp')\n"
        "    os.replace('d.tmp', 'd') if not os.path.islink('d') else (os.unlink('d'),"
        " os.rename('d.tmp', 'd'))\n"
        f"t = threading.Thread(target=toggle, args=('d', real, {canaries.dir!r}))\n"
        "t.start()\n"
        "for i in range(300):\n"
        "    try:\n"
        f"        tools.fs.write_file(path={target!r}, content='pwned ' + str(i))\n"
        "    except Exception:\n        pass\n"
        "stop.set(); t.join()\n'done'"
    )
    r = await arena.attacker.run(code, timeout=300)
    assert r.is_ok, r.to_text()
    assert os.listdir(canaries.dir) == [], "the server wrote into a root-only directory"
    await arena.calm()


async def test_symlinks_to_host_secrets_are_dead_ends_for_the_server(
    arena: Arena, canaries: Canaries
) -> None:
    """Even without a race, a link the server follows cannot leave its jail."""
    for name, dest in (("shadow", "/etc/shadow"), ("canary", canaries.file), ("root", "/root")):
        os.symlink(dest, os.path.join(arena.files, name))
    code = (
        "out = {}\n"
        "for name in ('shadow', 'canary', 'root/.bashrc'):\n"
        "    try:\n"
        f"        out[name] = str(tools.fs.read_text_file(path={arena.files!r} + '/' + name))\n"
        "    except Exception as e:\n        out[name] = 'refused: ' + type(e).__name__\n"
        "out"
    )
    r = await arena.attacker.run(code, timeout=60)
    assert r.is_ok, r.to_text()
    for name, outcome in r.value.items():
        assert outcome.startswith("refused"), f"{name}: {outcome[:200]}"
        assert canaries.secret not in outcome


# -- wedges -----------------------------------------------------------------------------------


async def test_fifos_planted_by_the_sandbox_time_out_and_never_wedge_the_server(
    arena: Arena,
) -> None:
    # more concurrent FIFO reads than node has threadpool threads (4)
    code = (
        "import os\nfor i in range(6):\n    os.mkfifo(f'pipe{i}')\n"
        "async def one(i):\n"
        "    try:\n"
        f"        await tools.fs.read_text_file.aio(path={arena.files!r} + f'/pipe{{i}}')\n"
        "        return 'read'\n"
        "    except Exception as e:\n        return type(e).__name__\n"
        "import asyncio\nawait asyncio.gather(*(one(i) for i in range(6)))"
    )
    r = await arena.attacker.run(code, timeout=120)
    assert r.is_ok, r.to_text()
    assert all(v != "read" for v in r.value), r.value
    await arena.calm()  # the next caller gets a working server at once
    r = await arena.bystander.run(
        f"tools.fs.read_text_file(path={arena.files!r} + '/readme.txt')", timeout=60
    )
    assert r.is_ok and "hello" in str(r.value), r.to_text()


@pytest.mark.skipif(not ROOT, reason="only root can make a device node on the host")
async def test_a_device_node_in_the_workspace_cannot_be_opened_by_the_server(
    arena: Arena,
) -> None:
    os.mknod(os.path.join(arena.files, "zero"), stat.S_IFCHR | 0o666, os.makedev(1, 5))
    code = (
        "try:\n"
        f"    tools.fs.read_text_file(path={arena.files!r} + '/zero')\n    out = 'read'\n"
        "except Exception as e:\n    out = type(e).__name__ + ': ' + str(e)\nout"
    )
    r = await arena.attacker.run(code, timeout=60)
    assert r.is_ok, r.to_text()
    assert "ToolTimeout" not in r.value and r.value != "read", r.value
    assert "EACCES" in r.value or "permission" in r.value.lower()
    await arena.calm()


# -- uid, HOME, git ---------------------------------------------------------------------------


@pytest.mark.skipif(not ROOT, reason="the uid switch happens when codemode runs as root")
async def test_a_server_runs_as_its_own_uid_with_a_private_home(tmp_path: Path) -> None:
    cfg = parse_servers(
        {"mcpServers": {"edge": {"command": sys.executable, "args": [str(EDGE)]}}}, env={}
    )["edge"]
    src = MCPSource("edge", cfg, isolation=Isolation(workspace=tmp_path))
    try:
        who = (await src.call_tool("whoami", {"variable": "HOME"})).structured
    finally:
        await src.aclose()
    assert who is not None
    assert who["uid"] == SERVERS_UID != SANDBOX_UID
    assert who["value"].startswith(HOMES_ROOT) and os.stat(who["value"]).st_uid == SERVERS_UID


@pytest.mark.skipif(not ROOT, reason="the uid switch happens when codemode runs as root")
async def test_files_the_server_writes_belong_to_it_and_stay_shared_with_the_sandbox(
    arena: Arena,
) -> None:
    r = await arena.attacker.run(
        f"tools.fs.write_file(path={arena.files!r} + '/by-server.txt', content='s')\n"
        "open('by-server.txt', 'a').write('+sandbox')\nopen('by-server.txt').read()"
    )
    assert r.is_ok and r.value == "s+sandbox", r.to_text()
    assert os.stat(os.path.join(arena.files, "by-server.txt")).st_uid == SERVERS_UID
    assert {SERVERS_UID, SANDBOX_UID} <= set(acl.users(arena.files, default=True))


@pytest.mark.skipif(not ROOT, reason="safe.directory matters once the server's uid differs")
async def test_the_git_server_works_on_a_repository_the_sandbox_owns(tmp_path: Path) -> None:
    _need(GIT_PYTHON)
    base, files = _workspace(tmp_path)
    repo = Path(files) / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    for path in [repo, *repo.rglob("*")]:
        os.lchown(path, SANDBOX_UID, SANDBOX_UID)  # as if the sandbox had made it
    args = ["-m", "mcp_server_git", "--repository", str(repo)]
    cfg = parse_servers(
        {"mcpServers": {"git": {"command": str(GIT_PYTHON), "args": args}}}, env={}
    )["git"]
    src = MCPSource("git", cfg, isolation=Isolation(workspace=base, files=Path(files)))
    try:
        result = await src.call_tool("git_status", {"repo_path": str(repo)})
    finally:
        await src.aclose()
    text = " ".join(getattr(c, "text", "") for c in result.content)
    assert not result.is_error, text
    assert "dubious ownership" not in text


# -- the opt-out is loud ------------------------------------------------------------------------


async def test_isolation_none_is_logged_as_a_warning_and_shown_by_doctor(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    base = tmp_path / "base"
    base.mkdir()
    raw = {"command": sys.executable, "args": [str(EDGE)], "isolation": "none"}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"bare": raw}}))
    ws = Workspace.open(base)
    with caplog.at_level("WARNING"):
        launch = plan(ws.servers["bare"], Isolation(workspace=base))  # type: ignore[arg-type]
    assert not launch.isolated
    assert any("WITHOUT isolation" in rec.getMessage() for rec in caplog.records)
    lines = server_isolation_lines(ws)
    [line] = [p for p in lines if "bare" in p.name]
    assert not line.active and "NOT isolated" in line.detail


async def test_doctor_shows_how_each_server_is_isolated(tmp_path: Path) -> None:
    _need(FS_SERVER)
    base, _ = _workspace(tmp_path)
    [line] = [p for p in server_isolation_lines(Workspace.open(base)) if "fs" in p.name]
    assert line.active and "no network" in line.detail and "files (rw)" in line.detail


@pytest.mark.parametrize("given", ["workspace", "parent"])
async def test_a_server_given_the_workspace_or_above_sees_only_its_files(
    tmp_path: Path, given: str
) -> None:
    """Given the workspace (or $HOME holding ~/.codemode), the server the code drives must
    not read mcp.json nor write config.json ("executor": "inprocess" would end the sandbox
    at the next start)."""
    _need(FS_SERVER)
    root = tmp_path / "root"
    base = root / "ws"
    (base / "files").mkdir(parents=True)
    root.chmod(0o755)
    tmp_path.chmod(0o755)
    (base / "files" / "readme.txt").write_text("hello")
    path = base if given == "workspace" else root
    server = {"command": "node", "args": [str(FS_SERVER), str(path)], "timeout": 30}
    servers = json.dumps({"mcpServers": {"fs": server}})
    (base / "mcp.json").write_text(servers)
    ws = Workspace.open(base)
    executor = SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)
    attempt = """
def attempt(call, **kw):
    try:
        return str(call(**kw))
    except Exception as e:
        return "refused: " + str(e)
[attempt(tools.fs.read_text_file, path=WS + '/mcp.json'),
 attempt(tools.fs.write_file, path=WS + '/config.json', content='{"executor": "inprocess"}'),
 attempt(tools.fs.list_directory, path=WS),
 attempt(tools.fs.read_text_file, path=WS + '/files/readme.txt')]
"""
    try:
        async with Session.from_base(base, executor=executor) as s:
            r = await s.run(f"WS = {str(base.resolve())!r}\n" + attempt, 120)
    finally:
        await ws.registry().aclose()
    assert r.is_ok, r.to_text()
    read, write, listing, own = r.value
    assert read.startswith("refused") and "mcpServers" not in read
    assert write.startswith("refused")
    assert "mcp.json" not in listing and "files" in listing
    assert "hello" in own
    assert not (base / "config.json").exists()
    assert (base / "mcp.json").read_text() == servers
    cfg = parse_servers(json.loads(servers), env={})["fs"]
    assert isinstance(cfg, StdioServerConfig)
    iso = Isolation(workspace=base, files=base / "files")
    assert f"shown empty: {base.resolve()}" in plan(cfg, iso, dry_run=True).summary  # doctor


async def test_a_server_given_home_cannot_read_codemodes_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """~/.config/codemode holds the audit and privacy keys: a server given $HOME (the
    agent's code drives it) sees that directory empty."""
    _need(FS_SERVER)
    home = tmp_path / "home"
    keys = home / ".config" / "codemode"
    keys.mkdir(parents=True)
    (keys / "audit.key").write_text("secret-audit-key")
    base = home / "ws"
    (base / "files").mkdir(parents=True)
    for d in (tmp_path, home, home / ".config"):
        d.chmod(0o755)
    keys.chmod(0o755)
    (keys / "audit.key").chmod(0o644)  # readable by the server's uid: only the jail hides it
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    server = {"command": "node", "args": [str(FS_SERVER), str(home)], "timeout": 30}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": server}}))
    ws = Workspace.open(base)
    executor = SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)
    code = f"""
try:
    got = str(tools.fs.read_text_file(path={str(keys / "audit.key")!r}))
except Exception as e:
    got = "refused: " + str(e)
got
"""
    try:
        async with Session.from_base(base, executor=executor) as s:
            r = await s.run(code, 120)
    finally:
        await ws.registry().aclose()
    assert r.is_ok, r.to_text()
    assert r.value.startswith("refused") and "secret-audit-key" not in r.value


async def test_a_tenants_server_given_a_directory_above_the_workspaces_sees_only_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under serve --tenants (which names every workspace with keep_private), acme's server
    given /srv/codemode shows globex's workspace empty."""
    from codemode.isolation import servers as isolation_servers

    _need(FS_SERVER)
    monkeypatch.setattr(isolation_servers, "_PRIVATE", set())
    srv = tmp_path / "srv"
    acme, globex = srv / "acme", srv / "globex"
    for root in (acme, globex):
        (root / "files").mkdir(parents=True)
        (root / "files" / "own.txt").write_text(f"{root.name} data")
    for d in (tmp_path, srv, acme, globex):
        d.chmod(0o755)
    server = {"command": "node", "args": [str(FS_SERVER), str(srv)], "timeout": 30}
    (acme / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": server}}))
    isolation_servers.keep_private([acme, globex])  # what serve_tenants does
    ws = Workspace.open(acme, tenant="acme")
    executor = SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)
    code = f"""
def attempt(path):
    try:
        return str(tools.fs.read_text_file(path=path))
    except Exception as e:
        return "refused: " + str(e)
[attempt({str(globex / "files" / "own.txt")!r}), attempt({str(acme / "files" / "own.txt")!r})]
"""
    try:
        async with Session.from_base(acme, executor=executor) as s:
            r = await s.run(code, 120)
    finally:
        await ws.registry().aclose()
    assert r.is_ok, r.to_text()
    theirs, mine = r.value
    assert theirs.startswith("refused") and "globex data" not in theirs
    assert "acme data" in mine


def _run_jailed(
    server: dict[str, object] | StdioServerConfig,
    iso: Isolation,
    planned: Callable[[ServerLaunch], None] = lambda launch: None,
) -> subprocess.CompletedProcess[str]:
    """Run one stdio server (an ``mcp.json`` entry or its config) to its end in the jail
    codemode plans for it; it must start jailed and exit 0. ``planned`` is given the plan
    between the plan and the start."""
    cfg = (
        server
        if isinstance(server, StdioServerConfig)
        else parse_servers({"mcpServers": {"s": server}}, env={})["s"]
    )
    assert isinstance(cfg, StdioServerConfig)
    launch = plan(cfg, iso)
    planned(launch)
    try:
        r = subprocess.run(
            [launch.command, *launch.args], env=launch.env, cwd=launch.cwd,
            pass_fds=launch.pass_fds, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        launch.cleanup()
    assert launch.isolated and r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("given", ["read-only", "writable"])
def test_a_server_starts_before_codemodes_own_directories_exist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """The jail shows ~/.config/codemode and ~/.local/state/codemode empty by mounting over
    them. Missing, bwrap had to create them in the server's view of $HOME, as the server's
    uid: read-only, the server never started ("Can't mkdir ... Read-only file system");
    writable, the directory codemode later keeps its keys in was the server's. codemode
    makes them first (its own, 0700)."""
    home = tmp_path / "home"
    files = home / "ws" / "files"
    files.mkdir(parents=True)
    (files / "notes.txt").write_text("visible")
    for d in (tmp_path, home, home / "ws"):
        d.chmod(0o755)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    server: dict[str, object] = {"command": "ls", "args": [str(files)]}
    if given == "read-only":
        server["read_only_paths"] = [str(home)]
    else:
        server["args"] = [str(home), str(files)]
    iso = Isolation(workspace=home / "ws", files=files, homes_root=str(tmp_path / "homes"))
    r = _run_jailed(server, iso)
    assert "notes.txt" in r.stdout
    for own in (home / ".config" / "codemode", home / ".local" / "state" / "codemode"):
        st = own.stat()
        assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700


@pytest.mark.skipif(not ROOT, reason="servers get a uid of their own only under root")
@pytest.mark.parametrize("acl_for", [None, "another uid", "the server", "the server, later"])
def test_a_server_given_home_starts_when_codemodes_keys_sit_in_a_directory_it_cannot_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, acl_for: str | None
) -> None:
    """~/.config is often 0700. bwrap, as the server's uid, could not reach
    ~/.config/codemode to show it empty ("Can't mkdir ... Permission denied"), and a server
    given $HOME never started. ~/.config itself is shown empty then: out of reach when the
    server starts, it may not stay so (codemode gives another server of the same uid, given
    ~/.config, an ACL on it: the first one read the keys). An ACL for another uid does not
    put it within reach; one for the server's own uid does, and then the keys are covered."""
    home = tmp_path / "home"
    keys = home / ".config" / "codemode"
    keys.mkdir(parents=True)
    (keys / "audit.key").write_text("secret-audit-key")
    (keys / "audit.key").chmod(0o644)
    files = home / "ws" / "files"
    files.mkdir(parents=True)
    for d in (tmp_path, home, home / "ws", keys):
        d.chmod(0o755)
    (home / ".config").chmod(0o700)

    def grant() -> None:
        acl.grant(str(home / ".config"), [4242 if acl_for == "another uid" else SERVERS_UID])

    if acl_for in ("another uid", "the server"):
        grant()
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    script = 'cat "$0/.config/codemode/audit.key" 2>&1; ls "$0"'
    server: dict[str, object] = {"command": "sh", "args": ["-c", script, str(home)]}
    iso = Isolation(workspace=home / "ws", files=files, homes_root=str(tmp_path / "homes"))
    r = _run_jailed(server, iso, lambda _: grant() if acl_for == "the server, later" else None)
    assert "secret-audit-key" not in r.stdout and "ws" in r.stdout.split()
    assert "No such file" in r.stdout, r.stdout


def test_a_mount_given_below_a_hidden_workspace_keeps_its_own_flags(tmp_path: Path) -> None:
    """$HOME read-only and files/out writable: the workspace's empty tmpfs covered the
    writable mount, and files/ shown again was read-only like $HOME: the server could not
    write where its configuration said it may."""
    home = tmp_path / "home"
    out = home / "ws" / "files" / "out"
    out.mkdir(parents=True)
    for d in (tmp_path, home, home / "ws", home / "ws" / "files"):
        d.chmod(0o755)
    server: dict[str, object] = {
        "command": "touch",
        "args": [str(out / "made")],
        "read_only_paths": [str(home)],
    }
    files = home / "ws" / "files"
    iso = Isolation(workspace=home / "ws", files=files, homes_root=str(tmp_path / "homes"))
    _run_jailed(server, iso)
    assert (out / "made").exists()


async def test_keys_and_token_files_configured_anywhere_are_shown_empty_to_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """audit.key_file, privacy.vault.key_file, an absolute audit.path and a tenant's token
    file kept in /etc/codemode-like directories: a server given the directory above them
    reads empty files there (and an empty log directory), and doctor names them."""
    from codemode.isolation import servers as isolation_servers

    _need(FS_SERVER)
    monkeypatch.setattr(isolation_servers, "_PRIVATE", set())
    etc = tmp_path / "etc"
    (etc / "logs").mkdir(parents=True)
    secrets = {
        "audit.key": "secret-audit-key-0123456789",
        "privacy.key": "secret-privacy-key",
        "acme.token": "secret-tenant-token",
    }
    for name, text in secrets.items():
        (etc / name).write_text(text)
        (etc / name).chmod(0o644)  # readable by the server's uid: only the jail hides them
    (etc / "logs" / "audit.jsonl").write_text("secret-log-line")
    (etc / "logs" / "audit.jsonl").chmod(0o644)
    (etc / "notes.txt").write_text("public notes")
    (etc / "notes.txt").chmod(0o644)
    for d in (tmp_path, etc, etc / "logs"):
        d.chmod(0o755)
    base = tmp_path / "ws"
    (base / "files").mkdir(parents=True)
    config = {
        "audit": {"key_file": str(etc / "audit.key"), "path": str(etc / "logs" / "audit.jsonl")},
        "privacy": {"vault": {"key_file": str(etc / "privacy.key")}},
    }
    (base / "config.json").write_text(json.dumps(config))
    server = {"command": "node", "args": [str(FS_SERVER), str(etc)], "timeout": 30}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": server}}))
    isolation_servers.keep_private([etc / "acme.token"])  # what serve --tenants does
    ws = Workspace.open(base)
    executor = SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)
    code = f"""
def attempt(path):
    try:
        return str(tools.fs.read_text_file(path=path))
    except Exception as e:
        return "refused: " + str(e)
ETC = {str(etc.resolve())!r}
[attempt(ETC + '/' + n) for n in ('audit.key', 'privacy.key', 'acme.token', 'notes.txt')] + [
    attempt(ETC + '/logs/audit.jsonl'), str(tools.fs.list_directory(path=ETC + '/logs'))]
"""
    try:
        async with Session.from_base(base, executor=executor) as s:
            r = await s.run(code, 120)
    finally:
        await ws.registry().aclose()
    assert r.is_ok, r.to_text()
    *keys, notes, log_line, listing = r.value
    for got in [*keys, log_line]:
        assert not any(secret in got for secret in [*secrets.values(), "secret-log-line"]), got
    assert "public notes" in notes
    assert all("'content': ''" in got for got in keys), keys  # shown as empty files
    assert "audit.jsonl" not in listing
    assert (etc / "audit.key").read_text() == secrets["audit.key"]
    [line] = [p for p in server_isolation_lines(ws) if "fs" in p.name]  # codemode doctor
    for name in ("audit.key", "privacy.key", "acme.token", "logs"):
        assert str((etc / name).resolve()) in line.detail.split("shown empty: ")[1]


async def test_an_audit_log_directory_and_keys_made_at_first_use_exist_before_a_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An absolute audit.path whose directory does not exist yet, a custom head file and a
    privacy key file made at first use: a server given the directory above them starts
    before the first audit write. Missing, they could not be hidden: the server made
    ``logs/`` as its own and wrote a forged log there, which codemode then appended to.
    codemode makes them first (the directory 0700), so the jail shows them empty."""
    from codemode.audit.config import AuditConfig
    from codemode.audit.keys import load_keys
    from codemode.audit.verify import verify
    from codemode.isolation import servers as isolation_servers

    _need(FS_SERVER)
    monkeypatch.setattr(isolation_servers, "_PRIVATE", set())
    monkeypatch.delenv("CODEMODE_PRIVACY_KEY", raising=False)
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "audit.key").write_text("secret-audit-key-0123456789")
    for d in (tmp_path, etc):
        d.chmod(0o755)
    base = tmp_path / "ws"
    (base / "files").mkdir(parents=True)
    audit = {
        "enabled": True,
        "key_file": str(etc / "audit.key"),
        "path": str(etc / "logs" / "audit.jsonl"),
        "head_file": str(etc / "heads" / "audit.head"),
    }
    privacy = {"enabled": True, "vault": {"key_file": str(etc / "privacy.key")}}
    (base / "config.json").write_text(json.dumps({"audit": audit, "privacy": privacy}))
    server = {"command": "node", "args": [str(FS_SERVER), str(etc)], "timeout": 30}
    (base / "mcp.json").write_text(json.dumps({"mcpServers": {"fs": server}}))
    ws = Workspace.open(base)
    executor = SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)
    code = f"""
def attempt(call, **kw):
    try:
        return str(call(**kw))
    except Exception as e:
        return "refused: " + str(e)
ETC = {str(etc.resolve())!r}
[attempt(tools.fs.create_directory, path=ETC + '/logs'),
 attempt(tools.fs.write_file, path=ETC + '/logs/audit.jsonl', content='forged-line'),
 attempt(tools.fs.write_file, path=ETC + '/heads/audit.head', content='999 forged 0 0 1'),
 attempt(tools.fs.read_text_file, path=ETC + '/privacy.key'),
 attempt(tools.fs.list_directory, path=ETC + '/logs')]
"""
    try:
        await ws.registry().connect_all()  # as serve does at start: before any audit write
        assert not (etc / "logs").exists() or (etc / "logs").stat().st_uid == os.geteuid()
        async with Session.from_base(base, executor=executor) as s:
            r = await s.run(code, 120)
    finally:
        await ws.registry().aclose()
    assert r.is_ok, r.to_text()
    _, forged_log, forged_head, key, listing = r.value
    assert forged_log.startswith("refused") and forged_head.startswith("refused"), r.value
    assert "'content': ''" in key and "audit.jsonl" not in listing, r.value
    st = (etc / "logs").stat()
    assert st.st_uid == os.geteuid() and stat.S_IMODE(st.st_mode) == 0o700
    assert (etc / "privacy.key").stat().st_uid == os.geteuid()
    log_text = (etc / "logs" / "audit.jsonl").read_text()
    assert all(line.startswith('{"') for line in log_text.splitlines()), log_text[:200]
    cfg = AuditConfig.model_validate(audit)
    report = verify(etc / "logs" / "audit.jsonl", etc / "heads" / "audit.head", load_keys(cfg))
    assert report.ok, report.problems
