"""benchmarks/bench_privacy.py runs end to end in its quick mode and prints its three tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_privacy_benchmark_prints_throughput_latency_and_quality_in_quick_mode() -> None:
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_privacy.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ},
    )
    assert p.returncode == 0, p.stderr
    assert "Tokenization throughput" in p.stdout and "MB/s CPU" in p.stdout
    assert "privacy off vs on" in p.stdout
    assert "Detector quality on the frozen corpus" in p.stdout and "US_SSN" in p.stdout


def test_the_detectors_benchmark_compares_a_tree_with_itself_and_finds_the_same() -> None:
    """benchmarks/privacy/bench_detectors.py: one table, old and new side by side."""
    p = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "privacy" / "bench_detectors.py"),
            "--quick",
            "--rounds=1",
            f"--against={REPO}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if "Detector" in line]
    assert len(rows) >= 12 and not any("FOUND DIFFERS" in r for r in rows)
    assert "customers 10 KB  all" in p.stdout and "MB/s CPU" in p.stdout
