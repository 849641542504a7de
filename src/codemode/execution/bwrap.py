"""The sandbox's launch line: bubblewrap's and setpriv's arguments, as pure functions.

Kept apart from the executor so tests and ``codemode doctor`` can read exactly what a
worker is started with, without starting one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from .subprocess import WORKER_ROOT

SANDBOX_UID = 65534
SANDBOX_GID = 65534
WORKER_MOUNT = "/opt/codemode"
DEPS_MOUNT = "/opt/codemode-deps"
SITE_MOUNT = "/opt/codemode-site"
WORKSPACE = "/workspace"
WORKER_PKG = os.path.join(WORKER_ROOT, "codemode_worker")
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "USER": "sandbox",
}
_RO_ETC = ("/etc/ld.so.cache", "/etc/ssl/certs", "/etc/ssl/openssl.cnf", "/etc/ca-certificates")
SECCOMP_FD = 9  # below subprocess.CHILD_FD_FLOOR: the worker's pipes never take it


def bwrap_args(
    *,
    bwrap: str,
    workspace: str,
    python_prefix: str | None = None,
    worker_pkg: str = WORKER_PKG,
    deps_dir: str | None = None,
    site_dir: str | None = None,
    env: Mapping[str, str] = SANDBOX_ENV,
    tmp_size_mb: int | None = 256,
    seccomp_fd: int | None = SECCOMP_FD,
) -> list[str]:
    """bwrap's arguments up to (not including) the command; pure, for tests and doctor."""
    a = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    if seccomp_fd is not None:
        a += ["--seccomp", str(seccomp_fd)]
    else:
        # the filter already refuses unshare/setns/clone(CLONE_NEWUSER); without it, let
        # bwrap forbid nested user namespaces (it costs ~10 ms per start)
        a += ["--disable-userns"]
    a += system_root_args()
    if python_prefix:
        a += ["--ro-bind", python_prefix, python_prefix]
    a += ["--ro-bind", worker_pkg, f"{WORKER_MOUNT}/codemode_worker"]
    if deps_dir and os.path.isdir(deps_dir):
        a += ["--ro-bind", deps_dir, DEPS_MOUNT]
    if site_dir and os.path.isdir(site_dir):
        a += ["--ro-bind", site_dir, SITE_MOUNT]
    size = ["--size", str(tmp_size_mb * 1024 * 1024)] if tmp_size_mb is not None else []
    a += [*size, "--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev"]
    a += [*size, "--tmpfs", "/dev/shm"]
    a += ["--bind", workspace, WORKSPACE, "--chdir", WORKSPACE]
    # bwrap's root and /dev are tmpfs owned by the sandbox uid: make them read-only so the
    # workspace, /tmp and /dev/shm are the only writable places
    a += ["--remount-ro", "/dev", "--remount-ro", "/"]
    for key, value in env.items():
        a += ["--setenv", key, value]
    return a


def system_root_args(etc: tuple[str, ...] = _RO_ETC) -> list[str]:
    """``/usr`` and the top-level links into it, read-only, plus a few files of ``/etc``."""
    a = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            a += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            a += ["--ro-bind", top, top]
    for path in etc:
        if os.path.exists(path):
            a += ["--ro-bind", path, path]
    return a


def setpriv_args(setpriv: str, uid: int, gid: int) -> list[str]:
    return [
        setpriv,
        f"--reuid={uid}",
        f"--regid={gid}",
        "--clear-groups",
        "--no-new-privs",
        "--bounding-set=-all",
        "--inh-caps=-all",
    ]
