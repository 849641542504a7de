"""The arena for hostile code: an attacker session, a bystander session, host canaries.

Every case runs its snippet in the attacker's sandbox *while* the bystander (another
sandboxed session, with its own workspace) computes something. Afterwards the fixture
checks that the bystander still holds its state and its files, that the host's canary
files and environment are untouched, that the host can still start processes, and that
no process of the attacker survives the close of its session (its cgroups are empty and
removed).
"""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import pytest

from codemode import Session
from codemode.execution.bwrap import SANDBOX_UID
from codemode.execution.limits import Limits, detect_cgroups
from codemode.execution.sandbox import SandboxExecutor
from codemode.result import ExecutionResult

pytestmark = pytest.mark.security

# CI (.ci/run) sets this: then the hostile suite may not be skipped, in whole or in part.
STRICT = os.environ.get("CODEMODE_SECURITY_STRICT") == "1"


def _why_no_sandbox() -> str | None:
    """Why the sandbox cannot run here (bubblewrap, user namespaces, a test start), or None."""
    checks = SandboxExecutor(pool_size=0).verify()
    missing = [f"{c.name}: {c.detail} (fix: {c.fix})" for c in checks if not c.ok and c.required]
    return "; ".join(missing) or None


_WHY = _why_no_sandbox()
if _WHY is not None and STRICT:
    pytest.exit(
        f"the hostile-code suite cannot run and CODEMODE_SECURITY_STRICT=1 forbids "
        f"skipping it: {_WHY}",
        returncode=3,
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Outside CI, a machine without a sandbox skips this suite, saying why."""
    if _WHY is None:
        return
    here = os.path.dirname(__file__)
    mark = pytest.mark.skip(reason=f"the sandbox cannot run here: {_WHY}")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(mark)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """In strict mode a skipped hostile test is a failure that says why it was skipped."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if STRICT and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"hostile test skipped in strict mode (CI): {reason}"


X86_64 = platform.machine() == "x86_64"

SUITE_LIMITS = Limits(
    memory_mb=384, max_pids=64, cpu_cores=1.0, file_size_mb=64, open_files=256, tmp_size_mb=32
)

# Helpers defined in the attacker's session before each case.
PRELUDE = r"""
import os, sys, socket, ctypes, errno
def attempt(fn, *a, **k):
    try:
        r = fn(*a, **k)
    except BaseException as e:
        return "blocked:" + type(e).__name__
    return "DONE:" + repr(r)[:200]
_libc = ctypes.CDLL(None, use_errno=True)
def syscall(nr, *args):
    ctypes.set_errno(0)
    r = _libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return r, ctypes.get_errno()
def read(path):
    with open(path, "rb") as fh:
        return fh.read()
def status():
    return read("/proc/self/status").decode()
"""


@dataclass
class Host:
    """Canaries the test places on the host before the attack."""

    secret: str
    tmp_canary: str
    home_canary: str
    env_name: str
    bystander_ws: str
    attacker_ws: str
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass
class Arena:
    host: Host
    attacker: Session
    bystander: Session
    executor: SandboxExecutor

    async def attack(self, code: str, timeout: float = 5.0) -> ExecutionResult:
        """Run ``code`` as the attacker while the bystander works; check the bystander."""
        work = "sum(i * i for i in range(200_000))"
        hostile, calm = await asyncio.gather(
            self.attacker.run(code, timeout=timeout), self.bystander.run(work, timeout=30)
        )
        assert calm.value == sum(i * i for i in range(200_000)), calm.to_text()
        return hostile

    async def value(self, code: str, timeout: float = 5.0) -> object:
        r = await self.attack(code, timeout)
        assert r.error is None, r.to_text()
        return r.value


def _make_ws(tag: str) -> str:
    return tempfile.mkdtemp(prefix=f"cm-sec-{tag}-", dir="/var/tmp")


@pytest.fixture
def host() -> Iterator[Host]:
    secret = "canary-" + uuid.uuid4().hex
    tmp_canary = os.path.join("/tmp", f"codemode-canary-{uuid.uuid4().hex}")
    home = os.path.expanduser("~")
    home_canary = os.path.join(home, f".codemode-canary-{uuid.uuid4().hex}")
    env_name = "CODEMODE_CANARY_SECRET"
    h = Host(secret, tmp_canary, home_canary, env_name, _make_ws("bystander"), _make_ws("attacker"))
    for path in (tmp_canary, home_canary):
        with open(path, "w") as fh:
            fh.write(secret)
        os.chmod(path, 0o644)  # readable by anyone who can reach it: only the sandbox stops it
        h.files[path] = secret.encode()
    bystander_file = os.path.join(h.bystander_ws, "notes.txt")
    with open(bystander_file, "w") as fh:
        fh.write(secret)
    os.chmod(bystander_file, 0o644)
    h.files[bystander_file] = secret.encode()
    os.environ[env_name] = secret
    try:
        yield h
    finally:
        os.environ.pop(env_name, None)
        for path in (tmp_canary, home_canary):
            with _quiet():
                os.unlink(path)
        for ws in (h.bystander_ws, h.attacker_ws):
            shutil.rmtree(ws, ignore_errors=True)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return True


@pytest.fixture
async def arena(host: Host) -> AsyncIterator[Arena]:
    executor = SandboxExecutor(
        workspace=host.attacker_ws, limits=SUITE_LIMITS, pool_size=0, interrupt_grace=0.5
    )
    bystander_ex = SandboxExecutor(workspace=host.bystander_ws, limits=SUITE_LIMITS, pool_size=0)
    attacker, bystander = Session(executor), Session(bystander_ex)
    await asyncio.gather(attacker.start(), bystander.start())
    try:
        await bystander.run("kept = 'bystander state'")
        r = await attacker.run(PRELUDE)
        assert r.error is None, r.to_text()
        yield Arena(host, attacker, bystander, executor)
        # the bystander is unharmed: its state, its files, its ability to work
        assert (await bystander.run("kept")).value == "bystander state"
        r = await bystander.run("open('notes.txt').read()")
        assert r.value == host.secret, r.to_text()
    finally:
        await asyncio.gather(attacker.close(), bystander.close())
    # the host is unharmed
    for path, content in host.files.items():
        with open(path, "rb") as fh:
            assert fh.read() == content, f"{path} was changed"
    assert os.environ.get(host.env_name) == host.secret
    assert subprocess.run(["true"], timeout=10).returncode == 0
    # nothing of either session survives its close: their cgroups were emptied and removed
    assert executor.cgroup_dirs or not detect_cgroups().base
    for path in executor.cgroup_dirs + bystander_ex.cgroup_dirs:
        assert not os.path.exists(path), f"{path} survived"


@pytest.fixture
def victim() -> Iterator[subprocess.Popen[bytes]]:
    """A host process with the sandbox's own uid, outside any sandbox: the sandbox must not
    be able to signal it, though the kernel's uid check alone would allow it."""
    argv = ["sleep", "120"]
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups",
                *argv]  # fmt: skip
    proc = subprocess.Popen(argv)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def blocked(value: object) -> bool:
    return isinstance(value, str) and value.startswith("blocked:")


def denied(value: object) -> bool:
    """A raw syscall returned -1 with EPERM (or ENOSYS)."""
    return (
        isinstance(value, list) and value[0] == -1 and value[1] in (1, 38)  # EPERM, ENOSYS
    )
