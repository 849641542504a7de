"""The checkpoint benchmark runs in its quick mode and prints its table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("storage", ["file", pytest.param("redis", marks=pytest.mark.redis)])
def test_bench_checkpoint_quick_prints_both_shapes(storage: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "bench_checkpoint.py"),
            "--quick",
            "--executor",
            "subprocess",
            "--storage",
            storage,
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"checkpoint / restore, ms (subprocess, {storage})" in proc.stdout
    assert " bytes " in proc.stdout and " objects " in proc.stdout
