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
