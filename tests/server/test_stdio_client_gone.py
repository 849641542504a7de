"""A stdio client that closes its end of the server's stdout is gone: the server stops at
once (running calls cancelled, workers stopped) and exits 0, with no traceback and
without waiting for stdin to close. Before, the first answer it wrote ended it with a
``BrokenPipeError`` traceback and status 1, and only once stdin closed; with no answer
to write, it never noticed, and a long call kept its worker."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from .conftest import serve_argv
from .test_stdio import _alive
from .test_stdio_wire import INIT, WAIT


def _call(n: int, code: str) -> dict[str, Any]:
    params = {"name": "run_code", "arguments": {"code": code}}
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def _send(proc: subprocess.Popen[bytes], message: dict[str, Any]) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _recv(reader: IO[bytes]) -> dict[str, Any]:
    line = reader.readline()
    assert line, "the server closed stdout"
    message: dict[str, Any] = json.loads(line)
    return message


def _start(base: Path, stdout: Any, tmp: Path) -> tuple[subprocess.Popen[bytes], IO[bytes]]:
    err = (tmp / "stderr.txt").open("wb")
    proc = subprocess.Popen(
        serve_argv(base, "--executor", "subprocess"),
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=err,
    )
    err.close()
    return proc, err


def _worker_pid_then_sleep(proc: subprocess.Popen[bytes], reader: IO[bytes]) -> int:
    """Start a session, learn its worker's pid, leave a long call running in it."""
    _send(proc, INIT)
    assert _recv(reader)["id"] == 0
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(proc, _call(1, "import os; print(os.getpid())"))
    answer = _recv(reader)
    pid = int(answer["result"]["structuredContent"]["stdout"])
    _send(proc, _call(2, "import time; time.sleep(300)"))
    time.sleep(1.0)  # the call is running
    return pid


def _ends_cleanly(proc: subprocess.Popen[bytes], worker: int, tmp: Path) -> None:
    try:
        status = proc.wait(timeout=WAIT)  # stdin is still open
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError(f"the server still ran {WAIT} s after its client left") from None
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
    stderr = (tmp / "stderr.txt").read_text()
    assert status == 0, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert "the client closed its end of stdout" in stderr, stderr
    deadline = time.monotonic() + 10
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(worker), "the session's worker outlived the server"


def test_a_client_that_closes_the_pipe_it_reads_is_noticed_while_a_call_runs(
    workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    proc, _ = _start(workspace[0], subprocess.PIPE, tmp_path)
    assert proc.stdout is not None
    worker = _worker_pid_then_sleep(proc, proc.stdout)
    proc.stdout.close()  # nothing more is written to it: the server must notice anyway
    _ends_cleanly(proc, worker, tmp_path)


def test_a_write_to_a_client_socket_closed_on_its_side_stops_the_server_cleanly(
    workspace: tuple[Path, Path], tmp_path: Path
) -> None:
    # A socket is not watched (it can be readable for other reasons): the failed write
    # of the next answer is what tells the server, and it must not end in a traceback.
    ours, theirs = socket.socketpair()
    proc, _ = _start(workspace[0], theirs.fileno(), tmp_path)
    theirs.close()
    reader = ours.makefile("rb")
    try:
        worker = _worker_pid_then_sleep(proc, reader)
    finally:
        reader.close()
        ours.close()
    _send(proc, {"jsonrpc": "2.0", "id": 3, "method": "ping"})
    _ends_cleanly(proc, worker, tmp_path)
