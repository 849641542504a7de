"""Links planted where less trusted uids write are never followed by codemode (root).

A server runs as its own uid with a private ``HOME`` it owns, which codemode prepares
before each start; the sandbox's uid owns what is in ``files/``, where ``mcp.json`` may point
a server. Any server that can run a command (a shell tool, a build tool) lets the agent's
code plant links in its home, and the code plants links in ``files/`` itself. Root
following one would create and hand to the server's uid any host file
(``/etc/ld.so.preload``: root), or mount root's files into the server's jail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from codemode.config import StdioServerConfig, parse_servers
from codemode.errors import ServerUnavailable
from codemode.isolation import acl
from codemode.isolation.servers import Isolation, plan
from codemode.isolation.uids import SANDBOX_UID, SERVERS_UID
from codemode.privacy.sinks import touches_workspace
from codemode.tools.sources.mcp import MCPSource

pytestmark = [pytest.mark.anyio, pytest.mark.security]

EDGE = Path(__file__).resolve().parents[2] / "tests/fixtures/servers/edge_server.py"


async def _home_of_a_started_server(workspace: Path) -> str:
    cfg = parse_servers(
        {"mcpServers": {"edge": {"command": sys.executable, "args": [str(EDGE)]}}}, env={}
    )["edge"]
    src = MCPSource("edge", cfg, isolation=Isolation(workspace=workspace))
    try:
        who = (await src.call_tool("whoami", {"variable": "HOME"})).structured
    finally:
        await src.aclose()
    assert who is not None and who["uid"] == SERVERS_UID, who
    home: str = who["value"]
    return home


def _as(uid: int, *argv: str) -> None:
    subprocess.run(argv, check=True, user=uid, group=uid, cwd="/")


@pytest.mark.skipif(os.geteuid() != 0, reason="servers get a uid of their own under root")
async def test_a_link_the_server_plants_in_its_home_is_never_followed_by_root(
    tmp_path: Path,
) -> None:
    victim_dir = tmp_path / "root-only"
    victim_dir.mkdir(mode=0o700)
    victim = victim_dir / "ld.so.preload"  # absent: root would create it, and chown it
    home = await _home_of_a_started_server(tmp_path / "ws")
    link = os.path.join(home, ".gitconfig")
    assert os.lstat(link).st_uid == SERVERS_UID  # seeded at the first start, the server's
    _as(SERVERS_UID, "rm", "-f", link)
    _as(SERVERS_UID, "ln", "-s", str(victim), link)

    again = await _home_of_a_started_server(tmp_path / "ws")  # the next start prepares it

    assert again == home
    assert not victim.exists(), f"root followed {link} and created {victim}"
    assert os.lstat(victim_dir).st_uid == 0


GIT_PYTHON = Path(__file__).resolve().parents[2] / ".ci/venvs/mcp-server-git/bin/python"


@pytest.fixture
def root_repo() -> Iterator[tuple[Path, str]]:
    """A git repository in a root-only directory, its one commit holding a secret."""
    secret = f"root-secret-{uuid.uuid4().hex}"
    repo = Path.home() / f".codemode-canary-repo-{uuid.uuid4().hex}"
    repo.mkdir(mode=0o700)
    (repo / "secret.txt").write_text(secret)
    git = ["git", "-C", str(repo), "-c", "user.name=root", "-c", "user.email=root@localhost"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "secret.txt"], check=True)
    subprocess.run([*git, "commit", "-qm", secret], check=True)
    yield repo, secret
    shutil.rmtree(repo, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="servers get a uid of their own under root")
async def test_a_link_the_sandbox_plants_where_a_server_is_pointed_is_never_followed_by_root(
    tmp_path: Path, root_repo: tuple[Path, str]
) -> None:
    """mcp.json points the git server at ``files/repo``; the sandbox's code replaces it by a
    link to a root-only repository. When the server (re)starts, root must not mount that
    repository into its jail nor give its uid an ACL there: through the link the agent's
    code would read root's files (``git_show``) and have them changed."""
    if not GIT_PYTHON.exists():
        pytest.fail(f"{GIT_PYTHON} is missing: run .ci/install-test-servers.sh")
    secret_repo, secret = root_repo
    base = tmp_path / "ws"
    files = base / "files"
    files.mkdir(parents=True)
    os.chown(files, SANDBOX_UID, SANDBOX_UID)
    repo = files / "repo"
    os.symlink(secret_repo, repo)  # what the sandbox's code can do: its link, in its folder
    os.lchown(repo, SANDBOX_UID, SANDBOX_UID)
    args = ["-m", "mcp_server_git", "--repository", str(repo)]
    cfg = parse_servers(
        {"mcpServers": {"git": {"command": str(GIT_PYTHON), "args": args}}}, env={}
    )["git"]
    src = MCPSource("git", cfg, isolation=Isolation(workspace=base, files=files))
    try:
        shown = [
            await src.call_tool("git_log", {"repo_path": str(repo)}),
            await src.call_tool("git_show", {"repo_path": str(repo), "revision": "HEAD"}),
        ]
    except ServerUnavailable:
        shown = []  # refusing to start is safe too
    finally:
        await src.aclose()
    text = " ".join(getattr(c, "text", "") for r in shown for c in r.content)
    assert secret not in text, text
    assert SERVERS_UID not in acl.users(str(secret_repo))
    assert SERVERS_UID not in acl.users(str(secret_repo), default=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="servers get a uid of their own under root")
