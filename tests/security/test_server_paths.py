"""A server's jail and privacy's sink policy read the paths it was given the same way.

A server given bare ``files`` or ``--roots=/srv,<ws>/files`` was no sink (it writes into
the sandbox's view, so it got tokens) yet its jail saw no workspace path: unjailed under
a non-root codemode, network on under root. Every spelling privacy recognises must cut
the server's network too, and a server given none keeps it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from codemode.config import StdioServerConfig
from codemode.isolation import acl
from codemode.isolation.paths import named_paths
from codemode.isolation.servers import Isolation, ServerLaunch, plan
from codemode.privacy.sinks import touches_workspace

from .test_servers import _run_jailed

pytestmark = pytest.mark.security


@dataclass
class Given:
    args: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    cwd: str | None = None
    files_elsewhere: bool = False
    """``ws/files`` is a symlink to a directory outside the workspace."""


def _spellings(ws: Path, data: Path) -> dict[str, Given]:
    f = str(ws / "files")
    return {
        "absolute": Given((f,)),
        "bare": Given(("files",)),
        "bare, with its cwd": Given(("files",), cwd=str(ws)),
        "bare, not yet made below": Given(("files/exports/new",)),
        "bare after --root=": Given(("--root=files",)),
        "comma list": Given((f"--roots=/srv,{f}",)),
        "semicolon list": Given(("--roots", f"/srv;{f}")),
        "JSON": Given((json.dumps({"roots": ["/tmp", f]}),)),
        "quoted": Given((f"--root='{f}'",)),
        "tuple": Given((f"--roots=('/tmp', '{f}')",)),
        "file URL": Given((f"file://{f}",)),
        "env list": Given(env={"ALLOWED_DIRECTORIES": f"/tmp,{f},/srv"}),
        "env JSON": Given(env={"ROOTS": json.dumps(["/tmp", f])}),
        "env colon list": Given(env={"DATA_PATH": f"/tmp:{f}"}),
        "relative cwd": Given(cwd="files"),
        "relative cwd, dotted": Given(cwd="./files"),
        "symlinked files, by its name": Given((f,), files_elsewhere=True),
        "symlinked files, by its target": Given((str(data / "in"),), files_elsewhere=True),
        "symlinked files, bare": Given(("files",), files_elsewhere=True),
    }


def _setup(tmp_path: Path, given: Given, monkeypatch: pytest.MonkeyPatch) -> Path:
    ws, data = tmp_path / "ws", tmp_path / "data"
    (data / "in").mkdir(parents=True)
    ws.mkdir()
    if given.files_elsewhere:
        (ws / "files").symlink_to(data)
    else:
        (ws / "files").mkdir()
    monkeypatch.chdir(ws)  # where codemode runs: a server without cwd starts here
    return ws


def _network(cfg: StdioServerConfig, ws: Path, homes: Path) -> bool:
    iso = Isolation(workspace=ws, files=ws / "files", homes_root=str(homes))
    summary = plan(cfg, iso, dry_run=True).summary
    assert summary.startswith("jail") or summary.startswith("no jail"), summary
    return summary.startswith("no jail") or ", network," in summary


@pytest.mark.parametrize("name", list(_spellings(Path("/ws"), Path("/data"))))
def test_a_server_privacy_gives_tokens_is_jailed_without_network(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    given = _spellings(tmp_path / "ws", tmp_path / "data")[name]
    ws = _setup(tmp_path, given, monkeypatch)
    cfg = StdioServerConfig(
        command=sys.executable, args=given.args, env=given.env or {}, cwd=given.cwd
    )
    assert touches_workspace(cfg, ws), name
    assert not _network(cfg, ws, tmp_path / "homes"), name


@pytest.mark.parametrize(
    "given",
    [
        Given(("stdio", "--port", "files"), cwd="elsewhere"),
        Given(("--ext=.js", "http://", "--url=https://example.com/files")),
        Given((f"--dirs=/srv,{'{other}'}",), env={"NAME": "files"}),
        Given(cwd="elsewhere"),
    ],
    ids=["bare word where no files is", "dotted words and URLs", "other paths", "other cwd"],
)
def test_a_server_given_no_workspace_path_keeps_its_network_and_is_a_sink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: Given
) -> None:
    ws = _setup(tmp_path, given, monkeypatch)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)  # no files here: a bare "files" names nothing
    args = tuple(a.replace("{other}", str(tmp_path / "other")) for a in given.args)
    cfg = StdioServerConfig(command=sys.executable, args=args, env=given.env or {}, cwd=given.cwd)
    assert not touches_workspace(cfg, ws)
    assert _network(cfg, ws, tmp_path / "homes")


def test_a_bare_path_is_mounted_in_the_jail_where_the_server_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Jailed for a path, the server must also see it: at its absolute literal path."""
    given = Given(("--roots=files,/srv",))
    ws = _setup(tmp_path, given, monkeypatch)
    cfg = StdioServerConfig(command=sys.executable, args=given.args)
    iso = Isolation(workspace=ws, files=ws / "files", homes_root=str(tmp_path / "homes"))
    mounts = plan(cfg, iso, dry_run=True).mounts
    assert any(m.target == str(ws / "files") and m.writable for m in mounts), mounts


