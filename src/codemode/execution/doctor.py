"""``codemode doctor``: which sandbox protections are active on this machine.

Each line is *verified*, not assumed: after checking the prerequisites, the doctor starts
a real sandboxed worker and asks it, from the inside, what it can see (its uid and
capabilities, its namespaces against the host's, its seccomp mode, whether an internet
socket opens, whether host paths exist), and reads the limits' mechanisms from
:mod:`.limits`. :func:`diagnose` is the same report as data.

The static host checks it starts from (programs, user namespaces, which paths the
sandbox uid can reach, which interpreter it can run) are in :mod:`.hostchecks`, which the
executor runs before it starts anything.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import CodemodeError, ConfigError

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

    iso = Isolation(
        workspace=workspace.path,
        files=workspace.files_dir,
        private=tuple(workspace.private_paths()),
    )
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


def _config_line(base: Path | None) -> tuple[dict[str, Any], ConfigError | None, Any]:
    """The workspace's configuration: where, how many servers, its warnings or its error;
    and the open workspace (None when there is none or it is invalid)."""
    from ..workspace import Workspace, default_base

    path = (base or default_base()).expanduser()
    line: dict[str, Any] = {"name": "config", "active": True, "detail": "", "warnings": []}
    if not path.is_dir():
        line["detail"] = f"{path}: no workspace yet (created on first use)"
        return line, None, None
    logger = logging.getLogger("codemode.config")
    logger.disabled = True  # the report shows the warnings: not also on stderr
    try:
        ws = Workspace.open(path)
    except ConfigError as exc:
        line.update(active=False, detail=f"{path}: invalid (the error is below)")
        return line, exc, None
    finally:
        logger.disabled = False
    line["detail"] = f"{ws.path}: {len(ws.enabled_servers)} of {len(ws.servers)} servers enabled"
    line["warnings"] = list(ws.warnings)
    return line, None, ws


@click.command("doctor")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--bwrap", default="bwrap", show_default=True, help="bubblewrap binary to check.")
@click.option(
    "--base",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Workspace to check (default $CODEMODE_BASE or ~/.codemode).",
)
def doctor(as_json: bool, bwrap: str, base: Path | None) -> None:
    """Show which sandbox protections are active on this machine, how each upstream
    server of the workspace is isolated, and whether its configuration loads (with its
    warnings).

    Exits 1 when a protection is missing, 2 when the configuration is invalid.
    """
    from .sandbox import SandboxExecutor

    report = diagnose(SandboxExecutor(pool_size=0, bwrap=bwrap))
    config, problem, ws = _config_line(base)
    if ws is not None:
        report += server_isolation_lines(ws)
    if as_json:
        click.echo(json.dumps([*(asdict(p) for p in report), config], indent=2))
    else:
        width = max(len(p.name) for p in report)
        for p in report:
            mark = "ok  " if p.active else "MISSING"
            click.echo(f"{mark:8}{p.name:<{width}}  {p.detail}")
            if not p.active and p.fix:
                click.echo(f"{'':8}{'':<{width}}  fix: {p.fix}")
        mark = "INVALID" if problem else "WARNING" if config["warnings"] else "ok"
        click.echo(f"{mark:8}{'config':<{width}}  {config['detail']}")
        for warning in config["warnings"]:
            click.echo(f"{'':8}warning: {warning}")
    if problem is not None:
        raise problem  # the one error path of the CLI (codemode.cli): exit status 2
    core = [p for p in report if not p.name.startswith("limit:")]
    if not all(p.active for p in core):
        raise SystemExit(1)


__all__ = ["Protection", "diagnose", "doctor", "server_isolation_lines"]
