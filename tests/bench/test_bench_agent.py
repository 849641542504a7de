"""The agent benchmark runs (quick mode) and shows code mode's catalog-independent prompt."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_agent_quick_prints_tokens_and_overhead_tables() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_agent.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    assert "Tokens sent per step" in out and "Loop overhead per step" in out
    change = re.search(r"1,000 vs 100 tools: ([+-][\d.]+)%", out)
    assert change is not None and abs(float(change.group(1))) <= 5.0