def test_words_that_only_look_like_paths_are_not_read_as_paths(tmp_path: Path) -> None:
    (tmp_path / "index.js").write_text("")
    cfg = StdioServerConfig(
        command="node",
        args=("index.js", "stdio", "--ext=.js", "http://", "-v", "missing/x"),
        cwd=str(tmp_path),
    )
    got = sorted({p.literal for p in named_paths(cfg)})
    assert got == [str(tmp_path), str(tmp_path / "index.js")]


def test_directories_of_an_env_path_are_shown_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read as paths now, ``PATH``'s directories are where programs are looked up: a
    server must not be able to write the programs it or another server runs."""
    tools = tmp_path / "tools" / "bin"
    tools.mkdir(parents=True)
    ws = _setup(tmp_path, Given(), monkeypatch)
    cfg = StdioServerConfig(
        command=sys.executable, args=("files",), env={"PATH": f"{tools}:/usr/bin:/bin"}
    )
    iso = Isolation(workspace=ws, files=ws / "files", homes_root=str(tmp_path / "homes"))
    mounts = plan(cfg, iso, dry_run=True).mounts
    assert [m.writable for m in mounts if m.target == str(tools)] == [False], mounts


def test_host_configuration_a_server_is_given_is_shown_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CA bundle or config file under /etc was a "data file": its directory was mounted
    writable and, under root, given an ACL for the server's uid on the host's /etc."""
    ws = _setup(tmp_path, Given(), monkeypatch)
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    if not Path(bundle).is_file():
        pytest.skip(f"{bundle} is missing")
    before = acl.users("/etc/ssl/certs"), acl.users("/etc/ssl/certs", default=True)
    script = 'head -c 5 "$SSL_CERT_FILE"; touch /etc/ssl/certs/planted 2>/dev/null; ls "$0"'
    cfg = StdioServerConfig(
        command="sh",
        args=("-c", script, str(ws / "files"), json.dumps({"ca": bundle})),
        env={"SSL_CERT_FILE": bundle},
    )
    (ws / "files" / "seen.txt").write_text("")
    iso = Isolation(workspace=ws, files=ws / "files", homes_root=str(tmp_path / "homes"))

    def no_writable_etc(launch: ServerLaunch) -> None:
        assert [m for m in launch.mounts if m.target.startswith("/etc") and m.writable] == []

    r = _run_jailed(cfg, iso, no_writable_etc)
    assert r.stdout.startswith("-----") and "seen.txt" in r.stdout, r.stdout
    assert not Path("/etc/ssl/certs/planted").exists()
    assert (acl.users("/etc/ssl/certs"), acl.users("/etc/ssl/certs", default=True)) == before
