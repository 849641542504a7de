"""The hostile-host benchmark runs end to end (quick mode) and reports every attack."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_hostile_host.py"


@pytest.mark.timeout(600)
def test_quick_hostile_host_benchmark_prints_a_row_per_attack_and_stops_the_forgers() -> None:
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--executor", "subprocess"],
        capture_output=True,
        text=True,
        timeout=500,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    rows = [line for line in out.stdout.splitlines() if "| after " in line]
    assert len(rows) == 5, out.stdout
    forged = [r for r in rows if r.startswith(" frame of")]
    assert all("worker stopped" in r for r in forged[:2]), out.stdout
