"""Host checks the sandbox needs before it starts anything, and ``codemode doctor`` reports:
programs, user namespaces, which paths the sandbox uid can reach, which interpreter it can
run. Static: nothing is started here.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass

from ..errors import SandboxUnavailable


@dataclass(frozen=True)
class Check:
    """One protection: is it available here, and if not, how to get it."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True


def find_program(name: str) -> str | None:
    if os.sep in name:
        return name if os.access(name, os.X_OK) and os.path.isfile(name) else None
    return shutil.which(name, path=os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/bin:/bin")


def userns_check() -> Check:
    """Whether unprivileged user namespaces are switched on (without starting anything)."""
    knobs = {
        "/proc/sys/kernel/unprivileged_userns_clone": (
            "0",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        ),
        "/proc/sys/user/max_user_namespaces": ("0", "sysctl -w user.max_user_namespaces=15000"),
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns": (
            "1",
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor "
            "profile allowing userns for /usr/bin/bwrap",
        ),
    }
    for path, (bad, fix) in knobs.items():
        try:
            with open(path) as fh:
                value = fh.read().strip()
        except OSError:
            continue
        if value == bad:
            return Check("user namespaces", False, f"disabled ({path} = {value})", fix)
    return Check("user namespaces", True, "enabled for unprivileged users")


def traversable(path: str, uid: int, gid: int, *, read_last: bool = True) -> bool:
    """Can ``uid`` reach and read ``path`` (bwrap resolves bind sources as that uid)?"""
    path = os.path.realpath(path)
    parts = path.split(os.sep)
    for i in range(1, len(parts) + 1):
        cur = os.sep.join(parts[:i]) or os.sep
        try:
            st = os.stat(cur)
        except OSError:
            return False
        need = stat.S_IXOTH if stat.S_ISDIR(st.st_mode) else stat.S_IROTH
        if st.st_uid == uid:
            need <<= 6
        elif st.st_gid == gid:
            need <<= 3
        if read_last and i == len(parts) and stat.S_ISDIR(st.st_mode):
            need |= need << 2  # r as well as x for the directory itself
        if st.st_mode & need != need:
            return False
    return True


def writable_by(st: os.stat_result, uid: int, gid: int) -> bool:
    if st.st_uid == uid:
        bits = stat.S_IWUSR | stat.S_IXUSR
    elif st.st_gid == gid:
        bits = stat.S_IWGRP | stat.S_IXGRP
    else:
        bits = stat.S_IWOTH | stat.S_IXOTH
    return st.st_mode & bits == bits


@functools.cache
def can_private_mount() -> bool:
    """Root with CAP_SYS_ADMIN can bind unreachable directories in a private namespace."""
    if os.geteuid() != 0 or not (find_program("unshare") and find_program("mount")):
        return False
    try:
        with open("/proc/self/status") as fh:
            caps = next(line for line in fh if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return False
    return bool(int(caps.split()[1], 16) & (1 << 21))  # CAP_SYS_ADMIN


@functools.cache
def _python_prefix(exe: str) -> str:
    if os.path.realpath(exe) == os.path.realpath(sys.executable):
        return os.path.realpath(sys.base_prefix)
    out = subprocess.run(
        [exe, "-I", "-S", "-c", "import sys;print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    return os.path.realpath(out.stdout.strip())


def sandbox_python(requested: str | None, uid: int, gid: int) -> tuple[str, str | None]:
    """The interpreter to run inside, and the prefix to bind (None: it is under /usr).

    The host's own interpreter is preferred; when its prefix is not readable by the
    sandbox uid (e.g. pyenv under /root), the system Python of the same version is used.
    """
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [requested] if requested else [sys.executable, f"/usr/bin/python{version}"]
    problems = []
    for exe in candidates:
        assert exe is not None
        real = os.path.realpath(exe)
        if not os.access(real, os.X_OK):
            problems.append(f"{exe}: not found")
            continue
        try:
            prefix = _python_prefix(real)
        except (OSError, subprocess.SubprocessError) as exc:
            problems.append(f"{exe}: cannot run ({exc})")
            continue
        if not (traversable(real, uid, gid) and traversable(prefix, uid, gid)):
            problems.append(f"{exe}: {prefix} is not readable by uid {uid}")
            continue
        inside_usr = prefix == "/usr" or prefix.startswith("/usr/")
        return real, (None if inside_usr else prefix)
    raise SandboxUnavailable(
        "no Python interpreter the sandbox can read: "
        + "; ".join(problems)
        + f". Fix: install python{version} (apt-get install python{version}) or pass "
        "python=<an interpreter readable by the sandbox uid>"
    )


__all__ = [
    "Check",
    "can_private_mount",
    "find_program",
    "sandbox_python",
    "traversable",
    "userns_check",
    "writable_by",
]
