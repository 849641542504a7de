"""benchmarks/bench_observability.py runs end to end in its quick mode and prints its tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_observability_benchmark_runs_in_quick_mode() -> None:
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_observability.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert p.returncode == 0, p.stderr
    assert "run_code with 5 tool calls" in p.stdout
    rows = {line.split("|")[0].strip() for line in p.stdout.splitlines() if "|" in line}
    assert {"off", "metrics", "metrics+tracing", "all (+console run log)"} <= rows
    assert {"SDK on_output", "MCP client (stdio)"} <= rows
    assert "<= 3%" in p.stdout and "<= 5" in p.stdout  # the targets beside the figures


def test_the_benchmark_times_only_the_configurations_and_parts_asked_for() -> None:
    argv = ["--quick", "--config", "metrics", "--parts", "in-process"]
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_observability.py"), *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert p.returncode == 0, p.stderr
    rows = [line.split("|")[0].strip() for line in p.stdout.splitlines() if "|" in line]
    assert rows == ["layers", "off", "metrics"]  # one table: in-process, off beside metrics
    assert "an in-process Python tool" in p.stdout


def test_an_unknown_part_is_refused_naming_the_known_ones() -> None:
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_observability.py"), "--parts", "gpu"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode != 0
    assert "unknown parts ['gpu']" in p.stderr and "in-process" in p.stderr


def test_the_bytecode_count_names_what_tracing_adds_to_a_run() -> None:
    p = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_observability_ops.py"), "--runs", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ},
    )
    assert p.returncode == 0, p.stderr
    assert "metrics+tracing, export process vs off, in-process tool" in p.stdout
    rows = {line.split("|")[0].strip() for line in p.stdout.splitlines() if "|" in line}
    assert {"observe.py:start", "observe.py:returned", "observe.py:run_hook"} <= rows