def test_a_writable_path_the_sandbox_made_a_link_gets_no_acl_where_it_leads(
    tmp_path: Path,
) -> None:
    """``writable_paths: [files/out]``, ``out`` made a link to a root-only directory: the
    server does not start (saying which link), and no ACL for the server's uid lands where
    ``out`` leads."""
    target = tmp_path / "root-only"
    target.mkdir(mode=0o700)
    base = tmp_path / "ws"
    files = base / "files"
    files.mkdir(parents=True)
    os.chown(files, SANDBOX_UID, SANDBOX_UID)
    out = files / "out"
    os.symlink(target, out)
    os.lchown(out, SANDBOX_UID, SANDBOX_UID)
    cfg = parse_servers(
        {"mcpServers": {"s": {"command": "true", "writable_paths": [str(out)]}}}, env={}
    )["s"]
    assert isinstance(cfg, StdioServerConfig)
    with pytest.raises(ServerUnavailable, match=f"{out}, a link inside the sandbox's files"):
        plan(cfg, Isolation(workspace=base, files=files, homes_root=str(tmp_path / "h")))
    assert acl.users(str(target)) == [] and acl.users(str(target), default=True) == []


def test_a_server_pointed_below_files_touches_the_workspace_wherever_a_link_leads(
    tmp_path: Path,
) -> None:
    """Privacy gives a server that writes into the sandbox's view tokens, never real values:
    ``files/repo`` made a link elsewhere must not make it a sink until it is put back."""
    base = tmp_path / "ws"
    (base / "files").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    os.symlink(tmp_path / "elsewhere", base / "files" / "repo")
    cfg = parse_servers(
        {"mcpServers": {"s": {"command": "x", "args": [str(base / "files" / "repo")]}}}, env={}
    )["s"]
    assert touches_workspace(cfg, base)


@pytest.mark.skipif(os.geteuid() != 0, reason="servers get a uid of their own under root")
def test_a_path_through_a_link_a_server_left_in_a_folder_it_writes_is_refused(
    tmp_path: Path,
) -> None:
    """One server writes ``/srv/data``; another is given ``/srv/data/sub``. The first made
    ``sub`` a link to a root-only directory: the second does not start, rather than get that
    directory mounted and an ACL for the servers' uid on it."""
    target = tmp_path / "root-only"
    target.mkdir(mode=0o700)
    data = tmp_path / "data"
    data.mkdir()
    sub = data / "sub"
    os.symlink(target, sub)
    os.lchown(sub, SERVERS_UID, SERVERS_UID)
    cfg = parse_servers({"mcpServers": {"s": {"command": "true", "args": [str(sub)]}}}, env={})["s"]
    assert isinstance(cfg, StdioServerConfig)
    with pytest.raises(ServerUnavailable, match="a link of uid"):
        plan(cfg, Isolation(workspace=tmp_path / "ws", homes_root=str(tmp_path / "h")))
    assert acl.users(str(target)) == []
