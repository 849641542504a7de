"""The sandbox executor runs sessions inside bubblewrap, and refuses when it cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import warnings
from collections.abc import AsyncIterator, Iterator

import pytest
from click.testing import CliRunner

from codemode import ConfigError, SandboxUnavailable, Session
from codemode.execution import pool
from codemode.execution.doctor import diagnose, doctor
from codemode.execution.hostchecks import can_private_mount
from codemode.execution.limits import CgroupSupport, Limits, WorkerLimits, detect_cgroups, plan
from codemode.execution.sandbox import (
    WORKSPACE,
    SandboxExecutor,
    WeakerSandboxWarning,
    bwrap_args,
    setpriv_args,
)
from codemode.execution.seccomp import DENIED_SYSCALLS, bpf_program

pytestmark = pytest.mark.anyio

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap not installed")


@pytest.fixture
def workspace() -> Iterator[str]:
    """A host directory the sandbox uid can reach (pytest's tmp_path is mode 700)."""
    path = tempfile.mkdtemp(prefix="cm-sandbox-ws-", dir="/var/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def sandbox(workspace: str) -> AsyncIterator[Session]:
    async with Session(SandboxExecutor(workspace=workspace, pool_size=0)) as s:
        yield s


@needs_bwrap
async def test_code_runs_as_an_unprivileged_user_in_the_workspace(sandbox: Session) -> None:
    r = await sandbox.run("import os\n(os.getuid() != 0, os.getcwd())")
    assert r.value == [True, WORKSPACE]


@needs_bwrap
async def test_state_persists_between_runs(sandbox: Session) -> None:
    await sandbox.run("import math\nx = 41\ndef f(v): return v + 1")
    assert (await sandbox.run("f(x) + int(math.sqrt(0))")).value == 42


@needs_bwrap
async def test_the_workspace_is_shared_with_the_host_both_ways(
    sandbox: Session, workspace: str
) -> None:
    with open(os.path.join(workspace, "from_host.txt"), "w") as fh:
        fh.write("hello")
    r = await sandbox.run("open('from_host.txt').read()")
    assert r.value == "hello"
    await sandbox.run("open('from_sandbox.txt', 'w').write('back')")
    with open(os.path.join(workspace, "from_sandbox.txt")) as fh:
        assert fh.read() == "back"


@needs_bwrap
async def test_a_symlink_out_of_the_workspace_leads_nowhere(
    sandbox: Session, workspace: str
) -> None:
    os.symlink("/etc/passwd", os.path.join(workspace, "passwd"))
    os.symlink("/root", os.path.join(workspace, "home"))
    r = await sandbox.run("import os\n[os.path.exists('passwd'), os.path.exists('home')]")
    assert r.value == [False, False]


@needs_bwrap
async def test_top_level_await_and_threads_work_inside(sandbox: Session) -> None:
    code = (
        "import asyncio, threading\n"
        "out = []\n"
        "t = threading.Thread(target=out.append, args=(1,)); t.start(); t.join()\n"
        "await asyncio.sleep(0, result=len(out))"
    )
    assert (await sandbox.run(code)).value == 1


@needs_bwrap
async def test_a_timeout_interrupts_the_run_and_keeps_the_state(sandbox: Session) -> None:
    await sandbox.run("kept = 'yes'")
    r = await sandbox.run("while True: pass", timeout=0.5)
    assert r.timed_out and not r.state_lost
    assert (await sandbox.run("kept")).value == "yes"


@needs_bwrap
async def test_code_ignoring_the_interrupt_is_killed_through_bwrap(workspace: str) -> None:
    ex = SandboxExecutor(workspace=workspace, pool_size=0, interrupt_grace=0.3)
    async with Session(ex) as s:
        code = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)"
        r = await s.run(code, timeout=0.5)
        assert r.timed_out and r.state_lost
        assert r.duration_ms < 5000
        assert (await s.run("'fresh'")).value == "fresh"


@needs_bwrap
async def test_a_segfault_is_reported_as_a_crash_and_the_session_recovers(sandbox: Session) -> None:
    r = await sandbox.run("import ctypes\nctypes.string_at(0)")
    assert r.error is not None and r.error.type == "WorkerCrashed" and r.state_lost
    assert "SIGSEGV" in r.error.message  # bwrap's 128+11 is reported as the signal
    assert (await sandbox.run("1")).value == 1


async def test_a_missing_bubblewrap_is_refused_with_the_fix(workspace: str) -> None:
    ex = SandboxExecutor(workspace=workspace, bwrap="/nonexistent/bwrap", pool_size=0)
    with pytest.raises(SandboxUnavailable) as info:
        await ex.start(_no_calls)
    message = str(info.value)
    assert "/nonexistent/bwrap" in message and "apt-get install bubblewrap" in message
    assert "allow_weaker=True" in message


async def test_a_bubblewrap_that_cannot_create_namespaces_is_refused_with_its_message(
    workspace: str,
) -> None:
    d = tempfile.mkdtemp(prefix="cm-fake-bwrap-", dir="/var/tmp")
    try:
        os.chmod(d, 0o755)
        fake = os.path.join(d, "bwrap")
        with open(fake, "w") as fh:
            fh.write(
                "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n"
            )
        os.chmod(fake, 0o755)
        ex = SandboxExecutor(workspace=workspace, bwrap=fake, pool_size=0)
        with pytest.raises(SandboxUnavailable, match="No permissions to create new namespace"):
            await ex.start(_no_calls)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_verify_starts_a_real_sandbox_and_reports_a_broken_one() -> None:
    if shutil.which("bwrap") is not None:
        assert all(c.ok for c in SandboxExecutor(pool_size=0).verify())
    d = tempfile.mkdtemp(prefix="cm-fake-bwrap-", dir="/var/tmp")
    try:
        os.chmod(d, 0o755)
        fake = os.path.join(d, "bwrap")
        with open(fake, "w") as fh:
            fh.write("#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n")
        os.chmod(fake, 0o755)
        report = {c.name: c for c in SandboxExecutor(bwrap=fake, pool_size=0).verify()}
        assert not report["test sandbox"].ok and "uid map" in report["test sandbox"].detail
    finally:
        shutil.rmtree(d, ignore_errors=True)


async def test_allow_weaker_runs_without_bubblewrap_and_says_so(workspace: str) -> None:
    ex = SandboxExecutor(
        workspace=workspace, bwrap="/nonexistent/bwrap", pool_size=0, allow_weaker=True
    )
    with pytest.warns(WeakerSandboxWarning, match="NO isolation"):
        async with Session(ex) as s:
            assert (await s.run("1 + 1")).value == 2


@needs_bwrap
async def test_a_workspace_under_a_private_directory_is_bound_privately_or_refused() -> None:
    if os.geteuid() != 0:
        pytest.skip("a non-root host user is the sandbox uid: its own directories are reachable")
    hidden = tempfile.mkdtemp(prefix="cm-hidden-", dir="/var/tmp")  # mode 700, like /root
    try:
        files, deps = os.path.join(hidden, "files"), os.path.join(hidden, "deps", "dpkg")
        os.makedirs(files)
        os.makedirs(deps)
        with open(os.path.join(deps, "__init__.py"), "w") as fh:
            fh.write("V = 'deps ok'")
        deps_dir = os.path.dirname(deps)
        ex = SandboxExecutor(workspace=files, deps_dir=deps_dir, pool_size=0)
        if not can_private_mount():
            with pytest.raises(ConfigError, match="chmod o\\+x"):
                await ex.start(_no_calls)
            return
        async with Session(ex) as s:
            r = await s.run("import dpkg\nopen('out.txt', 'w').write('x')\ndpkg.V")
            assert r.value == "deps ok", r.to_text()
        assert os.path.exists(os.path.join(files, "out.txt"))
        with open("/proc/self/mountinfo") as fh:
            assert hidden not in fh.read()  # the binds lived in a private namespace only
    finally:
        shutil.rmtree(hidden, ignore_errors=True)


@needs_bwrap
async def test_sessions_without_a_workspace_get_private_ones_removed_on_close() -> None:
    ex = SandboxExecutor(pool_size=0)
    async with Session(ex) as a, Session(ex) as b:
        await a.run("open('mine.txt', 'w').write('a')")
        assert (await b.run("import os\nos.listdir('.')")).value == []
        r = await a.run("import os\nos.listdir('.')")
        assert r.value == ["mine.txt"]


@needs_bwrap
async def test_warm_pool_hands_out_ready_sandboxed_workers(workspace: str) -> None:
    ex = SandboxExecutor(workspace=workspace, pool_size=1)
    try:
        await ex.warm()
        key = ex.pool_key()
        assert len(pool.get_pool(key, ex.spawn, 1)) == 1
        async with Session(ex) as s:
            assert (await s.run("import os\nos.getcwd()")).value == WORKSPACE
    finally:
        pool.get_pool(ex.pool_key(), ex.spawn, 1).close()


def test_executors_with_different_workspaces_never_share_a_pool(workspace: str) -> None:
    other = tempfile.mkdtemp(prefix="cm-sandbox-ws-", dir="/var/tmp")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", WeakerSandboxWarning)  # machines without bwrap
            a = SandboxExecutor(workspace=workspace, allow_weaker=True)
            b = SandboxExecutor(workspace=other, allow_weaker=True)
            assert a.pool_key() != b.pool_key()
    finally:
        shutil.rmtree(other, ignore_errors=True)


@needs_bwrap
async def test_per_worker_cgroups_are_removed_when_the_session_closes(workspace: str) -> None:
    support = detect_cgroups()
    if not support.base:
        pytest.skip("no cgroup controllers here")
    async with Session(SandboxExecutor(workspace=workspace, pool_size=0)) as s:
        await s.run("1")
        pid = s._worker.pid  # type: ignore[union-attr]  # the host pid of bwrap
        with open(f"/proc/{pid}/cgroup") as fh:
            ours = [line.split(":")[2].strip() for line in fh if "/codemode/w-" in line]
        dirs = [
            os.path.join(support.base[c], os.path.basename(p))
            for c in support.base
            for p in ours[:1]
        ]
        assert ours and all(os.path.isdir(d) for d in dirs)
    assert not any(os.path.exists(d) for d in dirs)


def test_bwrap_line_drops_everything_and_mounts_no_host_root() -> None:
    args = bwrap_args(bwrap="bwrap", workspace="/var/tmp/ws")
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL" and "--clearenv" in args
    assert "--share-net" not in args
    binds = [args[i + 1] for i, a in enumerate(args) if a in ("--bind", "--ro-bind")]
    assert "/" not in binds and "/proc" not in binds and "/home" not in binds
    writable = [args[i + 1] for i, a in enumerate(args) if a == "--bind"]
    assert writable == ["/var/tmp/ws"]


def test_root_drops_to_the_sandbox_uid_before_bwrap() -> None:
    line = setpriv_args("setpriv", 65534, 65534)
    assert "--reuid=65534" in line and "--clear-groups" in line and "--no-new-privs" in line


def test_seccomp_program_is_built_for_the_listed_calls() -> None:
    assert {"ptrace", "mount", "bpf", "keyctl", "userfaultfd", "perf_event_open"} <= set(
        DENIED_SYSCALLS
    )
    assert len(bpf_program()) > 100 and len(bpf_program()) % 8 == 0


def test_without_cgroups_every_limit_falls_back_to_rlimits_and_says_so() -> None:
    none = CgroupSupport(version=None, why_not="no cgroup controllers")
    report = {s.name: s for s in plan(Limits(), none)}
    assert report["memory"].mechanism == "RLIMIT_AS"
    assert report["processes"].mechanism == "RLIMIT_NPROC"
    assert not report["cpu rate"].active
    names = dict(WorkerLimits(Limits(), none).rlimits())
    assert {"RLIMIT_AS", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_NOFILE"} <= set(names)


@needs_bwrap
def test_doctor_verifies_every_protection_from_inside() -> None:
    report = {p.name: p for p in diagnose(SandboxExecutor(pool_size=0))}
    for name in ("namespaces", "seccomp filter", "network", "capabilities dropped"):
        assert report[name].active, report[name]


@needs_bwrap
def test_doctor_command_prints_json() -> None:
    result = CliRunner().invoke(doctor, ["--json"])
    assert result.exit_code == 0, result.output
    assert '"name": "network"' in result.output


def test_doctor_command_fails_and_names_the_fix_without_bwrap() -> None:
    result = CliRunner().invoke(doctor, ["--bwrap", "/nonexistent/bwrap"])
    assert result.exit_code == 1
    assert "apt-get install bubblewrap" in result.output


async def _no_calls(method: str, params: dict[str, object]) -> object:
    raise AssertionError(f"unexpected host call {method}")


@needs_bwrap
async def test_without_cgroups_rlimits_still_stop_a_fork_bomb_and_a_big_allocation(
    workspace: str,
) -> None:
    limits = Limits(max_pids=32, memory_mb=256)
    ex = SandboxExecutor(workspace=workspace, pool_size=0, cgroups=False, limits=limits)
    assert {s.mechanism for s in ex.limit_status()} >= {"RLIMIT_AS", "RLIMIT_NPROC"}
    async with Session(ex) as s:
        code = (
            "import os\nkids = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
            "            import time; time.sleep(5); os._exit(0)\n        kids += 1\n"
            "except OSError as e:\n    err = type(e).__name__\n(kids, err)"
        )
        r = await s.run(code, timeout=10)
        assert r.value is not None and r.value[0] < 32 and r.value[1] == "BlockingIOError"
        r = await s.run("x = bytearray(2**30)")
        assert r.error is not None and r.error.type == "MemoryError"


@needs_bwrap
async def test_without_a_memory_cgroup_the_host_holds_the_whole_tree_to_the_limit(
    workspace: str,
) -> None:
    """RLIMIT_AS bounds each process alone: four children of 90 MB each passed a 256 MB
    limit together. The host adds up the tree's memory and kills the largest process."""
    limits = Limits(max_pids=32, memory_mb=256)
    ex = SandboxExecutor(workspace=workspace, pool_size=0, cgroups=False, limits=limits)
    code = (
        "import os, time\nkids = []\n"
        "for _ in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        b = bytearray(90 * 2**20)\n        b[::4096] = b'x' * len(b[::4096])\n"
        "        time.sleep(4)\n        os._exit(0)\n"
        "    kids.append(pid)\n"
        "[os.waitpid(p, 0)[1] for p in kids]"
    )
    async with Session(ex) as s:
        r = await s.run(code, timeout=30)
        assert r.state_lost or 9 in r.value, r.to_text()
        assert any("MB together, over its memory limit of 256 MB" in w for w in r.warnings)
        assert (await s.run("'alive'", timeout=20)).value == "alive"


def test_a_codemode_workspace_mounts_only_its_files_directory(workspace: str) -> None:
    class FakeWorkspace:
        path = workspace

    ex = SandboxExecutor.for_workspace(FakeWorkspace(), pool_size=0)
    assert ex.workspace == os.path.join(workspace, "files") and os.path.isdir(ex.workspace)


HOLD_FDS_THEN_RUN = """
import asyncio, os, sys
from codemode import Session
from codemode.execution.sandbox import SandboxExecutor

async def main(free: int) -> None:
    held = []
    while (fd := os.open(os.devnull, os.O_RDONLY)) < free:
        held.append(fd)
    os.close(fd)
    async with Session(SandboxExecutor(workspace=sys.argv[1], pool_size=0)) as s:
        print(free, (await s.run("6 * 7")).value, flush=True)
    for fd in held:
        os.close(fd)

for free in (6, 7, 8, 9):
    asyncio.run(main(free))
"""


@needs_bwrap
def test_the_worker_starts_whichever_fds_the_host_process_already_holds(workspace: str) -> None:
    """A launcher that opened the seccomp filter on a fixed fd (9) replaced a worker pipe
    that got that number (a host with a few connections open, e.g. to MCP servers)."""
    done = subprocess.run(
        [sys.executable, "-c", HOLD_FDS_THEN_RUN, workspace],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.stdout.split() == ["6", "42", "7", "42", "8", "42", "9", "42"], done.stderr[-2000:]
