"""``deps.add`` never makes pip run code on the host, whatever the sandbox asks for.

The attacker's code writes packages (an sdist with a build script, a local directory with a
build backend) into /workspace and asks for them every way pip could understand: bare
names that match a file in the host's working directory, ``./x``, ``file:`` URLs,
``name @ url``, options, markers. Each build script would leave a canary on the host.
pip's own configuration channels (``PIP_*`` variables, the user's pip.conf) are tried too.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import uuid
import zipfile
from pathlib import Path

import pytest

from codemode import Session
from codemode.errors import DepsError
from codemode.execution.sandbox import SandboxExecutor
from codemode.isolation import jail
from codemode.isolation.uids import DEPS_UID
from codemode.memory import Memory
from codemode.memory.deps import Deps
from codemode.memory.deps.pip import JailedPip, PipPolicy, _adopt, canonical_spec
from codemode.workspace import Workspace

from .conftest import SUITE_LIMITS

pytestmark = [pytest.mark.anyio, pytest.mark.security]


def sdist_bytes(name: str, canary: str) -> bytes:
    """An sdist whose setup.py (and in-tree build backend) writes ``canary``."""
    setup = f"open({canary!r}, 'w').write('built as ' + str(__import__('os').getuid()))\n"
    backend = (
        setup + "def build_wheel(*a, **k):\n    raise SystemExit(1)\nbuild_sdist = build_wheel\n"
    )
    files = {
        f"{name}-1.0/setup.py": setup + "from setuptools import setup\nsetup()\n",
        f"{name}-1.0/backend.py": backend,
        f"{name}-1.0/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\n'
        'backend-path = ["."]\n',
        f"{name}-1.0/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def write_wheel(folder: Path, name: str) -> Path:
    """A valid pure-Python wheel of ``name`` 1.0 (importable module ``name``)."""
    dist = f"{name}-1.0.dist-info"
    files = {
        f"{name}/__init__.py": "PWNED = True\n",
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{p},,\n" for p in [*files, f"{dist}/RECORD"])
    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for p, text in files.items():
            zf.writestr(p, text)
    return path


# -- from inside the sandbox ---------------------------------------------------------------


async def test_packages_the_sandbox_writes_are_never_built_on_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    ws = Workspace.open(base)
    ws.files_dir.mkdir(parents=True, exist_ok=True)
    canary = f"/var/tmp/cm-deps-canary-{uuid.uuid4().hex}"
    host_files = str(ws.files_dir.resolve())
    # as after `codemode run` in the workspace's folder: the host's cwd is the files dir
    monkeypatch.chdir(host_files)
    asks = [
        "evil.tar.gz",
        "./evil.tar.gz",
        "evil_dir",
        "./evil_dir",
        "evil-dir",
        "file:///workspace/evil.tar.gz",
        f"file://{host_files}/evil.tar.gz",
        f"{host_files}/evil.tar.gz",
        f"evil @ file://{host_files}/evil.tar.gz",
        "evil @ https://127.0.0.1:1/evil.tar.gz",
        "-r reqs.txt",
        "--find-links=. evil",
        "evil --index-url file:///workspace",
        "evil; python_version > '0'",
    ]
    code = (
        "import io, os, tarfile\n"
        f"open('evil.tar.gz', 'wb').write({sdist_bytes('evil', canary)!r})\n"
        "with tarfile.open('evil.tar.gz') as t:\n    t.extractall('unpacked')\n"
        "os.rename('unpacked/evil-1.0', 'evil_dir')\n"
        "os.makedirs('evil-dir', exist_ok=True)\n"
        "for f in os.listdir('evil_dir'):\n"
        "    open('evil-dir/' + f, 'w').write(open('evil_dir/' + f).read())\n"
        "open('reqs.txt', 'w').write('./evil.tar.gz\\n')\n"
        "out = {}\n"
        f"for ask in {asks!r}:\n"
        "    try:\n        out[ask] = 'INSTALLED ' + repr(deps.add(ask))\n"
        "    except Exception as e:\n        out[ask] = type(e).__name__ + ': ' + str(e)[:300]\n"
        "out"
    )
    memory = Memory.from_workspace(base)
    ex = SandboxExecutor.for_workspace(ws, limits=SUITE_LIMITS, pool_size=0)
    async with Session(ex, memory=memory) as s:
        r = await s.run(code, timeout=240)
    assert r.is_ok, r.to_text()
    outcomes = r.value
    assert isinstance(outcomes, dict)
    assert not os.path.exists(canary), "a build script ran on the host"
    for ask, outcome in outcomes.items():
        assert outcome.startswith("DepsError"), f"{ask!r}: {outcome}"
    assert await memory.deps.list() == []  # type: ignore[union-attr]
    assert not (ws.deps_dir / "evil").exists()


# -- pip's own configuration channels ----------------------------------------------------


@pytest.fixture
def local_wheel(tmp_path: Path) -> tuple[str, Path]:
    name = f"cmevil{uuid.uuid4().hex[:12]}"
    links = tmp_path / "links"
    links.mkdir()
    write_wheel(links, name)
    return name, links


async def test_pip_environment_variables_of_the_host_are_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_wheel: tuple[str, Path]
) -> None:
    name, links = local_wheel
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_INDEX_URL", links.as_uri())
    deps = Deps(tmp_path / "deps")
    with pytest.raises(DepsError):
        await deps.add(name)
    assert not (deps.site / name).exists()


async def test_the_users_pip_config_is_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, local_wheel: tuple[str, Path]
) -> None:
    name, links = local_wheel
    home = tmp_path / "home"
    (home / ".config" / "pip").mkdir(parents=True)
    conf = f"[global]\nfind-links = {links}\nno-index = true\n"
    (home / ".config" / "pip" / "pip.conf").write_text(conf)
    (home / ".pip").mkdir()
    (home / ".pip" / "pip.conf").write_text(conf)
    for key in [k for k in os.environ if k.startswith("PIP_")]:
        monkeypatch.delenv(key)  # the file alone speaks (variables would override it)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(home / ".pip" / "pip.conf"))
    deps = Deps(tmp_path / "deps")
    with pytest.raises(DepsError):
        await deps.add(name)
    assert not (deps.site / name).exists()


def _root_file(path: Path, text: str, mode: int = 0o644) -> str:
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


def test_the_system_config_is_honoured_only_for_what_cannot_name_local_code(
    tmp_path: Path,
) -> None:
    constraint = _root_file(tmp_path / "constraints.txt", "tomli<2.0.2\n")
    conf = _root_file(
        tmp_path / "pip.conf",
        "[global]\nindex-url = https://mirror.example/simple\n"
        "extra-index-url = file:///opt/pypi/simple https://extra.example/simple\n"
        f"find-links = /opt/wheels\nconstraint = {constraint}\nno-index = true\n"
        "[install]\nbreak-system-packages = true\n",
    )
    policy = PipPolicy.from_system([conf])
    assert policy.index_url == "https://mirror.example/simple"
    assert policy.extra_index_urls == ("https://extra.example/simple",)
    assert policy.constraint == constraint
    args = policy.args()
    assert "--find-links" not in args and "--no-index" not in args
    assert not any("file:" in a for a in args)
    assert {"find-links", "no-index", "break-system-packages"} <= set(policy.ignored)


def test_a_system_config_anyone_could_write_is_not_read(tmp_path: Path) -> None:
    conf = _root_file(tmp_path / "pip.conf", "[global]\nindex-url = https://evil/simple\n", 0o666)
    assert PipPolicy.from_system([conf]).index_url == "https://pypi.org/simple"


async def test_the_administrators_constraints_still_apply(tmp_path: Path) -> None:
    constraint = _root_file(tmp_path / "constraints.txt", "tomli<2.0.2\n")
    conf = _root_file(tmp_path / "pip.conf", f"[global]\nconstraint = {constraint}\n")
    deps = Deps(tmp_path / "deps")
    deps._pip = JailedPip(policy=PipPolicy.from_system([conf]))
    info = await deps.add("tomli")
    assert info["version"] == "2.0.1"


# -- where pip runs ---------------------------------------------------------------------------


def test_pip_runs_as_its_own_unprivileged_uid_and_sees_no_host_files(tmp_path: Path) -> None:
    secret = Path.home() / f".codemode-canary-{uuid.uuid4().hex}"
    secret.write_text("secret")
    spec = JailedPip()._spec([], network=False)
    probe = (
        "import os, json\n"
        "def w(p):\n"
        "    try:\n        open(p, 'w').write('x'); return True\n"
        "    except OSError:\n        return False\n"
        f"print(json.dumps([os.getuid(), os.path.exists({str(secret)!r}),"
        f" os.path.exists({str(tmp_path)!r}), os.getcwd(), os.listdir('.'),"
        " w('/empty/x'), w('/opt/codemode-pip/pip/x')]))"
    )
    launch = jail.build(spec, [os.path.realpath(sys.executable), "-I", "-S", "-c", probe])
    try:
        p = subprocess.run(launch.argv, capture_output=True, text=True, timeout=60, cwd="/")
    finally:
        launch.cleanup()
        secret.unlink()
    assert p.returncode == 0, p.stderr
    uid, sees_secret, sees_tmp, cwd, listing, wrote_cwd, wrote_pip = json.loads(p.stdout)
    if os.geteuid() == 0:
        assert uid == DEPS_UID
    assert not sees_secret and not sees_tmp
    assert (cwd, listing, wrote_cwd, wrote_pip) == ("/empty", [], False, False)


def test_only_regular_files_come_out_of_the_jail_without_setuid_bits(tmp_path: Path) -> None:
    out, dst = tmp_path / "out", tmp_path / "dst"
    (out / "pkg").mkdir(parents=True)
    dst.mkdir()
    (out / "pkg" / "mod.py").write_text("x = 1")
    (out / "pkg" / "tool").write_text("#!/bin/sh\n")
    os.chmod(out / "pkg" / "tool", 0o6777)
    os.symlink("/etc/shadow", out / "pkg" / "shadow")
    os.symlink("/root", out / "rootlink")
    os.mkfifo(out / "pkg" / "fifo")
    _adopt(out, dst)
    assert sorted(os.listdir(dst / "pkg")) == ["mod.py", "tool"]
    assert not (dst / "rootlink").exists()
    assert os.stat(dst / "pkg" / "tool").st_mode & 0o7777 == 0o755


@pytest.mark.parametrize(
    "spec",
    ["evil.tar.gz", "./evil", "/abs/path", "Evil_Name.Tar.GZ", "x[a.b]>=1.0,<2"],
)
def test_pip_only_ever_receives_canonical_names(spec: str) -> None:
    try:
        rendered = canonical_spec(spec)
    except DepsError:
        return
    assert "/" not in rendered and "." not in rendered.split("=")[0].split(">")[0]
    assert rendered == rendered.lower()
