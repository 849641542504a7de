"""A server sees the very paths it was given, as codemode found them, and nothing beside.

Each path a jailed server is given is walked one step at a time and mounted by its
descriptor (``codemode.isolation.views``). The sandbox's code, which owns ``files/``,
swaps ``files/repo`` for a link to a root-only directory after the walk (a hook between
plan and start), or again and again while servers start: the jail shows the directory that
was walked (or, racing, the server does not start); never the link's target, never with
an ACL there.
Both ways a source reaches the jail are run: bubblewrap's ``--bind-fd`` (the server's uid
can reach the path) and root's bind in a private namespace (it cannot: ``/tmp/pytest-of-root``
is 0700).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode.config import StdioServerConfig, parse_servers
from codemode.errors import ServerUnavailable
from codemode.isolation import acl
from codemode.isolation.servers import Isolation, ServerLaunch, plan
from codemode.isolation.uids import SANDBOX_UID, SERVERS_UID
from codemode.isolation.views import Refused, reach, sandbox_views, view_ids

pytestmark = [pytest.mark.security]
ROOT = os.geteuid() == 0
# What the server prints: the folder above its path, its own file, its neighbour's, and
# the descriptors its process holds (ls's own 3: none of codemode's may reach it).
SCRIPT = 'ls -a "$0/.."; cat "$0/inside.txt"; cat "$0/../other/secret.txt"; exec ls /proc/$$/fd'


@dataclass
class Workspace:
    base: Path
    files: Path
    repo: Path
    secret: str
    canary: Path
    """A root-only directory whose file holds ``secret`` too: where a swapped link leads."""

    def iso(self) -> Isolation:
        return Isolation(workspace=self.base, files=self.files, homes_root=str(self.base / "h"))

    def config(self, path: Path | None = None) -> StdioServerConfig:
        args = ["-c", SCRIPT, str(path or self.repo)]
        cfg = parse_servers({"mcpServers": {"s": {"command": "sh", "args": args}}}, env={})["s"]
        assert isinstance(cfg, StdioServerConfig)
        return cfg

    def swap(self) -> None:
        """``files/repo`` made a link to the canary (the original moved aside), as the
        sandbox's uid would."""
        os.rename(self.repo, self.files / "moved")
        os.symlink(self.canary, self.repo)
        if ROOT:
            os.lchown(self.repo, SANDBOX_UID, SANDBOX_UID)

    def unswap(self) -> None:
        os.unlink(self.repo)
        os.rename(self.files / "moved", self.repo)


