"""Resource limits for sandboxed workers: cgroups where the machine has them, rlimits else.

Each worker gets its own cgroup (v1: one directory per controller under
``/sys/fs/cgroup/<controller>/codemode/``; v2: a leaf under a delegated ``codemode``
group), so a memory bomb or fork bomb in one session cannot starve another. The worker
joins its cgroups *before* it execs into bubblewrap (the launch line written by
:meth:`WorkerLimits.shell_prefix` runs as the host user), so no code of the agent ever
runs outside them.

rlimits are applied by the same launch line and inherited by everything in the sandbox.
They are per process (``RLIMIT_AS``, ``RLIMIT_FSIZE``, ``RLIMIT_NOFILE``, ``RLIMIT_CPU``)
except ``RLIMIT_NPROC``, which the kernel counts per user: it is only a fallback, and the
report says that it is shared by every sandbox running as the same uid.

Every limit says which mechanism enforces it (:func:`plan`), so ``codemode doctor`` and
the executor's warnings never claim a protection that is not there.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import time
import uuid
from dataclasses import dataclass, field

CGROUP_ROOT = "/sys/fs/cgroup"
GROUP_NAME = "codemode"
_V1_CONTROLLERS = ("memory", "pids", "cpu")


@dataclass(frozen=True)
class Limits:
    """What one sandboxed worker may use. ``None`` switches a limit off."""

    memory_mb: int | None = 1024
    max_pids: int | None = 256
    cpu_cores: float | None = 1.0
    """CPU bandwidth (cgroup ``cpu`` quota); runaway loops are also cut by run timeouts."""
    cpu_seconds: int | None = None
    """Total CPU time of a worker (``RLIMIT_CPU``); off by default: workers are long-lived."""
    file_size_mb: int | None = 1024
    open_files: int | None = 1024
    tmp_size_mb: int | None = 256
    """Size of the private tmpfs mounted on /tmp."""
    workspace_mb: int | None = 1024
    """Disk the workspace may use (allocated blocks), checked by the host's sweep."""
    workspace_files: int | None = 50_000
    """Files and directories the workspace may hold, checked by the host's sweep."""


@dataclass(frozen=True)
class LimitStatus:
    """How one limit is enforced on this machine."""

    name: str
    value: str
    mechanism: str
    active: bool
    note: str = ""


