"""``codemode doctor``: which sandbox protections are active on this machine.

Each line is *verified*, not assumed: after checking the prerequisites, the doctor starts
a real sandboxed worker and asks it, from the inside, what it can see (its uid and
capabilities, its namespaces against the host's, its seccomp mode, whether an internet
socket opens, whether host paths exist), and reads the limits' mechanisms from
:mod:`.limits`. :func:`diagnose` is the same report as data.

The static host checks (programs, user namespaces, which paths the sandbox uid can reach,
which interpreter it can run) live here too; the executor runs them before it starts.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import click

from ..errors import CodemodeError, SandboxUnavailable

if TYPE_CHECKING:
    from .sandbox import SandboxExecutor

_NAMESPACES = ("user", "pid", "net", "ipc", "uts", "cgroup", "mnt")
_HOST_PATHS = ("/root", "/home", "/etc/shadow", "/etc/passwd", "/sys", "/run", "/var")

_PROBE = r"""
import json, os, socket
st = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
ns = {n: os.readlink("/proc/self/ns/" + n) for n in %r}
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    inet = "opened"
except OSError as e:
    inet = e.strerror or str(e)
try:
    socket.getaddrinfo("example.com", 80)
    dns = "resolved"
except OSError as e:
    dns = e.strerror or str(e)
print(json.dumps({
    "uid": os.getuid(), "cap_eff": st["CapEff"].strip(), "seccomp": st["Seccomp"].strip(),
    "nnp": st["NoNewPrivs"].strip(), "ns": ns, "inet": inet, "dns": dns,
    "present": [p for p in %r if os.path.exists(p)],
    "writable_root": os.access("/usr", os.W_OK),
}))
""" % (_NAMESPACES, _HOST_PATHS)  # noqa: UP031


# -- host checks (also used by the executor before it starts anything) --------------------


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


# -- the report ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Protection:
    """One line of the doctor's report."""

    name: str
    active: bool
    detail: str
    fix: str = ""


def _host_uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


async def _probe(executor: SandboxExecutor) -> tuple[dict[str, Any], int | None]:
    async def no_calls(method: str, params: dict[str, Any]) -> Any:
        raise CodemodeError("the doctor's probe makes no host calls")

    worker = await executor.start(no_calls)
    try:
        uid = _host_uid(getattr(worker, "pid", -1))
        result = await worker.run(_PROBE, 20.0)
    finally:
        await worker.close()
    if result.error is not None:
        raise CodemodeError(f"the probe failed inside the sandbox: {result.error.message}")
    data: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return data, uid


def diagnose(executor: SandboxExecutor | None = None) -> list[Protection]:
    """Check prerequisites, then verify each protection from inside a real sandbox."""
    from .sandbox import SandboxExecutor

    ex = executor or SandboxExecutor(pool_size=0)
    out = [Protection(c.name, c.ok, c.detail, c.fix) for c in ex.checks()]
    if not all(p.active for p in out):
        out.append(Protection("sandbox", False, "not started: fix the lines above first"))
        return out + _limit_lines(ex)
    try:
        data, host_uid = asyncio.run(_probe(ex))
    except CodemodeError as exc:
        out.append(Protection("sandbox", False, f"could not start: {exc}", "see the message"))
        return out + _limit_lines(ex)
    prep = ex._prepare()
    out.append(Protection("interpreter", True, f"{prep['python']} (mounted read-only)"))
    out.append(
        Protection(
            "host uid of the sandbox",
            host_uid is not None and host_uid != 0,
            f"uid {host_uid} outside, {data['uid']} inside",
        )
    )
    out.append(
        Protection(
            "capabilities dropped",
            int(data["cap_eff"], 16) == 0,
            f"CapEff={data['cap_eff']}",
        )
    )
    own = {n: os.readlink(f"/proc/self/ns/{n}") for n in _NAMESPACES}
    shared = [n for n in _NAMESPACES if data["ns"].get(n) == own[n]]
    out.append(
        Protection(
            "namespaces",
            not shared,
            "all new: " + ", ".join(_NAMESPACES) if not shared else "shared: " + ", ".join(shared),
        )
    )
    out.append(
        Protection(
            "seccomp filter",
            data["seccomp"] == "2",
            "filter mode" if data["seccomp"] == "2" else f"mode {data['seccomp']}",
            "pip install pyseccomp; apt-get install libseccomp2",
        )
    )
    out.append(Protection("no_new_privs", data["nnp"] == "1", f"NoNewPrivs={data['nnp']}"))
    out.append(
        Protection(
            "network",
            data["inet"] != "opened" and data["dns"] != "resolved",
            f"AF_INET socket: {data['inet']}; DNS: {data['dns']}",
        )
    )
    out.append(
        Protection(
            "host files hidden",
            not data["present"] and not data["writable_root"],
            "absent: " + ", ".join(_HOST_PATHS)
            if not data["present"]
            else "visible: " + ", ".join(data["present"]),
        )
    )
    return out + _limit_lines(ex)


