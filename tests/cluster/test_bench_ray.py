"""The Ray benchmark runs in its quick mode against the tests' cluster and prints its
tables with the target beside the figure."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import RayCluster

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]


def test_bench_ray_quick_prints_run_overhead_tool_calls_start_times_and_throughput(
    cluster: RayCluster,
) -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_ray.py"), "--quick",
         "--address", cluster.address],
        capture_output=True, text=True, timeout=600, env=dict(os.environ), cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'warm run("x+1") (ms)' in r.stdout
    assert "added p50 by Ray:" in r.stdout and "(target <= 1.0 ms:" in r.stdout
    assert "added p50 with Ray calls only (ray.direct false, or the link down)" in r.stdout
    assert "run with one tool call served on the host (ms)" in r.stdout
    assert "ray (a ready actor from the pool)" in r.stdout
    assert "throughput: 4 concurrent sessions" in r.stdout and "the given cluster" in r.stdout
    assert "runs/s per core" in r.stdout


def test_bench_ray_floor_prints_the_floor_per_actor_option_and_both_actor_shapes(
    cluster: RayCluster,
) -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_ray_floor.py"), "--calls", "18",
         "--rounds", "3", "--address", cluster.address],
        capture_output=True, text=True, timeout=600, env=dict(os.environ), cwd=REPO,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    for row in ("async actor, task events on", "plain actor, task events off",
                "ray: SessionActor, direct link", "ray: SessionActor, Ray calls only",
                "ray: async actor, Ray calls only"):  # fmt: skip
        assert row in r.stdout