@dataclass(frozen=True)
class CgroupSupport:
    """Which cgroup controllers this process can use for per-worker groups."""

    version: int | None
    base: dict[str, str] = field(default_factory=dict)
    """controller -> directory under which per-worker groups are created."""
    why_not: str = ""

    def has(self, controller: str) -> bool:
        return controller in self.base


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _ensure_dir(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return False
    return _writable_dir(path)


def _detect_v1(root: str) -> CgroupSupport | None:
    base: dict[str, str] = {}
    for ctrl in _V1_CONTROLLERS:
        mount = os.path.join(root, ctrl)
        if not os.path.isfile(os.path.join(mount, "cgroup.procs")):
            continue
        group = os.path.join(mount, GROUP_NAME)
        if _ensure_dir(group):
            base[ctrl] = group
    if not base:
        return None
    return CgroupSupport(version=1, base=base)


def _own_v2_path() -> str | None:
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        return None
    return None


def _detect_v2(root: str) -> CgroupSupport | None:
    """Use v2 only where it is safe without moving the host process: at the root group."""
    if not os.path.isfile(os.path.join(root, "cgroup.controllers")):
        return None
    own = _own_v2_path()
    if own not in ("/", ""):
        return CgroupSupport(
            version=2, why_not=f"cgroup v2: this process is in {own}, not delegated to codemode"
        )
    try:
        with open(os.path.join(root, "cgroup.controllers")) as fh:
            offered = set(fh.read().split())
        wanted = [c for c in ("memory", "pids", "cpu") if c in offered]
        if not wanted:
            return CgroupSupport(version=2, why_not="cgroup v2 has no memory/pids/cpu controllers")
        group = os.path.join(root, GROUP_NAME)
        for parent in (root, group):
            if parent == group:
                os.makedirs(group, exist_ok=True)
            with open(os.path.join(parent, "cgroup.subtree_control"), "w") as fh:
                fh.write(" ".join("+" + c for c in wanted))
    except OSError as exc:
        return CgroupSupport(version=2, why_not=f"cgroup v2 not writable: {exc}")
    return CgroupSupport(version=2, base={c: group for c in wanted})


_support: CgroupSupport | None = None


def detect_cgroups(root: str = CGROUP_ROOT, *, refresh: bool = False) -> CgroupSupport:
    """Find usable controllers (v1 first: a hybrid v2 mount here usually has none)."""
    global _support
    if _support is not None and not refresh and root == CGROUP_ROOT:
        return _support
    found = _detect_v1(root)
    if found is None:
        mounted = [c for c in _V1_CONTROLLERS if os.path.isfile(os.path.join(root, c, "tasks"))]
        why = (
            f"cgroup v1 controllers are not writable by uid {os.geteuid()}"
            if mounted
            else "no cgroup controllers"
        )
        found = _detect_v2(root) or CgroupSupport(version=None, why_not=why)
        if found.version == 2 and not found.base:
            found = CgroupSupport(version=None, why_not=found.why_not)
    if root == CGROUP_ROOT:
        _support = found
        for base in set(found.base.values()):
            sweep_stale(base)
    return found


def sweep_stale(base: str, older_than: float = 60.0) -> int:
    """Remove empty worker groups left by a host process that was killed (``kill -9``).

    Only groups older than ``older_than`` seconds are touched: a fresh one may belong to
    a worker another process is starting right now.
    """
    removed = 0
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            if not entry.name.startswith("w-") or not entry.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat().st_mtime < older_than:
                    continue
                with open(os.path.join(entry.path, "cgroup.procs")) as fh:
                    if fh.read().strip():
                        continue
                os.rmdir(entry.path)
                removed += 1
    return removed


BACKGROUND_SHARES = "2"
"""cpu.shares of the background group (the minimum): it runs when nothing else wants to."""


def background_cpu_group(support: CgroupSupport) -> str | None:
    """The cpu group where workers started ahead of demand boot (cgroup v1 only: in v2 a
    process moves between groups for every controller at once), beside codemode's own
    group so that it competes with the server itself, at the lowest weight. None when it
    cannot be made."""
    base = support.base.get("cpu")
    if support.version != 1 or base is None:
        return None
    path = os.path.join(os.path.dirname(base), GROUP_NAME + "-background")
    if path in _made:
        return path
    try:
        os.makedirs(path, exist_ok=True)
        _write(os.path.join(path, "cpu.shares"), BACKGROUND_SHARES)
    except OSError:
        return None
    _made.add(path)
    return path


_made: set[str] = set()


def release_background_groups() -> None:
    """Remove the background cpu group once no worker is left in it, so a stopped server
    leaves no cgroup behind; another server still using it keeps it (rmdir fails busy)."""
    for path in list(_made):
        try:
            os.rmdir(path)
        except OSError:
            continue
        _made.discard(path)


def _rlimit_value(res: int, wanted: int) -> int:
    """Never ask for more than the current hard limit (raising it would fail)."""
    _, hard = resource.getrlimit(res)
    return wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)