@pytest.fixture(params=["bind-fd", "root-bind"])
def ws(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    if request.param == "root-bind":
        if not ROOT:
            pytest.skip("root binds what the server's uid cannot reach only under root")
        top = tmp_path  # below /tmp/pytest-of-root (0700): out of the server uid's reach
    else:
        top = Path(tempfile.mkdtemp(prefix="codemode-fd-test-"))
        top.chmod(0o755)
    secret = f"secret-{uuid.uuid4().hex}"
    base = top / "ws"
    files = base / "files"
    (files / "repo").mkdir(parents=True)
    (files / "other").mkdir()
    (files / "repo" / "inside.txt").write_text("repo data\n")
    (files / "other" / "secret.txt").write_text(secret)
    canary = tmp_path / "root-only"
    canary.mkdir(mode=0o700)
    (canary / "secret.txt").write_text(secret)
    (canary / "inside.txt").write_text(secret)
    if ROOT:
        for p in (files, *files.rglob("*")):
            os.lchown(p, SANDBOX_UID, SANDBOX_UID)
    try:
        yield Workspace(base, files, files / "repo", secret, canary)
    finally:
        if top != tmp_path:
            shutil.rmtree(top, ignore_errors=True)


def _start(
    ws: Workspace,
    planned: Callable[[ServerLaunch], None] = lambda launch: None,
    path: Path | None = None,
) -> subprocess.CompletedProcess[str] | None:
    """Plan and run the server (None: it refused to start); ``planned`` runs in between."""
    try:
        launch = plan(ws.config(path), ws.iso())
    except ServerUnavailable:
        return None
    try:
        planned(launch)
        return subprocess.run(
            [launch.command, *launch.args], env=launch.env, cwd=launch.cwd,
            pass_fds=launch.pass_fds, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    finally:
        launch.cleanup()


def _no_acl_for_servers(path: Path) -> bool:
    return SERVERS_UID not in acl.users(str(path)) + acl.users(str(path), default=True)


def test_a_server_given_files_repo_sees_files_repo_and_not_its_neighbours(
    ws: Workspace,
) -> None:
    r = _start(ws)
    assert r is not None and r.returncode == 0, r
    assert r.stdout.split()[:3] == [".", "..", "repo"], r.stdout  # files/ holds repo alone
    assert "repo data" in r.stdout
    assert r.stdout.split()[-4:] == ["0", "1", "2", "3"], r.stdout
    assert ws.secret not in r.stdout + r.stderr
    assert _no_acl_for_servers(ws.files / "other")
    if ROOT:
        assert SERVERS_UID in acl.users(str(ws.repo), default=True)  # it may write there


def test_a_link_swapped_in_after_the_walk_changes_nothing(ws: Workspace) -> None:
    """The swap lands between the plan (the walk) and the start: bwrap's ``--bind-fd`` and
    root's bind both find the walked directory where it is now (moved aside)."""
    r = _start(ws, lambda launch: ws.swap())
    assert r is not None and r.returncode == 0, r
    assert ws.secret not in r.stdout + r.stderr
    assert "repo data" in r.stdout, r.stdout
    assert _no_acl_for_servers(ws.canary)


def test_links_swapped_while_servers_start_never_expose_their_target(ws: Workspace) -> None:
    stop = threading.Event()

    def swapper() -> None:
        while not stop.is_set():
            ws.swap()
            ws.unswap()

    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    outcomes: dict[str, int] = {}
    try:
        for _ in range(40):
            r = _start(ws)
            kind = "refused" if r is None else "ran" if "repo data" in r.stdout else "other"
            outcomes[kind] = outcomes.get(kind, 0) + 1
            assert r is None or ws.secret not in r.stdout + r.stderr, r
    finally:
        stop.set()
        thread.join()
    # nor where a link led while codemode listed a data file's folder (files/repo missing)
    assert all(_no_acl_for_servers(p) for p in (ws.canary, ws.canary.parent, ws.base))
    assert outcomes.get("ran", 0) + outcomes.get("refused", 0) > 0, outcomes


def test_a_host_link_into_files_shows_what_it_led_to_when_walked(ws: Workspace) -> None:
    """``/srv/repo`` -> ``files/repo`` (the administrator's link): the walk follows it into
    ``files/`` and holds ``files/repo`` itself; a swap after the walk changes nothing."""
    door = ws.base.parent / "srv-repo"
    os.symlink(ws.repo, door)  # root's (or codemode's own user's): followed
    r = _start(ws, lambda launch: ws.swap(), path=door)
    assert r is not None and r.returncode == 0, r
    assert "repo data" in r.stdout and ws.secret not in r.stdout + r.stderr
    assert _no_acl_for_servers(ws.canary)


def test_a_dotdot_leaving_files_in_a_links_target_is_refused(ws: Workspace) -> None:
    door = ws.base.parent / "up"
    os.symlink(f"{ws.repo}/../../..", door)  # files/repo/.. is files/; one more leaves it
    views = view_ids(sandbox_views(str(ws.base), str(ws.files)))
    with pytest.raises(Refused, match="leaves the sandbox's files"):
        reach(str(door), views)
    found = reach(f"{ws.repo}/inside.txt", views)  # a plain path below files/ is held
    try:
        assert found.fd is not None and found.path == str(ws.repo / "inside.txt")
    finally:
        found.close()
