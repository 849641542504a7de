"""An upstream server's home is its own: codemode (root) never follows what it plants there.

A server runs as its own uid with a private ``HOME`` it owns, which codemode (as root)
prepares before each start. Any server that can run a command (a shell tool, a build
tool) lets the agent's code plant links in that home; root writing through one would
create and hand to the server's uid any file on the host (``/etc/ld.so.preload``: root).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codemode.config import parse_servers
from codemode.isolation.servers import Isolation
from codemode.isolation.uids import SERVERS_UID
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


def _as_the_server(*argv: str) -> None:
    subprocess.run(argv, check=True, user=SERVERS_UID, group=SERVERS_UID, cwd="/")


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
    _as_the_server("rm", "-f", link)
    _as_the_server("ln", "-s", str(victim), link)

    again = await _home_of_a_started_server(tmp_path / "ws")  # the next start prepares it

    assert again == home
    assert not victim.exists(), f"root followed {link} and created {victim}"
    assert os.lstat(victim_dir).st_uid == 0