def plan(limits: Limits, support: CgroupSupport | None = None) -> list[LimitStatus]:
    """Which mechanism will enforce each limit (no side effects besides detection)."""
    cg = support if support is not None else detect_cgroups()
    via = f"cgroup v{cg.version}" if cg.version else ""
    out: list[LimitStatus] = []
    if limits.memory_mb is not None:
        if cg.has("memory"):
            out.append(
                LimitStatus(
                    "memory",
                    f"{limits.memory_mb} MB",
                    f"{via} memory",
                    True,
                    "per session; RLIMIT_AS per process as well",
                )
            )
        else:
            out.append(
                LimitStatus(
                    "memory",
                    f"{limits.memory_mb} MB",
                    "RLIMIT_AS",
                    True,
                    "address space per process; the session's processes together by the "
                    "host every 0.25 s (the largest is killed): "
                    + (cg.why_not or "no memory controller"),
                )
            )
    if limits.max_pids is not None:
        if cg.has("pids"):
            out.append(LimitStatus("processes", str(limits.max_pids), f"{via} pids", True))
        else:
            out.append(
                LimitStatus(
                    "processes",
                    str(limits.max_pids),
                    "RLIMIT_NPROC",
                    True,
                    "counted per uid (per user namespace since Linux 5.14)",
                )
            )
    if limits.cpu_cores is not None:
        if cg.has("cpu"):
            out.append(LimitStatus("cpu rate", f"{limits.cpu_cores:g} cores", f"{via} cpu", True))
        else:
            out.append(
                LimitStatus(
                    "cpu rate", f"{limits.cpu_cores:g} cores", "none", False, "no cpu controller"
                )
            )
    if limits.cpu_seconds is not None:
        out.append(LimitStatus("cpu time", f"{limits.cpu_seconds} s", "RLIMIT_CPU", True))
    out.append(LimitStatus("run time", "per run", "host timeout: kill process group", True))
    if limits.file_size_mb is not None:
        out.append(LimitStatus("file size", f"{limits.file_size_mb} MB", "RLIMIT_FSIZE", True))
    if limits.open_files is not None:
        out.append(LimitStatus("open files", str(limits.open_files), "RLIMIT_NOFILE", True))
    if limits.tmp_size_mb is not None:
        out.append(LimitStatus("/tmp size", f"{limits.tmp_size_mb} MB", "tmpfs size", True))
    if limits.workspace_mb is not None or limits.workspace_files is not None:
        mb = "no byte limit" if limits.workspace_mb is None else f"{limits.workspace_mb} MB"
        files = "no file limit" if limits.workspace_files is None else f"{limits.workspace_files}"
        out.append(
            LimitStatus(
                "workspace quota",
                f"{mb}, {files} files",
                "host sweep during and after each run",
                True,
                "the run that goes over is stopped",
            )
        )
    return out


def _write(path: str, value: str) -> None:
    with open(path, "w") as fh:
        fh.write(value)


