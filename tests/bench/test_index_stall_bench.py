"""benchmarks/bench_index_stall.py runs end to end in its quick mode and prints its table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_index_stall_benchmark_runs_in_quick_mode() -> None:
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_index_stall.py"),
         "--skills", "3", "--kb", "20", "--rounds", "1"],
        capture_output=True, text=True, timeout=300, env={**os.environ},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "loop stall max ms" in p.stdout and "peak RSS" in p.stdout
