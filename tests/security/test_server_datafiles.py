"""A jailed server starts where it would start unjailed, and sees a data file, not its folder.

Relative paths: a server given ``files`` or ``data/in.txt`` (or a relative ``cwd``) started
in its private HOME once jailed, so the path led elsewhere than unjailed, or nowhere. Data
files: a server given ``~/notes.json`` got all of ``~`` writable, with an ACL for its uid.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from codemode.config import StdioServerConfig
from codemode.errors import ServerUnavailable
from codemode.isolation import acl
from codemode.isolation.datafiles import MAX_NEIGHBOURS
from codemode.isolation.servers import Isolation, plan
from codemode.isolation.uids import SERVERS_UID
from codemode.tools.sources.mcp import MCPSource
from codemode.workspace import Workspace

from .test_servers import FS_SERVER, ROOT, _need, _run_jailed

pytestmark = [pytest.mark.anyio, pytest.mark.security]

MEMORY_SERVER = FS_SERVER.parents[2] / "server-memory/dist/index.js"


def _base(tmp_path: Path, servers: dict[str, object]) -> tuple[Workspace, Isolation]:
    """A workspace whose mcp.json holds ``servers``; codemode runs elsewhere (``/``)."""
    base = tmp_path / "base"
    (base / "files").mkdir(parents=True)
    for d in (tmp_path, base):
        d.chmod(0o755)
    (base / "mcp.json").write_text(json.dumps({"mcpServers": servers}))
    ws = Workspace.open(base)
    iso = Isolation(workspace=base, files=base / "files", homes_root=str(tmp_path / "homes"))
    return ws, iso


def _unjailed(cfg: StdioServerConfig, iso: Isolation) -> subprocess.CompletedProcess[str]:
    launch = plan(cfg.model_copy(update={"isolation": "none"}), iso)
    return subprocess.run(
        [launch.command, *launch.args], env=launch.env, cwd=launch.cwd,
            pass_fds=launch.pass_fds,        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip


SCRIPT = 'cat "$0"; echo; pwd; echo written > "$1"'


@pytest.mark.parametrize("how", ["args", "relative cwd"])
def test_a_relative_path_leads_to_the_same_place_inside_and_outside_the_jail(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """Given ``data/in.txt`` (from its config file's folder, or from a relative ``cwd``),
    the jailed server reads and writes the same host files as the unjailed one: it used to
    start in its private HOME, where ``data/`` did not exist."""
    monkeypatch.chdir("/")  # where codemode runs is not where the config is
    server: dict[str, object] = {
        "command": "sh",
        "args": ["-c", SCRIPT, "data/in.txt", "data/out.txt"],
    }
    if how == "relative cwd":
        server["cwd"] = "proj"
    ws, iso = _base(tmp_path, {"s": server})
    start = ws.path / ("proj" if how == "relative cwd" else "")
    (start / "data").mkdir(parents=True)
    for d in (start, start / "data"):
        d.chmod(0o755)
    (start / "data" / "in.txt").write_text("input")
    cfg = ws.servers["s"]
    assert isinstance(cfg, StdioServerConfig)
    outside = _unjailed(cfg, iso)
    assert (start / "data" / "out.txt").read_text() == "written\n"
    (start / "data" / "out.txt").unlink()
    inside = _run_jailed(cfg, iso)
    assert inside.stdout == outside.stdout == f"input\n{start.resolve()}\n"
    assert (start / "data" / "out.txt").read_text() == "written\n"


def test_a_server_given_nothing_where_it_starts_writes_nowhere_else(tmp_path: Path) -> None:
    """Its start folder is an empty read-only stand-in when it was given nothing there:
    a relative write fails rather than landing in its HOME or in the host's folder."""
    server = {
        "command": "sh",
        "args": ["-c", "pwd; ls -A; echo x > made 2>/dev/null || echo refused"],
    }
    ws, iso = _base(tmp_path, {"s": server})
    (ws.path / "files" / "x.txt").write_text("")
    cfg = ws.servers["s"]
    assert isinstance(cfg, StdioServerConfig)
    r = _run_jailed(cfg.model_copy(update={"args": (*cfg.args, "files")}), iso)
    assert r.stdout.split() == [str(ws.path.resolve()), "files", "refused"], r.stdout
    assert not (ws.path / "made").exists()


async def test_the_filesystem_server_resolves_a_bare_root_where_its_config_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real filesystem server given ``files`` (bare) resolves it from its working
    directory: jailed, that was HOME, and it never started ("files" did not exist there)."""
    _need(FS_SERVER)
    monkeypatch.chdir("/")
    ws, iso = _base(tmp_path, {"fs": {"command": "node", "args": [str(FS_SERVER), "files"]}})
    (ws.path / "files" / "readme.txt").write_text("hello")
    src = MCPSource("fs", ws.servers["fs"], isolation=iso)
    try:
        roots = await src.call_tool("list_allowed_directories", {})
        result = await src.call_tool("read_text_file", {"path": "readme.txt"})
    finally:
        await src.aclose()
    text = " ".join(getattr(c, "text", "") for c in [*roots.content, *result.content])
    assert not result.is_error and "hello" in text, text
    assert str((ws.path / "files").resolve()) in text


# -- data files --------------------------------------------------------------------------------


def _home(tmp_path: Path) -> Path:
    """A home-like folder: a data file among a root-only secret and a .ssh directory."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id").write_text("ssh-key")
    (home / "secret.txt").write_text("secret")
    (home / "secret.txt").chmod(0o644)  # readable by the server's uid: only the jail hides it
    (home / "notes.json").write_text("old")
    for d in (tmp_path, home, home / ".ssh"):
        d.chmod(0o755)
    return home