class WorkerLimits:
    """The cgroups and rlimits of one worker: created before spawn, removed after exit."""

    def __init__(self, limits: Limits, support: CgroupSupport | None = None) -> None:
        self.limits = limits
        self.support = support if support is not None else detect_cgroups()
        self.name = "w-" + uuid.uuid4().hex[:12]
        self.groups: dict[str, str] = {}
        self._create()

    def _create(self) -> None:
        lim, cg = self.limits, self.support
        wanted: dict[str, list[tuple[str, str]]] = {}
        if lim.memory_mb is not None and cg.has("memory"):
            size = str(lim.memory_mb * 1024 * 1024)
            if cg.version == 1:
                wanted["memory"] = [
                    ("memory.limit_in_bytes", size),
                    ("memory.memsw.limit_in_bytes", size),
                ]
            else:
                wanted["memory"] = [("memory.max", size), ("memory.swap.max", "0")]
        if lim.max_pids is not None and cg.has("pids"):
            wanted["pids"] = [("pids.max", str(lim.max_pids))]
        if lim.cpu_cores is not None and cg.has("cpu"):
            period = 100_000
            quota = max(1000, int(lim.cpu_cores * period))
            if cg.version == 1:
                wanted["cpu"] = [
                    ("cpu.cfs_period_us", str(period)),
                    ("cpu.cfs_quota_us", str(quota)),
                ]
            else:
                wanted["cpu"] = [("cpu.max", f"{quota} {period}")]
        for ctrl, settings in wanted.items():
            path = os.path.join(cg.base[ctrl], self.name)
            if path not in self.groups.values():
                os.makedirs(path, exist_ok=True)
            self.groups[ctrl] = path
            for fname, value in settings:
                target = os.path.join(path, fname)
                if fname.endswith("memsw.limit_in_bytes") and not os.path.exists(target):
                    continue  # swap accounting off: memory.limit_in_bytes alone holds
                _write(target, value)

    def launch_procs_files(self, background: bool = False) -> list[str]:
        """The ``cgroup.procs`` files the launcher writes ``0`` into: its own groups, but
        for a worker started ahead of demand (``background``) not its cpu group: the host
        puts it in the background one (:meth:`background`), and moves it to its own when a
        session takes it (:meth:`foreground`). The launcher never touches its cpu group
        then, so it cannot undo a move made while it was still starting."""
        files = self.procs_files()
        cpu = self.groups.get("cpu")
        if not background or cpu is None or background_cpu_group(self.support) is None:
            return files
        return [f for f in files if f != os.path.join(cpu, "cgroup.procs")]

    def background(self, pid: int) -> None:
        """Put a just-started worker in the shared background cpu group (cgroup v1)."""
        bg = background_cpu_group(self.support)
        if bg is not None and "cpu" in self.groups:
            with contextlib.suppress(OSError):
                _write(os.path.join(bg, "cgroup.procs"), str(pid))

    def foreground(self, pids: list[int]) -> None:
        """Move the worker's processes into its own cpu group (full share, its quota).
        Raises ``OSError`` when a live one cannot be moved: it would run without its
        cpu limit."""
        cpu = self.groups.get("cpu")
        if cpu is None:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
                _write(os.path.join(cpu, "cgroup.procs"), str(pid))

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the launcher writes ``0`` into (deduplicated for v2)."""
        return sorted({os.path.join(p, "cgroup.procs") for p in self.groups.values()})

    def rlimits(self) -> list[tuple[str, int]]:
        """``(resource name, value)`` pairs the worker applies to itself before any code.

        ``RLIMIT_AS`` is set even when the memory cgroup is active: a plain oversized
        allocation then fails with ``MemoryError`` instead of the OOM killer ending the
        whole session.
        """
        lim, out = self.limits, []
        if lim.memory_mb is not None:
            out.append(("RLIMIT_AS", _rlimit_value(resource.RLIMIT_AS, lim.memory_mb << 20)))
        if lim.max_pids is not None and "pids" not in self.groups:
            out.append(("RLIMIT_NPROC", _rlimit_value(resource.RLIMIT_NPROC, lim.max_pids)))
        if lim.cpu_seconds is not None:
            out.append(("RLIMIT_CPU", _rlimit_value(resource.RLIMIT_CPU, lim.cpu_seconds)))
        if lim.file_size_mb is not None:
            size = _rlimit_value(resource.RLIMIT_FSIZE, lim.file_size_mb << 20)
            out.append(("RLIMIT_FSIZE", size))
        if lim.open_files is not None:
            out.append(("RLIMIT_NOFILE", _rlimit_value(resource.RLIMIT_NOFILE, lim.open_files)))
        return out

    def status(self) -> list[LimitStatus]:
        return plan(self.limits, self.support)

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.procs_files():
            with contextlib.suppress(OSError), open(path) as fh:
                found.update(int(x) for x in fh.read().split())
        return sorted(found)

    def kill_all(self) -> None:
        """SIGKILL whatever is still in the worker's groups (escaped double-forks included)."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def cleanup(self, timeout: float = 2.0) -> bool:
        """Kill leftovers and remove the groups; True when every directory is gone."""
        deadline = time.monotonic() + timeout
        remaining = dict(self.groups)
        while remaining:
            self.kill_all()
            for ctrl, path in list(remaining.items()):
                try:
                    os.rmdir(path)
                except FileNotFoundError:
                    pass
                except OSError:
                    continue  # EBUSY while the last processes exit
                del remaining[ctrl]
            if not remaining or time.monotonic() > deadline:
                break
            time.sleep(0.005)
        self.groups = remaining
        return not remaining


__all__ = [
    "CgroupSupport",
    "LimitStatus",
    "Limits",
    "WorkerLimits",
    "detect_cgroups",
    "plan",
    "sweep_stale",
]
