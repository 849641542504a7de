"""Ctrl-C in ``codemode run``: the code stops, its output so far is printed, exit 130.

Driven as a user does: SIGINT to the command's process group (what a shell sends), and a
real terminal (a pty that is the command's controlling terminal) where ^C is typed.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "codemode", "run"]
INTERRUPTING = "codemode: interrupting the run (press Ctrl-C again to quit at once)"


def start(*args: str, **popen: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([*CLI, *args], start_new_session=True, **popen)  # type: ignore[call-overload, no-any-return]


SLEEPER = (  # output reaches the terminal when the run ends: a file says it started
    "import time\nprint('before')\nopen('started', 'w').close()\n"
    "for _ in range(6000): time.sleep(0.01)\nprint('after')"
)


def files_dir(tmp_path: Path) -> Path:
    """The workspace's files/: the code's working directory with every executor."""
    files = tmp_path / "ws" / "files"
    files.mkdir(parents=True)
    return files


def wait_for(path: Path, proc: subprocess.Popen[bytes], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"codemode run ended early ({proc.returncode})"
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def read_to_end(fd: int, seen: bytearray, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], deadline - time.monotonic())
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        seen += chunk
    raise AssertionError(f"output never ended: {bytes(seen)!r}")


@pytest.mark.parametrize("executor", ["sandbox", "subprocess", "inprocess"])
def test_ctrl_c_stops_the_code_prints_its_output_so_far_and_exits_130(
    tmp_path: Path, executor: str
) -> None:
    files = files_dir(tmp_path)
    started = files / "started"
    proc = start(
        "--base", str(tmp_path / "ws"), "--executor", executor, "-c", SLEEPER,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=files,
    )  # fmt: skip
    wait_for(started, proc)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert out == b"before\n"  # what it printed so far, and not what comes after
    lines = err.decode().splitlines()
    assert lines[0] == INTERRUPTING
    assert lines[-1].startswith("KeyboardInterrupt")


class Terminal:
    """``codemode run`` in a pty that is its controlling terminal, as a shell starts it."""

    def __init__(self, *args: str, cwd: Path | None = None) -> None:
        self.controller, terminal = os.openpty()
        self.name = os.ttyname(terminal)

        def own_terminal() -> None:
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = start(
            *args, stdin=terminal, stdout=terminal, stderr=terminal,
            preexec_fn=own_terminal, cwd=cwd,
        )  # fmt: skip
        os.close(terminal)
        self.screen = bytearray()

    def type(self, keys: bytes) -> None:
        os.write(self.controller, keys)  # ^C: the terminal sends SIGINT to the job

    def unread(self) -> int:
        """Bytes the terminal holds for its reader (at most its 4 KB read buffer; the rest
        waits in the kernel's queue, which a typed ^C empties unless NOFLSH is set)."""
        count = array.array("i", [0])
        fcntl.ioctl(self.controller, termios.FIONREAD, count)
        return count[0]

    def finish(self) -> tuple[int, str, int]:
        """Exit status, what the screen shows, and the terminal's local modes after."""
        read_to_end(self.controller, self.screen)
        code = self.proc.wait(timeout=60)
        fd = os.open(self.name, os.O_RDWR | os.O_NOCTTY)
        try:
            modes = termios.tcgetattr(fd)[3]
        finally:
            os.close(fd)
        return code, self.screen.decode(errors="replace").replace("\r\n", "\n"), modes

    def close(self) -> None:
        os.close(self.controller)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def test_ctrl_c_typed_in_a_terminal_interrupts_the_run(tmp_path: Path) -> None:
    files = files_dir(tmp_path)
    tty = Terminal(
        "--base", str(tmp_path / "ws"), "--executor", "subprocess", "-c", SLEEPER, cwd=files
    )
    try:
        wait_for(files / "started", tty.proc)
        tty.type(b"\x03")
        code, text, modes = tty.finish()
    finally:
        tty.close()
    assert code == 130, text
    assert "before\n" in text and "after\n" not in text
    assert INTERRUPTING in text
    assert text.rstrip().endswith("KeyboardInterrupt")
    assert not modes & termios.NOFLSH  # the terminal is left as it was


@pytest.mark.parametrize("executor", ["sandbox", "subprocess", "inprocess"])
def test_ctrl_c_typed_in_a_terminal_keeps_the_output_it_has_not_shown_yet(
    tmp_path: Path, executor: str
) -> None:
    # A terminal that is behind (a slow link, a busy emulator) still holds what the run
    # printed when ^C is typed; past 4 KB it waits in the queue a typed ^C empties.
    files = files_dir(tmp_path)
    code = (  # one write: one live chunk, one write to the terminal
        "import sys, time\nsys.stdout.write('x' * 8000 + '\\nbefore\\n')\n"
        "open('started', 'w').close()\nfor _ in range(6000): time.sleep(0.01)\n"
    )
    tty = Terminal("--base", str(tmp_path / "ws"), "--executor", executor, "-c", code, cwd=files)
    try:
        wait_for(files / "started", tty.proc)
        deadline = time.monotonic() + 60
        while tty.unread() < 4000:  # the terminal's reader is 4 KB behind
            assert time.monotonic() < deadline, f"only {tty.unread()} bytes arrived"
            time.sleep(0.02)
        tty.type(b"\x03")
        status, text, modes = tty.finish()
    finally:
        tty.close()
    assert status == 130, text
    assert "x" * 8000 + "\nbefore\n" in text
    assert text.rstrip().endswith("KeyboardInterrupt")
    assert not modes & termios.NOFLSH


def test_a_second_ctrl_c_typed_in_a_terminal_leaves_it_as_it_was(tmp_path: Path) -> None:
    started = tmp_path / "started"
    stubborn = (
        f"import time\nprint('ready')\nopen({str(started)!r}, 'w').close()\n"
        "while True:\n    try:\n        time.sleep(60)\n"
        "    except KeyboardInterrupt:\n        print('ignored')\n"
    )
    tty = Terminal("--no-tools", "--executor", "subprocess", "-c", stubborn)
    try:
        wait_for(started, tty.proc)
        tty.type(b"\x03")
        deadline = time.monotonic() + 60
        while INTERRUPTING.encode() not in tty.screen:  # the first press was handled
            assert time.monotonic() < deadline and tty.proc.poll() is None, bytes(tty.screen)
            if select.select([tty.controller], [], [], 0.1)[0]:
                tty.screen += os.read(tty.controller, 65536)
        tty.type(b"\x03")
        code, text, modes = tty.finish()
    finally:
        tty.close()
    assert code == 130, text
    assert text.rstrip().endswith("codemode: stopped")
    assert not modes & termios.NOFLSH


def test_a_second_ctrl_c_quits_at_once_and_leaves_no_worker_behind(tmp_path: Path) -> None:
    pid_file = tmp_path / "worker.pid"
    stubborn = (
        f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "print('ready')\n"
        "while True:\n"
        "    try:\n        time.sleep(60)\n"
        "    except KeyboardInterrupt:\n        print('ignored', flush=True)\n"
    )
    proc = start(
        "--no-tools", "--executor", "subprocess", "-c", stubborn,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_for(pid_file, proc)
    assert proc.stderr is not None
    os.killpg(proc.pid, signal.SIGINT)
    first = proc.stderr.readline().decode()  # the first press was handled...
    assert first == INTERRUPTING + "\n"
    assert proc.poll() is None  # ...and the stubborn code is still running
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert err.decode().splitlines() == ["codemode: stopped"]
    assert out == b""  # nothing printed: the output stayed in the killed worker
    worker = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(worker, 0)


def test_ctrl_c_while_the_code_waits_for_a_hung_server_exits_130(tmp_path: Path) -> None:
    base = tmp_path / "ws"
    base.mkdir()
    hang = [sys.executable, "-c", "import time; time.sleep(60)"]
    servers = {"mcpServers": {"hung": {"command": hang[0], "args": hang[1:]}}}
    (base / "mcp.json").write_text(json.dumps(servers))
    calling, ran = tmp_path / "calling", tmp_path / "ran"
    code = f"open({str(calling)!r}, 'w').close()\ntools.hung.anything()\nopen({str(ran)!r}, 'w')"
    proc = start(
        "--base", str(base), "--executor", "subprocess", "-c", code,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    wait_for(calling, proc)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    lines = err.decode().splitlines()
    assert lines[0] == INTERRUPTING and lines[-1].startswith("KeyboardInterrupt")
    assert not ran.exists()