def server_isolation_lines(workspace: Any) -> list[Protection]:
    """One line per enabled stdio server of ``workspace``: its jail, or that it has none."""
    from ..config import StdioServerConfig
    from ..isolation.servers import Isolation, plan

    iso = Isolation(workspace=workspace.path, files=workspace.files_dir)
    out = []
    for name, cfg in sorted(workspace.enabled_servers.items()):
        if not isinstance(cfg, StdioServerConfig):
            continue
        try:
            launch = plan(cfg, iso, dry_run=True)
        except CodemodeError as exc:
            out.append(Protection(f"server {name}", False, str(exc)))
            continue
        if cfg.isolation == "none":
            out.append(
                Protection(
                    f"server {name}",
                    False,
                    f"NOT isolated (isolation: none): runs as uid {os.geteuid()} with its rights",
                    'remove "isolation": "none" from its entry in mcp.json',
                )
            )
        else:
            out.append(Protection(f"server {name}", True, launch.summary))
    return out


def _limit_lines(ex: SandboxExecutor) -> list[Protection]:
    from .spawn import raise_open_files_limit

    before, now, hard = raise_open_files_limit()
    shown = "unlimited" if hard == resource.RLIM_INFINITY else str(hard)
    lines = [
        Protection(
            "limit: host open files",
            now == hard or now >= 1 << 16,
            f"{now} for this process (hard limit {shown}"
            + (f"; raised from {before} at start)" if now != before else ")"),
            "raise the hard limit: LimitNOFILE= in a systemd unit, or `ulimit -Hn` before start",
        )
    ]
    for st in ex.limit_status():
        detail = f"{st.value} via {st.mechanism}" + (f" ({st.note})" if st.note else "")
        fix = "" if st.active else "mount the cgroup controller (v1) or delegate it (v2)"
        lines.append(Protection(f"limit: {st.name}", st.active, detail, fix))
    return lines


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--bwrap", default="bwrap", show_default=True, help="bubblewrap binary to check.")
@click.option(
    "--base",
    type=click.Path(file_okay=False),
    default=None,
    help="Workspace whose upstream servers to check (default ~/.codemode).",
)
def doctor(as_json: bool, bwrap: str, base: str | None) -> None:
    """Show which sandbox protections are active on this machine, and how each upstream
    server of the workspace is isolated."""
    from ..workspace import Workspace
    from .sandbox import SandboxExecutor

    report = diagnose(SandboxExecutor(pool_size=0, bwrap=bwrap))
    try:
        report += server_isolation_lines(Workspace.open(base))
    except CodemodeError as exc:
        report.append(Protection("servers", False, f"cannot read the workspace: {exc}"))
    if as_json:
        click.echo(json.dumps([asdict(p) for p in report], indent=2))
    else:
        width = max(len(p.name) for p in report)
        for p in report:
            mark = "ok  " if p.active else "MISSING"
            click.echo(f"{mark:8}{p.name:<{width}}  {p.detail}")
            if not p.active and p.fix:
                click.echo(f"{'':8}{'':<{width}}  fix: {p.fix}")
    core = [p for p in report if not p.name.startswith("limit:")]
    if not all(p.active for p in core):
        raise SystemExit(1)


__all__ = [
    "Check",
    "Protection",
    "can_private_mount",
    "diagnose",
    "doctor",
    "find_program",
    "sandbox_python",
    "server_isolation_lines",
    "traversable",
    "userns_check",
    "writable_by",
]
