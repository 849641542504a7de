"""The workflow benchmark runs (quick mode) and prints its two tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_workflows_quick_prints_overhead_and_resume_tables() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_workflows.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "Workflow engine overhead per step" in out and "Resume (" in out
    for row in ("tool steps", "set steps", "code steps", "resume after a crash at step 100"):
        assert row in out
