"""What full isolation needs on this host, and one throwaway sandbox to prove it starts.

Kept apart from :mod:`.sandbox` (which builds launch lines) because these run once per
executor, from ``codemode doctor`` and before the first worker, and say what to fix.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import Any, Protocol

from ..errors import SandboxUnavailable
from ..isolation.jail import open_bpf, rundir
from . import seccomp as seccomp_mod
from .bwrap import WORKER_PKG
from .hostchecks import Check, can_private_mount, find_program, traversable, userns_check
from .subprocess import WORKER_ROOT


class _Sandbox(Protocol):
    """What the checks read of a ``SandboxExecutor`` (a protocol: no import back)."""

    bwrap: str
    setpriv: str
    uid: int
    gid: int
    use_seccomp: bool
    workspace: str | None
    deps_dir: str | None

    def _command(
        self,
        prep: dict[str, Any],
        procs: list[str],
        *,
        workspace: str,
        tmp_size_mb: int | None = None,
        seccomp_fd: int | None = None,
    ) -> tuple[list[str], str | None]: ...


def sandbox_checks(ex: _Sandbox) -> list[Check]:
    """Every precondition of full isolation, in the order a user should fix them."""
    out: list[Check] = []
    bw = find_program(ex.bwrap)
    out.append(
        Check(
            "bubblewrap",
            bw is not None,
            bw or f"{ex.bwrap!r} not found",
            "apt-get install bubblewrap (or dnf/pacman install bubblewrap)",
        )
    )
    out.append(userns_check())
    if os.geteuid() == 0:
        sp = find_program(ex.setpriv)
        out.append(
            Check(
                "unprivileged uid",
                sp is not None,
                f"drops root to uid {ex.uid} with {sp}" if sp else f"{ex.setpriv!r} not found",
                "apt-get install util-linux (provides setpriv)",
            )
        )
    else:
        out.append(Check("unprivileged uid", True, f"runs as uid {os.geteuid()} (not root)"))
    if ex.use_seccomp:
        ok, why = seccomp_mod.available()
        out.append(Check("seccomp", ok, why, "apt-get install libseccomp2; pip install pyseccomp"))
    if not traversable(WORKER_PKG, ex.uid, ex.gid, read_last=True) and not can_private_mount():
        out.append(
            Check(
                "worker package",
                False,
                f"{WORKER_ROOT} is not readable by uid {ex.uid}",
                "install codemode where other users can read it (e.g. a venv outside /root)",
            )
        )
    return out + _path_checks(ex)


def _path_checks(ex: _Sandbox) -> list[Check]:
    """Host directories to mount must be reachable by the sandbox uid (bwrap runs as it)."""
    out = []
    for label, path, whole in (
        ("workspace", ex.workspace, False),
        ("deps directory", ex.deps_dir, True),
    ):
        if path is None or not os.path.exists(path):
            continue
        target = path if whole else os.path.dirname(path)
        if not traversable(target, ex.uid, ex.gid, read_last=whole) and not can_private_mount():
            out.append(
                Check(
                    label,
                    False,
                    f"{path} is unreachable for uid {ex.uid} (a parent directory is "
                    "not searchable by it, e.g. /root)",
                    "use a base directory the sandbox can reach (e.g. "
                    "CODEMODE_BASE=/var/lib/codemode), chmod o+x its parents, or run "
                    "codemode as a non-root user",
                )
            )
    return out


def probe(ex: _Sandbox, prep: dict[str, Any]) -> None:
    """Start ``/bin/true`` in the same sandbox once, so failures say why before a session."""
    key = (prep["bwrap"], prep.get("setpriv"), ex.uid, ex.gid, prep.get("bpf"))
    if key in _probed:
        return
    with tempfile.TemporaryDirectory(dir=rundir()) as ws:
        if os.geteuid() == 0:
            os.chown(ws, ex.uid, ex.gid)
        bpf_fd = open_bpf(prep["bpf"]) if prep["seccomp"] else None
        points = None
        try:
            argv, points = ex._command(prep, [], workspace=ws, tmp_size_mb=1, seccomp_fd=bpf_fd)
            argv += [prep["python"], "-I", "-S", "-c", "pass"]
            env = {"PATH": "/usr/bin:/bin"}
            r = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=20,
                cwd="/",
                env=env,
                pass_fds=(bpf_fd,) if bpf_fd is not None else (),
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise SandboxUnavailable(f"the sandbox could not be started: {exc}") from exc
        finally:
            if bpf_fd is not None:
                os.close(bpf_fd)
            if points:
                shutil.rmtree(points, ignore_errors=True)
    if r.returncode != 0:
        raise SandboxUnavailable(
            f"a test sandbox failed (exit {r.returncode}): {r.stderr.strip()[-800:]}\n"
            "Fix: check that bubblewrap works for unprivileged users here "
            "(e.g. `bwrap --unshare-all --ro-bind / / true` as a normal user), or run "
            "`codemode doctor`."
        )
    _probed.add(key)


_probed: set[tuple[Any, ...]] = set()

__all__ = ["probe", "sandbox_checks"]
