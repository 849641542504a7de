"""``codemode run`` asks the person at the terminal; without a terminal the call is refused."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from typing import Any

CODE = "print(tools.notes.delete_note(name='hello'))"


def run_cli(base: Any, **popen: Any) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "codemode", "run", "--base", str(base)]
    argv += ["--executor", "subprocess", "-c", CODE]
    return subprocess.Popen(argv, **popen)


def read_until(fd: int, marker: bytes, seen: bytearray, timeout: float = 90.0) -> None:
    """Read from ``fd`` until ``marker`` shows up (bounded)."""
    deadline = time.monotonic() + timeout
    while marker not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"{marker!r} never came; got {bytes(seen)!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # the child closed the terminal
                chunk = b""
            assert chunk, f"the terminal closed before {marker!r}; got {bytes(seen)!r}"
            seen += chunk


def on_a_terminal(base: Any, answer: bytes) -> tuple[int, str]:
    main, child = pty.openpty()
    proc = run_cli(base, stdin=child, stdout=child, stderr=child, close_fds=True)
    os.close(child)
    seen = bytearray()
    try:
        read_until(main, b"Allow it?", seen)
        os.write(main, answer)
        code = proc.wait(timeout=90)
        while select.select([main], [], [], 0.2)[0]:
            try:
                chunk = os.read(main, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(main)
    return code, seen.decode(errors="replace")


def test_codemode_run_asks_at_the_terminal_and_a_yes_runs_the_call(notes_ws: Any) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    code, out = on_a_terminal(notes_ws.base, b"y\n")
    assert 'the code wants to call notes.delete_note(name="hello")' in out
    assert code == 0, out
    assert "deleted" in out
    assert notes_ws.calls() == ["delete_note"]


def test_a_no_at_the_terminal_refuses_the_call(notes_ws: Any) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    code, out = on_a_terminal(notes_ws.base, b"n\n")
    assert code == 1
    assert "ToolDenied" in out and "a person declined it at the terminal" in out
    assert notes_ws.calls() == []


def test_without_a_terminal_codemode_run_refuses_the_call_and_says_why(notes_ws: Any) -> None:
    notes_ws.configure({"policy": {"destructive": "ask"}})
    proc = run_cli(
        notes_ws.base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert b"no terminal to ask on" in err
    assert notes_ws.calls() == []
