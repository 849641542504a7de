"""The worker's pipes reach it whatever numbers they have on the host.

Each case runs a host process of its own (so it controls which fd numbers are free)
that arranges its fds, starts a session and checks the three pipes a run depends on:
the protocol (a value comes back), fd-level stdout (``os.write(1, ...)`` is captured)
and the control pipe (a timeout interrupts the code and the state survives).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.security

HOST = r"""
import asyncio, json, os, sys
from codemode import Session, SubprocessExecutor
from codemode.execution.sandbox import SandboxExecutor

kind, arrange, out, ws = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]

def hold_all_but(free):
    # take every fd below max(free) + 8 except those in `free`
    held, top = [], max(free) + 8
    while True:
        fd = os.open(os.devnull, os.O_RDONLY)
        if fd > top:
            os.close(fd)
            break
        held.append(fd)
    for fd in free:
        if fd in held:
            os.close(fd)
            held.remove(fd)
    return held

async def main():
    if kind == "sandbox":
        ex = SandboxExecutor(workspace=ws, pool_size=0, interrupt_grace=0.5)
    else:
        ex = SubprocessExecutor(pool_size=0, interrupt_grace=0.5)
    await ex.warm()  # one-off checks (the sandbox's probe) before the fds are arranged
    held = []
    if arrange.startswith("hole:"):
        start = int(arrange[5:])
        held = hold_all_but(range(start, start + 4))  # the next two pipes get these numbers
    elif arrange == "many":
        held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    elif arrange == "closed-stdio":
        os.close(0)
        os.close(1)  # the next pipe is (0, 1)
    report = {}
    try:
        async with Session(ex) as s:
            code = "import os\nos.write(1, b'fd-level')\nkept = 41\nkept + 1"
            r = await asyncio.wait_for(s.run(code), 60)
            report.update(value=r.value, stdout=r.stdout, error=str(r.error or ""))
            r = await asyncio.wait_for(s.run("while True: pass", timeout=1), 60)
            report["timed_out"], report["state_lost"] = r.timed_out, r.state_lost
            report["kept"] = (await asyncio.wait_for(s.run("kept"), 60)).value
    except Exception as exc:
        report["failed"] = f"{type(exc).__name__}: {exc}"
    with open(out, "w") as fh:
        json.dump(report, fh)

asyncio.run(main())
"""

CASES = [
    ("sandbox", "hole:8"),  # the worker's stdout pipe is fd 9 in the launch line
    ("sandbox", "hole:7"),  # its control pipe is fd 9
    ("sandbox", "many"),  # every pipe numbered above 1,024
    ("sandbox", "closed-stdio"),  # the host runs without stdin/stdout: pipes get 0 and 1
    ("subprocess", "closed-stdio"),
]


@pytest.mark.parametrize(("kind", "arrange"), CASES, ids=[f"{k}-{a}" for k, a in CASES])
def test_a_session_works_whatever_numbers_its_pipes_get(kind: str, arrange: str) -> None:
    if kind == "sandbox" and shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed")
    ws = tempfile.mkdtemp(prefix="cm-sec-fds-", dir="/var/tmp")
    out = Path(ws) / "report.json"
    try:
        proc = subprocess.run(
            [sys.executable, "-c", HOST, kind, arrange, str(out), ws],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        assert out.exists(), proc.stderr[-3000:]
        report = json.loads(out.read_text())
    finally:
        shutil.rmtree(ws, ignore_errors=True)
    assert "failed" not in report, report
    assert report["value"] == 42 and report["stdout"] == "fd-level", report
    assert report["timed_out"] and not report["state_lost"], report
    assert report["kept"] == 41, report


# -- jails (pip, upstream servers) ---------------------------------------------------------
JAILED = (
    'for fd in "$@"; do echo "pipe $fd" > "/proc/self/fd/$fd" || exit 3; done; '
    "grep -E '^Seccomp:' /proc/self/status"
)


@pytest.mark.parametrize(
    "given", [(), (9,), (3, 9, 12), (3, 4, 5, 6, 7, 8, 12)], ids=["none", "9", "3-9-12", "3-8-12"]
)
def test_a_jailed_command_keeps_the_fds_it_is_given_and_gets_the_filter(
    given: tuple[int, ...],
) -> None:
    from codemode.isolation import jail

    if jail.available() is not None:
        pytest.skip(str(jail.available()))
    pipes = {}
    for fd in given:  # a pipe whose write end has exactly this number in the child
        r, w = os.pipe()
        pipes[fd] = (r, w)
    spec = jail.JailSpec()
    launch = jail.build(spec, ["/bin/sh", "-c", JAILED, "jailed", *map(str, given)], keep_fds=given)

    def arrange() -> None:  # in the child: out of the way first, then at their numbers
        high = {fd: fcntl.fcntl(w, fcntl.F_DUPFD, 100) for fd, (_, w) in pipes.items()}
        for fd, w in high.items():
            os.dup2(w, fd)

    try:
        proc = subprocess.run(
            launch.argv,
            capture_output=True,
            text=True,
            timeout=60,
            preexec_fn=arrange,
            close_fds=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == ["Seccomp:", "2"], proc.stdout
        for fd, (r, w) in pipes.items():
            os.close(w)
            assert os.read(r, 100) == f"pipe {fd}\n".encode(), fd
    finally:
        launch.cleanup()
        for r, w in pipes.values():
            for end in (r, w):
                with contextlib.suppress(OSError):
                    os.close(end)


def test_a_jail_given_every_fd_sh_can_name_is_refused_with_the_reason() -> None:
    from codemode.isolation import jail

    with pytest.raises(ValueError, match="given fds 3-9 leaves no number sh can open"):
        jail.build(jail.JailSpec(), ["/bin/true"], keep_fds=range(3, 10))
