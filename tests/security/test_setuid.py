"""No setuid or setgid file ever lands on the host, whichever call tries to make one.

Each attempt runs inside the sandbox; the verdict is read on the host, with ``os.stat``
of the file in the attacker's workspace.
"""

from __future__ import annotations

import os
import stat

import pytest

from codemode import Session
from codemode.execution.sandbox import SandboxExecutor

from .conftest import SUITE_LIMITS, X86_64, Arena

pytestmark = [pytest.mark.anyio, pytest.mark.security]
x86_64_only = pytest.mark.skipif(not X86_64, reason="raw syscall numbers are for x86_64")

SUID = stat.S_ISUID | stat.S_ISGID
AT_FDCWD = -100
O_WRONLY_CREAT = os.O_WRONLY | os.O_CREAT

# How each call is made from inside: (setup, attempt). ``p`` is the file's name (bytes for
# the raw calls), ``m`` the mode asked for.
CALLS = {
    "chmod": ("open(p, 'w').close()", "os.chmod(p, m)"),
    "fchmod": ("open(p, 'w').close()", "fd = os.open(p, os.O_RDONLY)\nos.fchmod(fd, m)"),
    "fchmodat": ("open(p, 'w').close()", "raw(268, -100, p.encode(), m)"),
    "fchmodat2": ("open(p, 'w').close()", "raw(452, -100, p.encode(), m, 0)"),
    "open_creat": ("", f"raw(2, p.encode(), {O_WRONLY_CREAT}, m)"),
    "openat_creat": ("", f"os.open(p, {O_WRONLY_CREAT}, m)"),
    "creat": ("", "raw(85, p.encode(), m)"),
    "mknod": ("", "raw(133, p.encode(), stat.S_IFREG | m, 0)"),
    "mknodat": ("", "os.mknod(p, stat.S_IFREG | m)"),
}

HELPERS = r"""
import stat
def raw(nr, *args):
    ctypes.set_errno(0)
    conv = [ctypes.c_char_p(a) if isinstance(a, bytes) else ctypes.c_long(a) for a in args]
    r = _libc.syscall(nr, *conv)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return r
"""


def _mode_on_host(arena: Arena, name: str) -> int | None:
    path = os.path.join(arena.host.attacker_ws, name)
    try:
        return os.lstat(path).st_mode
    except FileNotFoundError:
        return None


@x86_64_only
@pytest.mark.parametrize("bits", [0o4755, 0o2755, 0o6755], ids=["setuid", "setgid", "both"])
@pytest.mark.parametrize("call", sorted(CALLS))
async def test_no_call_can_give_a_workspace_file_setuid_or_setgid_bits(
    arena: Arena, call: str, bits: int
) -> None:
    setup, attempt = CALLS[call]
    name = f"{call}-{bits:o}"
    code = (
        HELPERS
        + f"p, m = {name!r}, {bits}\n"
        + (setup + "\n" if setup else "")
        + "def go():\n"
        + "".join(f"    {line}\n" for line in attempt.splitlines())
        + "attempt(go)"
    )
    outcome = await arena.value(code)
    mode = _mode_on_host(arena, name)
    assert mode is None or not mode & SUID, f"{call}: {oct(mode)} on the host ({outcome})"
    assert outcome == "blocked:PermissionError", outcome


@x86_64_only
async def test_openat2_is_not_available_so_its_mode_cannot_hide_in_a_struct(arena: Arena) -> None:
    code = (
        "how = (ctypes.c_uint64 * 3)(os.O_WRONLY | os.O_CREAT, 0o6755, 0)\n"
        "ctypes.set_errno(0)\n"
        "r = _libc.syscall(437, ctypes.c_long(-100), ctypes.c_char_p(b'o2'),"
        " ctypes.byref(how), ctypes.c_long(24))\n"
        "[r, ctypes.get_errno()]"
    )
    assert await arena.value(code) == [-1, 38]  # ENOSYS
    assert _mode_on_host(arena, "o2") is None


async def test_plain_files_and_modes_still_work(arena: Arena) -> None:
    code = (
        "open('plain', 'w').close()\nos.chmod('plain', 0o755)\n"
        "fd = os.open('made', os.O_WRONLY | os.O_CREAT, 0o640)\nos.close(fd)\n"
        "os.mkdir('d', 0o700)\n"
        "[oct(os.stat(n).st_mode & 0o7777) for n in ('plain', 'made', 'd')]"
    )
    assert await arena.value(code) == ["0o755", "0o640", "0o700"]


async def test_the_workspace_is_mounted_nosuid_and_nodev(arena: Arena) -> None:
    code = (
        "[l.split()[5] for l in read('/proc/self/mountinfo').decode().splitlines()"
        " if l.split()[4] == '/workspace']"
    )
    opts = await arena.value(code)
    assert isinstance(opts, list) and len(opts) == 1
    assert {"nosuid", "nodev"} <= set(opts[0].split(","))


async def test_a_device_node_cannot_be_made_in_the_workspace(arena: Arena) -> None:
    code = "attempt(os.mknod, 'null2', stat.S_IFCHR | 0o666, os.makedev(1, 3))"
    assert (await arena.value("import stat\n" + code)).startswith("blocked:")
    assert _mode_on_host(arena, "null2") is None


# -- the host's second net -------------------------------------------------------------


async def test_bits_that_got_through_are_stripped_on_the_host_after_the_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Without the filter (seccomp=False), the host's sweep still removes the bits."""
    ws = str(tmp_path_factory.mktemp("suid-net"))
    ex = SandboxExecutor(workspace=ws, seccomp=False, limits=SUITE_LIMITS, pool_size=0)
    async with Session(ex) as s:
        code = (
            "import os\nos.makedirs('deep/er', exist_ok=True)\n"
            "for p in ('top', 'deep/er/low'):\n"
            "    open(p, 'w').close()\n    os.chmod(p, 0o6755)\n"
            "oct(os.stat('deep/er/low').st_mode & 0o7777)"
        )
        r = await s.run(code)
        assert r.value == "0o6755", r.to_text()  # the bits were set inside...
        for rel in ("top", "deep/er/low"):
            assert not os.stat(os.path.join(ws, rel)).st_mode & SUID, rel  # ...not on the host
        assert any("setuid/setgid bits were removed" in w for w in r.warnings)


async def test_bits_planted_on_the_host_are_stripped_after_the_next_run(arena: Arena) -> None:
    planted = os.path.join(arena.host.attacker_ws, "planted")
    with open(planted, "w") as fh:
        fh.write("#!/bin/sh\n")
    os.chmod(planted, 0o4755)
    await arena.value("1")
    assert not os.stat(planted).st_mode & SUID


async def test_the_sweep_never_follows_a_symlink_out_of_the_workspace(
    arena: Arena, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "keep-my-bits"
    outside.write_text("x")
    os.chmod(outside, 0o4755)
    outside_dir = tmp_path_factory.mktemp("outside-dir")
    (outside_dir / "inner").write_text("y")
    os.chmod(outside_dir / "inner", 0o2755)
    os.symlink(outside, os.path.join(arena.host.attacker_ws, "link"))
    os.symlink(outside_dir, os.path.join(arena.host.attacker_ws, "dirlink"))
    await arena.value("1")
    assert os.stat(outside).st_mode & 0o7777 == 0o4755
    assert os.stat(outside_dir / "inner").st_mode & 0o7777 == 0o2755