PROBE = r"""
f="$0"; d=$(dirname "$f")
echo "read:$(cat "$f")"
echo "secret:$(cat "$d/secret.txt" 2>&1)"
echo "ssh:$(ls -A "$d/.ssh" 2>&1)"
echo pwned > "$d/secret.txt" 2>/dev/null && echo "overwrote secret"
mv "$d/secret.txt" "$d/taken" 2>/dev/null && echo "moved secret"
rm -rf "$d/.ssh" 2>/dev/null && echo "removed .ssh"
echo new > "$f.tmp" && mv "$f.tmp" "$f" && echo replaced
"""


def test_a_writable_data_file_is_shown_alone_in_its_folder(tmp_path: Path) -> None:
    """Given ~/notes.json, the server can replace it (temp file + rename, as server-memory
    does) but reads, changes, moves or removes nothing else that was in ~."""
    home = _home(tmp_path)
    server = {"command": "sh", "args": ["-c", PROBE, str(home / "notes.json")]}
    ws, iso = _base(tmp_path, {"s": server})
    cfg = ws.servers["s"]
    assert isinstance(cfg, StdioServerConfig)
    out = _run_jailed(cfg, iso).stdout
    assert "read:old" in out and "replaced" in out, out
    assert "secret:secret" not in out and "ssh-key" not in out and "ssh:id" not in out, out
    for bad in ("overwrote", "moved", "removed"):
        assert bad not in out, out
    assert (home / "notes.json").read_text() == "new\n"
    assert (home / "secret.txt").read_text() == "secret"
    assert (home / ".ssh" / "id").read_text() == "ssh-key"
    if ROOT:  # the folder is shared for what the server makes there, not for what comes later
        assert acl.users(str(home), default=True) == []


@pytest.mark.parametrize("why", ['"read_only": true', "read_only_paths", "no write bit"])
def test_a_read_only_data_file_is_mounted_alone_and_read_only(tmp_path: Path, why: str) -> None:
    home = _home(tmp_path)
    notes = home / "notes.json"
    script = 'cat "$0"; echo; echo x >> "$0" 2>/dev/null && echo wrote; ls -A "$(dirname "$0")"'
    server: dict[str, object] = {"command": "sh", "args": ["-c", script, str(notes)]}
    if why == '"read_only": true':
        server["read_only"] = True
    elif why == "read_only_paths":
        server["read_only_paths"] = [str(notes)]
    else:
        notes.chmod(0o444)
    ws, iso = _base(tmp_path, {"s": server})
    cfg = ws.servers["s"]
    assert isinstance(cfg, StdioServerConfig)
    out = _run_jailed(cfg, iso).stdout
    assert out.split() == ["old", "notes.json"], out
    assert notes.read_text() == "old"
    assert acl.users(str(home)) == [] and acl.users(str(notes)) == []


