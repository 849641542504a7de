"""benchmarks/bench_guardrails.py runs end to end in its quick mode and prints its tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_guardrails_benchmark_runs_in_quick_mode() -> None:
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_guardrails.py"), "--quick"],
        capture_output=True, text=True, timeout=600, env={**os.environ},
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    for row in ("off", "policy", "audit", "both", "clean", "strings", "findings", "every"):
        assert f"\n {row} " in p.stdout, row
    assert "policy + audit add" in p.stdout and "slowest cell" in p.stdout
