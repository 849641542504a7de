"""`codemode run` prints output, value and errors, and exits non-zero on failure."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CLI = [sys.executable, "-m", "codemode"]


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "run", *args], capture_output=True, text=True, timeout=120, input=stdin
    )


def test_run_code_prints_stdout_then_the_value() -> None:
    p = run_cli("--no-tools", "--executor", "subprocess", "-c", "print('hi')\n6 * 7")
    assert p.returncode == 0, p.stderr
    assert p.stdout == "hi\n42\n"


def test_run_file_reports_the_error_and_exits_1(tmp_path: Path) -> None:
    f = tmp_path / "job.py"
    f.write_text("x = 1\nraise ValueError('bad input')\n")
    p = run_cli("--no-tools", "--executor", "subprocess", str(f))
    assert p.returncode == 1
    assert "ValueError: bad input" in p.stderr and "line 2" in p.stderr


def test_timeout_option_stops_the_code() -> None:
    p = run_cli(
        "--no-tools", "--executor", "inprocess", "--timeout", "0.5", "-c", "while True: pass"
    )
    assert p.returncode == 1
    assert "timeout" in p.stderr


def test_code_and_file_together_is_a_usage_error(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_text("1")
    p = run_cli("--no-tools", "-c", "1", str(f))
    assert p.returncode == 2 and "exactly one" in p.stderr


def test_run_prints_output_as_the_code_prints_it() -> None:
    code = "import time\nprint('first', flush=True)\ntime.sleep(30)\nprint('late')"
    p = subprocess.Popen(
        [*CLI, "run", "--live", "--no-tools", "--executor", "subprocess", "-c", code],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    with p.stdout:
        try:
            line = p.stdout.readline()
            still_running = p.poll() is None  # the line came while the code still sleeps
        finally:
            p.kill()
            p.wait(timeout=30)
    assert line == "first\n" and still_running


def test_output_of_child_processes_and_the_cut_marker_still_follow() -> None:
    code = "import os\nprint('x' * 10)\nos.system('echo from-child')\nprint('tail', end='')"
    p = run_cli("--live", "--no-tools", "--executor", "subprocess", "-c", code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("xxxxxxxxxx") == 1
    assert p.stdout == "xxxxxxxxxx\ntailfrom-child\n"  # child output comes with the result


def test_live_does_not_go_with_json() -> None:
    p = run_cli("--live", "--json", "--no-tools", "-c", "1")
    assert p.returncode == 2
    assert "--live prints to the terminal" in p.stderr