@pytest.mark.skipif(not ROOT, reason="servers get a uid (and file ACLs) of their own under root")
async def test_the_memory_server_keeps_its_file_beside_files_it_cannot_see(tmp_path: Path) -> None:
    """The real memory server, its file in a folder of root's: it saves (a temp file renamed
    over its file, created the first time), and never sees the folder's other files."""
    _need(MEMORY_SERVER)
    home = _home(tmp_path)
    memory = home / "memory.jsonl"
    server = {
        "command": "node",
        "args": [str(MEMORY_SERVER)],
        "env": {"MEMORY_FILE_PATH": str(memory)},
    }
    ws, iso = _base(tmp_path, {"mem": server})
    entity = {"name": "codemode", "entityType": "project", "observations": ["jailed"]}
    for _ in range(2):  # the file made the first time is written again the second
        src = MCPSource("mem", ws.servers["mem"], isolation=iso)
        try:
            made = await src.call_tool("create_entities", {"entities": [entity]})
            graph = await src.call_tool("read_graph", {})
        finally:
            await src.aclose()
        assert not made.is_error and not graph.is_error
    assert '"codemode"' in memory.read_text()
    assert acl.users(str(home), default=True) == []
    assert SERVERS_UID in acl.users(str(home))
    summary = plan(ws.servers["mem"], iso, dry_run=True).summary  # type: ignore[arg-type]
    assert "secret.txt" in summary.split("shown empty: ")[1] and f"{home}/.ssh" in summary


def test_a_writable_data_file_in_a_folder_given_read_only_leaves_the_rest_read_only(
    tmp_path: Path,
) -> None:
    """~ given read-only and ~/notes.json as a data file: the file can be replaced, what
    else ~ holds stays readable (it was given) and unchanged."""
    home = _home(tmp_path)
    server = {
        "command": "sh",
        "args": ["-c", PROBE, str(home / "notes.json")],
        "read_only_paths": [str(home)],
    }
    ws, iso = _base(tmp_path, {"s": server})
    cfg = ws.servers["s"]
    assert isinstance(cfg, StdioServerConfig)
    out = _run_jailed(cfg, iso).stdout
    assert "secret:secret" in out and "ssh:id" in out and "replaced" in out, out
    for bad in ("overwrote", "moved", "removed"):
        assert bad not in out, out
    assert (home / "notes.json").read_text() == "new\n"
    assert (home / "secret.txt").read_text() == "secret"


@pytest.mark.parametrize("start", ["/", "/tmp", "/usr"])
def test_a_server_starting_in_a_system_folder_keeps_the_jails_own(start: str) -> None:
    """No stand-in covers the root, /tmp or /usr: the server starts there as it is."""
    cfg = StdioServerConfig(
        command="sh", args=("-c", 'pwd; ls /usr/bin/sh; touch "$TMPDIR/ok" && echo tmp'), cwd=start
    )
    iso = Isolation(homes_root="/tmp/codemode-test-homes")
    out = _run_jailed(cfg, iso).stdout.split()
    assert out == [start, "/usr/bin/sh", "tmp"], out


def test_a_data_file_among_too_many_neighbours_is_shown_alone(tmp_path: Path) -> None:
    """Past MAX_NEIGHBOURS (a host's /tmp) the file alone, writable in place; a file the
    server must create there cannot be shown alone: it does not start, and says why."""
    crowd = tmp_path / "crowd"
    crowd.mkdir()
    for i in range(MAX_NEIGHBOURS + 1):
        (crowd / f"other{i}").write_text("x")
    (crowd / "notes.json").write_text("old")
    for d in (tmp_path, crowd):
        d.chmod(0o755)
    script = 'echo new > "$0"; ls "$(dirname "$0")"'
    server = {"command": "sh", "args": ["-c", script, str(crowd / "notes.json")]}
    ws, iso = _base(tmp_path, {"s": server})
    cfg = ws.servers["s"]
    assert isinstance(cfg, StdioServerConfig)
    assert _run_jailed(cfg, iso).stdout.split() == ["notes.json"]
    assert (crowd / "notes.json").read_text() == "new\n"
    missing = cfg.model_copy(update={"args": ("-c", script, str(crowd / "new.json"))})
    with pytest.raises(ServerUnavailable, match="writable_paths"):
        plan(missing, iso, dry_run=True)
